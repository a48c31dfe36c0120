# JAX Playground: `make run` to set up and start, `make check` for the fast tier (about a minute),
# `make test` to set up and test everything.

PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
PORT ?= 8000
NODE ?= node
VERSION = $(shell sed -n 's/^__version__ = "\(.*\)"/\1/p' jaxplay/__init__.py)
HOST ?= 127.0.0.1
# JAX runtimes besides the venv's own JAX (sandbox/runtimes/pins.py pins their libraries), installed once per
# host in RUNTIMES_DIR and shared by every checkout; `make run` offers RUN_RUNTIMES, the tests TEST_RUNTIMES.
# A run that names no version gets the newest offered. NEWEST_JAX needs Python 3.12 or newer, found on PATH or
# in pyenv (sandbox/runtimes/pythons.py): a host without one goes on without it, and the install says why.
RUNTIMES_DIR ?= $(HOME)/.local/share/jaxplay/runtimes
NEWEST_JAX ?= 0.12.0.1
RUN_RUNTIMES ?= $(NEWEST_JAX),0.4.38
TEST_RUNTIMES ?= 0.4.38,0.6.2,$(NEWEST_JAX)
APT_RUN := bubblewrap python3-venv
APT_TEST := chromium fonts-dejavu-core docker-compose postgresql redis-server kubectl prometheus strace
export PIP_DISABLE_PIP_VERSION_CHECK := 1
comma := ,

.PHONY: run check test lint bench frontend frontend-test dist image image-gpu system-deps system-test-deps clean runtimes run-runtimes

run: system-deps $(VENV)/.installed frontend run-runtimes
	$(BIN)/jaxplay serve --host $(HOST) --port $(PORT) --runtimes $(RUN_RUNTIMES) --runtimes-dir $(RUNTIMES_DIR)

# The tiers are the folders of tests/ (tests/conftest.py marks each test by its folder). The tests wait on
# servers, sandboxes and browsers more than they compute, so pytest-xdist runs them in TEST_PROCESSES
# processes, a file to a process (a file's servers start once); the browser files go last in each.
TEST_PROCESSES ?= 3
CHECK_PROCESSES ?= 2
# How many of the slowest tests each run lists, with their times.
SLOWEST ?= 30
PYTEST := JAXPLAY_TEST_RUNTIMES=$(TEST_RUNTIMES) JAXPLAY_RUNTIMES_DIR=$(RUNTIMES_DIR) $(BIN)/pytest

# Before a commit: lint, the settings reference, types, and the unit tier of the page (npm test: Vitest)
# and of the Python.
check: $(VENV)/.installed-test frontend-test lint
	npm --prefix frontend test
	$(PYTEST) -q -m unit -n $(CHECK_PROCESSES) --dist loadfile --durations=$(SLOWEST)

# Everything: what check runs, then every tier, printing the 30 slowest tests.
test: system-deps system-test-deps $(VENV)/.installed-test frontend-test runtimes lint
	npm --prefix frontend test
	$(PYTEST) -q -n $(TEST_PROCESSES) --dist loadfile --durations=$(SLOWEST)

# ruff, the settings reference against jaxplay/settings.py, and the page's types (tsc).
lint: $(VENV)/.installed-test frontend-test
	$(BIN)/ruff check jaxplay server sandbox tests bench setup.py
	$(BIN)/python -m jaxplay.settings_doc --check
	npm --prefix frontend run --silent typecheck

# Installing is idempotent: a runtime already complete costs a file check (~1 s for the command).
runtimes: $(VENV)/.installed
	$(BIN)/jaxplay runtimes add $(subst $(comma), ,$(TEST_RUNTIMES)) --optional $(NEWEST_JAX) --runtimes-dir $(RUNTIMES_DIR)

run-runtimes: $(VENV)/.installed
	$(BIN)/jaxplay runtimes add $(subst $(comma), ,$(RUN_RUNTIMES)) --optional $(NEWEST_JAX) --runtimes-dir $(RUNTIMES_DIR)

bench: $(VENV)/.installed-test frontend runtimes
	$(BIN)/python bench/latency.py
	$(BIN)/python bench/timing_fidelity.py
	$(BIN)/python bench/warm.py
	$(BIN)/python bench/cpu_fairness.py
	$(BIN)/python bench/perf_views.py
	$(BIN)/python bench/inspect_overhead.py
	$(BIN)/python bench/sharing.py
	$(BIN)/python bench/scale.py
	$(BIN)/python bench/workshop.py
	$(BIN)/python bench/libraries.py
	JAXPLAY_TEST_RUNTIMES=$(TEST_RUNTIMES) JAXPLAY_RUNTIMES_DIR=$(RUNTIMES_DIR) $(BIN)/python bench/runtimes.py

# Builds the page only when its sources are newer than frontend/dist and Node >= 20.19
# is usable; otherwise serves the assets already built, and says which (NODE=... picks a Node).
frontend:
	@NODE=$(NODE) ./scripts/frontend-build frontend

# The same, plus the page's test dependencies (vitest; axe-core, which the browser tests inject from disk).
frontend-test:
	@FRONTEND_DEPS=1 NODE=$(NODE) ./scripts/frontend-build frontend

# A wheel and an sdist in dist/, both carrying the built page (setup.py copies it in).
dist: $(VENV)/.installed-test frontend
	rm -rf dist
	$(BIN)/python -m build --outdir dist .

# Container images (need a Docker engine): the CPU image, and the GPU worker image.
image:
	docker build -t jaxplay:$(VERSION) -t jaxplay:latest .

image-gpu:
	docker build --target gpu -t jaxplay-gpu:$(VERSION) -t jaxplay-gpu:latest .

# Debian packages, installed only when missing (needs root; otherwise prints the command to run).
# Node is not among them: Debian 12's nodejs (18) cannot build the page; scripts/frontend-build
# checks the version and says what to install.
system-deps:
	@./scripts/apt-ensure $(APT_RUN)

system-test-deps:
	@./scripts/apt-ensure $(APT_TEST)

$(VENV)/.created:
	@$(PYTHON) -c 'import sys; assert sys.version_info >= (3, 11), "Python 3.11+ is required"'
	$(PYTHON) -m venv $(VENV)
	touch $@

$(VENV)/.installed: $(VENV)/.created pyproject.toml setup.py
	$(BIN)/pip install -q -e '.[worker-libs]'
	touch $@

$(VENV)/.installed-test: $(VENV)/.created pyproject.toml setup.py
	$(BIN)/pip install -q -e '.[test,worker-libs]'
	touch $@ $(VENV)/.installed

clean:
	rm -rf $(VENV) frontend/node_modules frontend/dist dist build
