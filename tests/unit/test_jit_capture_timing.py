"""``from playground import timeit`` in a real runner process: samples, statistics, the ``timing`` event."""

from __future__ import annotations

import statistics

from tests.unit.test_jit_capture import compiled_events, final_timing, run_program


def timing_events(events: list[dict]) -> list[dict]:
    return [e for e in events if e["type"] == "timing"]


def test_timeit_times_blocking_runs_and_reports_every_sample(tmp_path):
    events, stdout, stderr = run_program(tmp_path, """
        import jax
        import jax.numpy as jnp
        from playground import timeit

        @jax.jit
        def matmul(a, b):
            return a @ b

        x = jnp.ones((128, 128))
        result = timeit(matmul, x, x, repeat=5, min_run_s=0.02)
        print("median below max:", result.min <= result.median <= result.max)
    """)
    assert "median below max: True" in stdout, stderr
    (event,) = timing_events(events)
    assert event["label"] == "jit(matmul)(f32[128,128], f32[128,128])" and event["line"] == 11
    assert event["repeats"] == 5 == len(event["samples_ms"])
    assert str(event["loops"])[0] in "125" and set(str(event["loops"])[1:]) <= {"0"}  # autorange: 1, 2, 5, 10 ...
    assert event["median_ms"] == round(statistics.median(event["samples_ms"]), 6)
    assert event["min_ms"] == min(event["samples_ms"]) and event["max_ms"] == max(event["samples_ms"])
    assert event["iqr_ms"] >= 0 and event["q1_ms"] <= event["median_ms"] <= event["q3_ms"]
    assert event["warmup_ms"] > event["median_ms"]  # the first call compiled
    assert stdout.startswith("jit(matmul)(f32[128,128], f32[128,128]): ") and "per loop (median of 5 runs" in stdout
    # The warm-up went through the capture (one compile); the timed loops did not count as calls.
    assert len(compiled_events(events)) == 1
    assert final_timing(events)["matmul"]["calls"] == 1


def test_timeit_takes_an_expression_and_explicit_loop_counts(tmp_path):
    events, stdout, _ = run_program(tmp_path, """
        import jax.numpy as jnp
        from playground import timeit

        def work():
            y = jnp.arange(1000.0)
            return timeit("jnp.sum(y * y)", number=3, repeat=2, warmup=2)

        print(work().loops)
    """)
    (event,) = timing_events(events)
    assert event["label"] == "jnp.sum(y * y)" and event["loops"] == 3 and event["repeats"] == 2
    assert event["line"] == 7  # the user's line that called timeit
    assert stdout.splitlines()[-1] == "3"


def test_timeit_explains_wrong_use(tmp_path):
    events, _, _ = run_program(tmp_path, """
        from playground import timeit
        timeit(42)
    """)
    (error,) = [e for e in events if e["type"] == "error"]
    assert error["ename"] == "TypeError" and "needs a function or an expression string" in error["message"]
