"""Every hint against the real error of every JAX runtime offered, not one JAX's wording of it.

Each entry's ``failing`` program runs on the worker's own JAX and on each
test runtime (``JAXPLAY_TEST_RUNTIMES``, installed by ``make test``), with that
runtime's own Python, through the real runner (tests/runner_harness.py, as
the zygote forks it): where that JAX raises, the entry's hint must be the one
shown; where it still had the API (``fails_from``), the program must run.
The ``correct`` programs run without an error or a hint everywhere.
"""

from __future__ import annotations

import re
import sys
from importlib import metadata
from pathlib import Path

import pytest

from jaxplay.sandbox.learning.error_hints_data import HINTS
from jaxplay.sandbox.runtimes import store
from tests.runner_harness import run_programs
from tests.runtimes_server import TEST_RUNTIMES, runtimes_dir

REPO = Path(__file__).resolve().parents[2]
ENV = {"PATH": "/usr/bin:/bin", "JAX_PLATFORMS": "cpu", "HOME": "/tmp"}


@pytest.fixture(scope="module", params=[None, *TEST_RUNTIMES], ids=lambda v: v or "own")
def runtime_outcomes(request: pytest.FixtureRequest) -> tuple[str, dict[str, list[dict]]]:
    """(JAX version, {"<entry>:failing" | "<entry>:correct": the run's events}) on one runtime."""
    version = request.param
    interpreter = None
    if version is not None:
        if store.record_of(runtimes_dir(), version) is None:
            pytest.skip(f"JAX {version} is not installed in {runtimes_dir()}: run `make runtimes`")
        interpreter = str(store.folder_for(runtimes_dir(), version) / "bin" / "python")
    programs = {f"{hint.name}:failing": hint.failing for hint in HINTS}
    programs |= {f"{hint.name}:correct": hint.correct for hint in HINTS}
    results = run_programs(list(programs.values()), cwd=str(REPO), env=ENV,
                           python=interpreter or sys.executable)
    return version or metadata.version("jax"), dict(zip(programs, results, strict=True))


def error_of(events: list[dict]) -> dict | None:
    return next((e for e in events if e["type"] == "error"), None)


@pytest.mark.parametrize("hint", HINTS, ids=[h.name for h in HINTS])
def test_each_hint_answers_the_real_error_of_each_runtime(runtime_outcomes, hint) -> None:
    version, outcomes = runtime_outcomes
    error = error_of(outcomes[f"{hint.name}:failing"])
    if hint.fails_from and store.version_key(version) < store.version_key(hint.fails_from):
        assert error is None, f"JAX {version} still has what {hint.name} is about, yet: {error}"
        return
    assert error is not None, f"{hint.name}: the failing program ran on JAX {version}"
    assert error["ename"] in hint.exceptions, error
    found = re.search(hint.message, error["message"], re.DOTALL)
    assert found, f"JAX {version} says {error['ename']}: {error['message']!r}; {hint.name} does not match it"
    assert error.get("hint") == found.expand(hint.hint), error  # this entry answered, not an earlier one


@pytest.mark.parametrize("hint", HINTS, ids=[h.name for h in HINTS])
def test_each_corrected_program_runs_without_a_hint_on_each_runtime(runtime_outcomes, hint) -> None:
    version, outcomes = runtime_outcomes
    events = outcomes[f"{hint.name}:correct"]
    assert error_of(events) is None, (version, error_of(events))
    assert not any("hint" in e for e in events)
