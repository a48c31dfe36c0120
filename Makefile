# JAX Playground: `make run` to set up and start, `make test` to set up and test everything.

PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
PORT ?= 8000
HOST ?= 127.0.0.1
APT_RUN := bubblewrap python3-venv
APT_TEST := chromium fonts-dejavu-core
export PIP_DISABLE_PIP_VERSION_CHECK := 1

.PHONY: run test lint bench frontend system-deps system-test-deps clean

run: system-deps $(VENV)/.installed frontend
	$(BIN)/jaxplay serve --host $(HOST) --port $(PORT)

test: system-deps system-test-deps $(VENV)/.installed-test frontend
	$(BIN)/ruff check jaxplay server sandbox tests bench
	$(BIN)/pytest -q

bench: $(VENV)/.installed-test frontend
	$(BIN)/python bench/latency.py
	$(BIN)/python bench/timing_fidelity.py
	$(BIN)/python bench/inspect_overhead.py
	$(BIN)/python bench/sharing.py
	$(BIN)/python bench/workshop.py
	$(BIN)/python bench/libraries.py

frontend: frontend/dist/assets/app.js

# Debian packages, installed only when missing (needs root; otherwise prints the command to run).
system-deps:
	@./scripts/apt-ensure $(APT_RUN)
	@command -v npm >/dev/null || ./scripts/apt-ensure nodejs npm

system-test-deps:
	@./scripts/apt-ensure $(APT_TEST)

$(VENV)/.created:
	@$(PYTHON) -c 'import sys; assert sys.version_info >= (3, 11), "Python 3.11+ is required"'
	$(PYTHON) -m venv $(VENV)
	touch $@

$(VENV)/.installed: $(VENV)/.created pyproject.toml
	$(BIN)/pip install -q -e '.[worker-libs]'
	touch $@

$(VENV)/.installed-test: $(VENV)/.created pyproject.toml
	$(BIN)/pip install -q -e '.[test,worker-libs]'
	touch $@ $(VENV)/.installed

frontend/node_modules/.installed: frontend/package.json frontend/package-lock.json
	cd frontend && npm ci --no-audit --no-fund
	touch $@

frontend/dist/assets/app.js: frontend/node_modules/.installed $(shell find frontend/src -type f 2>/dev/null) frontend/vite.config.ts frontend/tsconfig.json
	cd frontend && npm run build

clean:
	rm -rf $(VENV) frontend/node_modules frontend/dist
