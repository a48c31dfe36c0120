"""Inspect stays true across a session's edits, through its lowered-module cache.

One browser session runs a program, runs it again (every module now loaded
from the session's cache, nothing lowered), then runs it with its functions
moved down four lines, then as it was. After each run, every ``compiled``
event (jaxpr, StableHLO, HLO and the line links of all three) must equal what
JAX's stages API gives in a plain process for that version of the program
(``tests/fidelity/test_inspect_fidelity.py``'s reference): a module loaded
from an earlier run never shows the lines of another edit.
"""

from __future__ import annotations

import asyncio
import json
import re
import subprocess
import sys
import textwrap
import uuid
from pathlib import Path

import websockets

from jaxplay.sandbox.capture.jit_source_map import hlo_line_ranges
from tests.conftest import done_of
from tests.fidelity.test_inspect_fidelity import ENV, REFERENCE

PROGRAM = textwrap.dedent("""
    import jax
    import jax.numpy as jnp
    from jax import lax
    CASES = []

    def call(fn, *args):
        CASES.append((fn, args, {}))
        return fn(*args)

    @jax.jit
    def scale_shift(x):
        return jnp.sin(x) * 2.0 + 1.0

    @jax.jit
    def cumulative(xs):
        return lax.scan(lambda c, x: (c + jnp.tanh(x), c * 2), 0.0, xs)

    def loss(w, x):
        return jnp.mean(jnp.tanh(x @ w) ** 2)

    gradient = jax.jit(jax.grad(loss))
    call(scale_shift, jnp.arange(4.0))
    call(cumulative, jnp.arange(8.0))
    call(gradient, jnp.ones((4, 3)), jnp.arange(12.0).reshape(3, 4))
""")
MOVED = PROGRAM.replace("CASES = []\n", "CASES = []\n# four lines\n# further\n# down\n\n")


FRAME_TABLES = {"FileNames", "FunctionNames", "FileLocations", "StackFrames"}
FRAME_ID = re.compile(r" stack_frame_id=\d+")


def hlo_as_linked(text: str) -> list[tuple[str, int | None]]:
    """An HLO text as Inspect links it: each instruction with the source line it links to. An executable
    from JAX's persistent cache (a re-run's, with or without lowered modules) numbers its stack-frame
    tables in another order than a fresh compilation, the frames they resolve to being the same."""
    links = {number: source for first, last, source in hlo_line_ranges(text) for number in range(first, last + 1)}
    linked, in_table = [], False
    for number, line in enumerate(text.splitlines(), start=1):
        in_table = line in FRAME_TABLES or (in_table and line != "")
        if not in_table:
            linked.append((FRAME_ID.sub("", line), links.get(number)))
    return linked


def plain(tmp_path: Path, code: str) -> list[dict]:
    program, script = tmp_path / f"prog-{uuid.uuid4().hex}.py", tmp_path / "reference.py"
    program.write_text(code)
    script.write_text(REFERENCE)
    result = subprocess.run([sys.executable, str(script), str(program)], cwd=tmp_path, env=ENV,
                            capture_output=True, timeout=300)
    assert result.returncode == 0, result.stderr.decode()[-3000:]
    return json.loads(result.stdout)


def session_runs(live, codes: list[str]) -> list[list[dict]]:
    async def runs() -> list[list[dict]]:
        headers = {"Cookie": live.session_cookie()}
        results = []
        async with websockets.connect(live.ws_url, max_size=None, additional_headers=headers) as ws:
            for code in codes:
                run_id = uuid.uuid4().hex[:12]
                await ws.send(json.dumps({"type": "run", "id": run_id, "code": code, "fresh": True}))
                events = []
                while True:
                    event = json.loads(await asyncio.wait_for(ws.recv(), 180))
                    if event.get("id") == run_id:
                        events.append(event)
                        if event["type"] == "done":
                            break
                results.append(events)
        return results

    return asyncio.run(runs())


def test_inspect_shows_each_edits_own_lines_when_modules_come_from_the_cache(live, tmp_path: Path) -> None:
    tag = f"\n# {uuid.uuid4().hex}\n"  # a session and code no earlier test has seen
    original, moved = PROGRAM + tag, MOVED + tag
    expected = {original: plain(tmp_path, original), moved: plain(tmp_path, moved)}
    codes = [original, original, moved, original]
    results = session_runs(live, codes)
    for index, (code, events) in enumerate(zip(codes, results, strict=True)):
        assert done_of(events)["status"] == "ok", events[-3:]
        compiled = [e for e in events if e["type"] == "compiled"]
        assert [e["fn"] for e in compiled] == ["scale_shift", "cumulative", "grad(loss)"]
        for event, reference in zip(compiled, expected[code], strict=True):
            for artifact in ("jaxpr", "stablehlo"):
                assert event[artifact] == reference[artifact], f"run {index}: {event['fn']} {artifact} differs"
            assert hlo_as_linked(event["hlo"]) == hlo_as_linked(reference["hlo"]), f"run {index}: {event['fn']} hlo"
        cached = [e["lowered_module_cached"] for e in compiled]
        if index in (1, 3):  # the session ran this very program before: nothing was lowered
            assert all(cached), f"run {index}: {cached}"
        elif index == 2:  # moved: the functions' locations changed, so they were lowered again
            assert not any(cached), f"run {index}: {cached}"
    first, _, after_move, _ = ([e for e in run if e["type"] == "compiled"] for run in results)
    for before, after in zip(first, after_move, strict=True):
        assert after["line"] == before["line"] + 4
        for artifact in ("jaxpr", "stablehlo", "hlo"):  # every line link points four lines further down
            assert [[a, b, line + 4] for a, b, line in before["source_lines"][artifact]] == \
                after["source_lines"][artifact], artifact
