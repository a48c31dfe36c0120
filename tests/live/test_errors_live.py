"""Errors that teach, through the real server, worker and sandbox: the hint, short paths, full tracebacks."""

from __future__ import annotations

from tests.conftest import done_of


def error_of(events: list[dict]) -> dict:
    assert done_of(events)["status"] == "error", events[-3:]
    return next(e for e in events if e["type"] == "error")


def test_a_moved_api_gets_its_hint_and_the_path_is_short(live) -> None:
    error = error_of(live.run("from jax.experimental import stax\n"))
    assert "jax.example_libraries.stax" in error["hint"]
    assert "site-packages/jax/experimental/__init__.py" in error["message"]
    assert not any(part in error["message"] for part in ("/lib/python", "/usr/", "/opt/", "/work/", "/root/"))


def test_jax_traceback_filtering_off_reaches_jax_in_the_sandbox(live) -> None:
    code = ("import os\nos.environ['JAX_TRACEBACK_FILTERING'] = 'off'\n"
            "import jax, jax.numpy as jnp\njax.jit(lambda x: x.reshape(7))(jnp.ones(3))\n")
    error = error_of(live.run(code))
    assert error["line"] == 4 and "site-packages/jax/_src/" in error["traceback"]
    filtered = error_of(live.run(code.replace("'off'", "'auto'")))
    assert "site-packages/jax" not in filtered["traceback"]


def test_a_program_that_calls_sys_exit_ends_as_an_error_not_a_crash(live) -> None:
    """``sys.exit(3)`` is the program's own way to fail: an ``error`` naming it, never a sandbox ``crashed``
    (which the crash metric counts, and which said "exit code 1")."""
    events = live.run("print('before')\nimport sys\nsys.exit(3)\n")
    done = done_of(events)
    assert done["status"] == "error", done
    errors = [e for e in events if e["type"] == "error"]
    assert len(errors) == 1 and "sys.exit(3)" in errors[0]["message"] and errors[0]["line"] == 3, errors
    assert done_of(live.run("import sys\nsys.exit(0)\n"))["status"] == "ok"
