"""Equation counts, rooflines, profiles and pass pipelines from the real runner (no sandbox).

Each test runs a program through ``jaxplay.sandbox.engine.runner.execute`` with the run's options,
exactly as the sandboxed child does, and reads the event pipe.
"""

from __future__ import annotations

import base64
import gzip
import json

from tests.unit.test_jit_capture import run_program

UNROLLED = """
    import jax
    import jax.numpy as jnp

    @jax.jit
    def f(x):
        for _ in range(30):
            x = x * 1.01 + 0.5
        y = jax.lax.fori_loop(0, 3, lambda i, v: v + jnp.sin(v), x)
        return jnp.sum(y)

    for _ in range(4):
        f(jnp.ones(100)).block_until_ready()
    print("result", f(jnp.ones(100)))
"""


def of_type(events, kind):
    return [e for e in events if e["type"] == kind]


def test_equation_counts_point_at_the_unrolled_loop(tmp_path):
    events, _, stderr = run_program(tmp_path, UNROLLED)
    (compiled,) = of_type(events, "compiled")
    counts = compiled["eqn_counts"]
    top = counts["lines"][0]
    assert (top["line"], top["count"]) == (8, 60), counts
    assert dict(top["primitives"]) == {"mul": 30, "add": 30}
    assert top["source"] == "x = x * 1.01 + 0.5"
    lines = {row["line"]: row["count"] for row in counts["lines"]}
    assert lines[9] >= 2  # the loop and, inside its body, sin and add: nested jaxprs are counted
    assert counts["total"] == sum(lines.values()) + counts["other_count"]


def test_roofline_event_at_the_end_with_the_workers_peak(tmp_path):
    peak = {"flops_per_s": 5e10, "bytes_per_s": 1e10, "how": "test peak"}
    events, stdout, _ = run_program(tmp_path, UNROLLED, device_peak=peak)
    (event,) = of_type(events, "roofline")
    assert events[-1] is event or events.index(event) > events.index(of_type(events, "compiled")[0])
    (row,) = event["functions"]
    assert row["key"] == "1.1" and row["fn"] == "f" and event["peak"]["how"] == "test peak"
    assert row["timed_calls"] == 4  # five calls, the first compiled
    assert row["flops"] > 0 and row["bytes"] > 0 and row["median_ms"] > 0
    assert row["bound"] in ("compute", "memory") and 0 < row["fraction_of_roof"]


def test_calls_are_timed_per_compilation(tmp_path):
    events, _, _ = run_program(tmp_path, """
        import jax, jax.numpy as jnp
        f = jax.jit(lambda x: x * 2)
        for n in (4, 8, 4, 4, 8):
            f(jnp.ones(n))
    """)
    rows = {row["key"]: row["timed_calls"] for row in of_type(events, "roofline")[0]["functions"]}
    assert rows == {"1.1": 2, "1.2": 1}


PROFILED = """
    import jax
    import jax.numpy as jnp
    from playground import profile

    @jax.jit
    def step(w, x):
        return w - 0.1 * jnp.tanh(x @ w)

    def train(w, x):
        for _ in range(3):
            w = step(w, x)
        return w

    x = jnp.ones((64, 64))
    w = step(jnp.ones(64), x)
    with profile("training"):
        w = train(w, x).block_until_ready()
    print("after", float(w[0]) > 0)
"""


def test_profile_region_sends_a_linked_timeline_and_a_perfetto_trace(tmp_path):
    events, stdout, stderr = run_program(tmp_path, PROFILED)
    assert "after True" in stdout, stderr
    (profile,) = of_type(events, "profile")
    assert profile["label"] == "training" and profile["line"] == 17
    kinds = profile["kinds"]
    slices = profile["slices"]
    names = profile["names"]
    python = [s for s in slices if kinds[s[5]] == "python"]
    assert any(names[s[4]] == "train (line 10)" for s in python)
    assert profile["links"][python[0][6]][3] == 10
    ops = [s for s in slices if kinds[s[5]] == "op" and s[6] >= 0]
    assert ops, names
    assert {tuple(profile["links"][s[6]][:3]) for s in ops} == {("step", 1, "1.1")}
    trace = json.loads(gzip.decompress(base64.b64decode(profile["trace"]["data"])))
    assert any(e.get("ph") == "X" for e in trace["traceEvents"])
    assert profile["trace"]["filtered"] is False
    clock = [e for e in of_type(events, "nondeterministic") if e["source"] == "jax.profiler"]
    assert clock and clock[0]["line"] == 17  # a profile is never replayed from the result cache


def test_whole_run_profile_and_a_region_inside_it(tmp_path):
    events, stdout, _ = run_program(tmp_path, PROFILED, profile=True)
    assert "after True" in stdout
    (profile,) = of_type(events, "profile")  # the region is an annotation of the whole run's profile
    assert profile["label"] == "the whole run"
    assert "training" in profile["names"] or any("training" in n for n in profile["names"])


def test_a_plain_run_takes_no_profile_and_no_passes(tmp_path):
    events, stdout, _ = run_program(tmp_path, UNROLLED)
    assert not of_type(events, "profile") and not of_type(events, "passes")
    assert not [e for e in of_type(events, "nondeterministic") if e["source"] == "jax.profiler"]


def test_passes_request_sends_the_pipeline_and_ends_the_run(tmp_path):
    events, stdout, stderr = run_program(tmp_path, UNROLLED, passes={"key": "1.1", "fn": "f"})
    (passes,) = of_type(events, "passes")
    assert "error" not in passes, passes
    assert "result" not in stdout  # the program stopped at the compilation asked for
    assert not of_type(events, "compiled")  # nothing else is rendered in such a run
    assert passes["module"] == "jit_f" and passes["compile_ms"] > 0
    changed = [p for p in passes["passes"] if p["changed"]]
    assert len(passes["passes"]) > len(changed) > 3
    traced = [p for p in passes["passes"] if passes["pipelines"][p["pipeline"]]["duration_us"] is not None]
    assert len(traced) > len(passes["passes"]) / 2  # the profiler's trace named them, with durations
    assert all(p["duration_us"] is not None for p in traced if not p["name"].startswith("("))
    dumps = passes["dumps"]
    assert dumps[0]["label"] == "before optimizations" and "HloModule jit_f" in dumps[0]["text"]
    with_text = [p for p in changed if "added" in p]
    assert with_text and all(0 < p["dump"] < len(dumps) for p in with_text)
    assert passes["header"].startswith("FileNames")
    assert any(entry.get("source_lines") for entry in dumps if "text" in entry)


def test_passes_of_a_compilation_the_program_no_longer_makes(tmp_path):
    events, stdout, _ = run_program(tmp_path, UNROLLED, passes={"key": "1.7", "fn": "f"})
    (passes,) = of_type(events, "passes")
    assert "did not compile f" in passes["error"]
    assert "result" in stdout
