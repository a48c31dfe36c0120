"""Runs through the real server, worker and sandbox: output, errors, limits, cancel."""

from __future__ import annotations

import asyncio
import json
import time

import websockets

from tests.conftest import collect, collect_many, done_of, output_text

STREAMING_CODE = """
import time
for i in range(4):
    print("tick", i)
    time.sleep(0.5)
"""


def test_example_with_jit_grad_vmap_runs_ok(live):
    code = """
import jax, jax.numpy as jnp
f = jax.jit(lambda x: jnp.sin(x) * x)
print(f(1.0))
print(jax.grad(lambda x: x ** 3)(2.0))
print(jax.vmap(lambda x: x * 2)(jnp.arange(3)))
"""
    events = live.run(code)
    assert done_of(events)["status"] == "ok"
    assert [e["type"] for e in events[:2]] == ["queued", "started"]
    started = events[1]
    assert started["backend"] == "cpu" and started["devices"]["count"] >= 1 and started["jax_version"]
    assert output_text(events).splitlines()[1:] == ["12.0", "[0 2 4]"]


def test_output_streams_live_in_order(live):
    async def scenario():
        async with websockets.connect(live.ws_url) as ws:
            await ws.send(json.dumps({"type": "run", "id": "s1", "code": STREAMING_CODE}))
            arrivals = []
            while True:
                event = json.loads(await ws.recv())
                if event["type"] == "stdout":
                    arrivals.append((time.monotonic(), event["text"]))
                if event["type"] == "done":
                    return arrivals, event

    arrivals, done = asyncio.run(scenario())
    assert done["status"] == "ok"
    assert "".join(text for _, text in arrivals) == "".join(f"tick {i}\n" for i in range(4))
    gaps = [b[0] - a[0] for a, b in zip(arrivals, arrivals[1:], strict=False)]
    # Output sent as written, not held to the end: ticks arrive spread out (0.5 s apart when quiet).
    assert len(arrivals) == 4 and all(0.2 < gap < 5 for gap in gaps), gaps


def test_stderr_warnings_and_fd_writes_are_captured(live):
    code = """
import os, sys, warnings
import jax, jax.numpy as jnp
print("to stdout")
print("to stderr", file=sys.stderr)
warnings.warn("careful")
os.write(1, b"raw fd 1\\n")
os.write(2, b"raw fd 2\\n")
jax.jit(lambda x: jax.debug.print("debug {}", x))(jnp.int32(7))
"""
    events = live.run(code)
    assert done_of(events)["status"] == "ok"
    out, err = output_text(events), output_text(events, "stderr")
    assert "to stdout" in out and "raw fd 1" in out and "debug 7" in out
    assert "to stderr" in err and "UserWarning: careful" in err and "raw fd 2" in err


def test_error_reports_the_users_line_and_frames(live):
    code = "import jax.numpy as jnp\n\ndef f(x):\n    return x.reshape(7)\n\nf(jnp.ones(3))\n"
    events = live.run(code)
    error = next(e for e in events if e["type"] == "error")
    assert done_of(events)["status"] == "error"
    assert error["line"] == 4 and error["ename"] == "TypeError"
    assert '"<playground>", line 6' in error["traceback"] and '"<playground>", line 4' in error["traceback"]
    assert "site-packages" not in error["traceback"]


def test_syntax_error_has_its_line(live):
    events = live.run("x = 1\ny = (\n")
    error = next(e for e in events if e["type"] == "error")
    assert error["ename"] == "SyntaxError" and error["line"] == 2


def test_timeout_ends_the_run(live):
    events = live.run("while True:\n    pass\n", timeout_s=1.5)
    done = done_of(events)
    assert done["status"] == "timeout" and "1.5 s" in done["message"]
    assert 1400 < done["elapsed_ms"] < 4000


def test_cancel_stops_a_running_run(live):
    async def scenario():
        async with websockets.connect(live.ws_url) as ws:
            await ws.send(json.dumps({"type": "run", "id": "c1", "code": "import time\nprint('go')\ntime.sleep(60)"}))
            while json.loads(await ws.recv())["type"] != "stdout":
                pass
            await ws.send(json.dumps({"type": "cancel", "id": "c1"}))
            return await collect(ws, "c1", 20)

    done = done_of(asyncio.run(scenario()))
    assert done["status"] == "cancelled"


def test_memory_cap_gives_a_clear_error(live):
    code = "import numpy as np\nblocks = [np.ones(256 * 2**20 // 8) for _ in range(12)]\nprint('unreachable')"
    events = live.run(code)
    done = done_of(events)
    error = next(e for e in events if e["type"] == "error")
    assert done["status"] == "error" and error["ename"] == "MemoryError"
    assert "memory" in error["message"].lower() and "1 GiB" in error["message"]
    assert "unreachable" not in output_text(events)


def test_output_cap_truncates_with_a_notice(live):
    events = live.run("line = 'x' * 1023\nfor _ in range(3000):\n    print(line)\nprint('end')")
    assert done_of(events)["status"] == "ok"
    size = len(output_text(events).encode())
    assert 1_000_000 <= size <= 1 << 20
    notices = [e for e in events if e["type"] == "notice"]
    assert notices and "truncated" in notices[0]["message"]


def test_several_runs_in_flight_on_one_connection(live):
    async def scenario():
        async with websockets.connect(live.ws_url) as ws:
            for i in range(3):
                await ws.send(json.dumps({"type": "run", "id": f"m{i}", "code": f"print({i} * 10)"}))
            return await collect_many(ws, ["m0", "m1", "m2"])

    events = asyncio.run(scenario())
    for i in range(3):
        assert [e["type"] for e in events[f"m{i}"]].count("done") == 1
        assert events[f"m{i}"][-1]["status"] == "ok"
        assert output_text(events[f"m{i}"]) == f"{i * 10}\n"


def test_runs_wait_in_a_queue_with_positions(live):
    slots = live.get_json("/api/backends")["backends"][0]["slots"]

    async def scenario():
        sockets = [await websockets.connect(live.ws_url) for _ in range(slots + 1)]
        try:
            for i, ws in enumerate(sockets):
                await ws.send(json.dumps({"type": "run", "id": f"q{i}", "code": "import time; time.sleep(1)"}))
            return [await collect(ws, f"q{i}", 30) for i, ws in enumerate(sockets)]
        finally:
            for ws in sockets:
                await ws.close()

    runs = asyncio.run(scenario())
    last = runs[-1]
    positions = [e["position"] for e in last if e["type"] == "queued"]
    assert positions[0] >= 1 and all(r[-1]["status"] == "ok" for r in runs)


def test_a_trailing_semicolon_hides_the_last_value(live):
    shown = [e for e in live.run("40 + 2") if e["type"] == "display"]
    assert [(e["role"], e["data"]) for e in shown] == [("result", "42")]
    assert not [e for e in live.run("40 + 2;") if e["type"] == "display"]


def test_every_run_draws_fresh_numpy_randomness(live):
    code = "import numpy as np\nprint(np.random.randint(1 << 30))"
    draws = {output_text(live.run(code, fresh=True)) for _ in range(4)}
    assert len(draws) == 4
