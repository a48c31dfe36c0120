"""The playground's ``jax.jit`` accepts exactly what each runtime's own ``jax.jit`` accepts.

Inspect replaces ``jax.jit`` with a wrapper (sandbox/capture/jit_capture.py).
Calls that plain JAX answers differently from one version to the next must
get that version's answer: ``@jax.jit(static_argnames="n")`` is a decorator
factory from JAX 0.7 on, and a TypeError before (a wrapper that supplied the
missing function made programs work in the playground that fail in plain
Python). Each program runs through the real runner and in plain Python, both
with the same runtime's interpreter, and says the same (into a file: the
runner's own output goes to the slot's pipes, which the harness has not).
"""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from jaxplay.sandbox.runtimes import store
from tests.runner_harness import run_programs
from tests.runtimes_server import TEST_RUNTIMES, runtimes_dir

REPO = Path(__file__).resolve().parents[2]
ENV = {"PATH": "/usr/bin:/bin", "JAX_PLATFORMS": "cpu", "HOME": "/tmp"}

PROGRAMS = {
    "decorator_factory": """
        import jax
        try:
            @jax.jit(static_argnames="n")
            def power(x, n):
                return x ** n
            say("decorated:", power(2.0, 3))
        except TypeError as exc:
            say("TypeError:", exc)
    """,
    "function_by_keyword": """
        import jax
        try:
            say("jitted:", jax.jit(fun=lambda x: x + 1)(1.0))
        except TypeError as exc:
            say("TypeError:", exc)
    """,
    "no_arguments": """
        import jax
        try:
            made = jax.jit()
            say("made:", callable(made))
        except TypeError as exc:
            say("TypeError:", exc)
    """,
    "none_then_options": """
        import functools, jax
        try:
            double = jax.jit(None, static_argnums=1)(lambda x, k: x * k)
            say("none:", double(2.0, 2))
        except TypeError as exc:
            say("TypeError:", exc)
        say("partial:", functools.partial(jax.jit, static_argnums=1)(lambda x, k: x * k)(2.0, 3))
    """,
}


def interpreter_of(version: str | None) -> str | None:
    if version is None:
        return None
    if store.record_of(runtimes_dir(), version) is None:
        pytest.skip(f"JAX {version} is not installed in {runtimes_dir()}: run `make runtimes`")
    return str(store.folder_for(runtimes_dir(), version) / "bin" / "python")


def with_say(name: str, out: Path) -> str:
    return f"def say(*words):\n    open({str(out)!r}, 'a').write(' '.join(map(str, words)) + '\\n')\n" + \
        textwrap.dedent(PROGRAMS[name])


@pytest.fixture(scope="module", params=[None, *TEST_RUNTIMES], ids=lambda v: v or "own")
def both_ways(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> dict[str, tuple[str, str]]:
    """{program: (what it said run by the playground's runner, what it said in plain Python)} on one runtime."""
    interpreter = interpreter_of(request.param)
    folder = tmp_path_factory.mktemp("said")
    played = run_programs([with_say(name, folder / f"{name}.runner") for name in PROGRAMS], cwd=str(REPO),
                          env=ENV, python=interpreter or sys.executable)
    said = {}
    for name, events in zip(PROGRAMS, played, strict=True):
        assert not [e for e in events if e["type"] == "error"], events
        plain = subprocess.run([interpreter or sys.executable, "-c", with_say(name, folder / f"{name}.plain")],
                               cwd="/tmp", capture_output=True, text=True, timeout=120, env=ENV)
        assert plain.returncode == 0, plain.stderr
        said[name] = ((folder / f"{name}.runner").read_text(), (folder / f"{name}.plain").read_text())
    return said


@pytest.mark.parametrize("program", PROGRAMS)
def test_the_playgrounds_jit_accepts_exactly_what_the_runtimes_own_jit_accepts(both_ways, program: str) -> None:
    playground, plain = both_ways[program]
    assert playground == plain and plain
