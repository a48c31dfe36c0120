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
