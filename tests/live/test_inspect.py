"""Inspect events through the real server, worker and bubblewrap sandbox."""

from __future__ import annotations

import pytest

from tests.live_server import done_of, output_text

pytestmark = pytest.mark.live

TWO_FUNCTIONS = """
import functools
import jax
import jax.numpy as jnp

@jax.jit
def affine(x, w):
    return x @ w + 1.0

@functools.partial(jax.jit, static_argnames="steps")
def smooth(x, steps):
    for _ in range(steps):
        x = 0.5 * (x + jnp.roll(x, 1))
    return x

w = jnp.ones((3, 2))
for _ in range(3):
    affine(jnp.ones((4, 3)), w)
affine(jnp.ones((5, 3)), w)
print(smooth(jnp.arange(6.0), steps=2).sum())
print(jax.grad(lambda v: affine(v, w).sum())(jnp.ones((4, 3))).shape)
"""


def of_type(events: list[dict], kind: str) -> list[dict]:
    return [e for e in events if e["type"] == kind]


def test_compiled_functions_and_timings_arrive_with_the_run(live):
    events = live.run(TWO_FUNCTIONS, fresh=True)
    done = done_of(events)
    assert done["status"] == "ok", output_text(events, "stderr")
    assert output_text(events).splitlines() == ["15.0", "(4, 3)"]
    run_id = done["id"]
    compiled = of_type(events, "compiled")
    assert [(e["fn"], e["key"], e["signature"]) for e in compiled] == [
        ("affine", "1.1", "x: f32[4,3], w: f32[3,2]"),
        ("affine", "1.2", "x: f32[5,3], w: f32[3,2]"),
        ("smooth", "2.1", "x: f32[6], steps=2"),
    ]
    assert all(e["id"] == run_id for e in compiled)
    assert compiled[1]["cache_miss_reason"] == "different input types:\n* at x, now f32[5,3] and before f32[4,3]"
    for event in compiled:
        assert event["line"] == {"affine": 7, "smooth": 11}[event["fn"]] and "<playground>:" in event["jaxpr"]
        assert event["hlo"].startswith("HloModule jit_") and event["cost"]["flops"] > 0
        assert event["phases_ms"]["compile"] > 0 and event["memory"]["output_size_in_bytes"] > 0
        # the sandbox's own files never show up as the user's source
        assert "sandbox/" not in event["stablehlo"] + event["hlo"] + event["jaxpr"]
    finals = [e for e in of_type(events, "fn_timing") if e["final"]]
    assert len(finals) == 1 and events.index(finals[0]) > events.index(compiled[-1])
    timing = {f["fn"]: f for f in finals[0]["functions"]}
    assert timing["affine"]["calls"] == 4 and timing["affine"]["compile_calls"] == 2
    assert timing["affine"]["traced_calls"] == 1 and timing["affine"]["median_ms"] > 0


def test_a_run_without_inspection_sends_no_compiled_events(live):
    events = live.run(TWO_FUNCTIONS, inspect=False, fresh=True)
    assert done_of(events)["status"] == "ok"
    assert output_text(events).splitlines() == ["15.0", "(4, 3)"]
    assert of_type(events, "compiled") == [] and of_type(events, "fn_timing") == []


def test_timeit_reports_its_samples_from_the_sandbox(live):
    events = live.run("""
import jax.numpy as jnp
from playground import timeit
x = jnp.ones((64, 64))
timeit(lambda: x @ x, repeat=4, min_run_s=0.01)
""", fresh=True)
    assert done_of(events)["status"] == "ok", output_text(events, "stderr")
    (timing,) = of_type(events, "timing")
    assert timing["repeats"] == 4 and len(timing["samples_ms"]) == 4 and timing["line"] == 5
    assert timing["min_ms"] <= timing["median_ms"] <= timing["max_ms"]
    assert "per loop (median of 4 runs" in output_text(events)
