"""jit capture in a real runner process (no sandbox): what ``compiled`` and ``fn_timing`` events say.

Each test runs a program through ``jaxplay.sandbox.engine.runner.execute`` with the run's
options, exactly as the sandboxed child does (in a fork of a process that imported JAX,
tests/runner_harness.py), and reads the event pipe.
"""

from __future__ import annotations

import textwrap
from pathlib import Path
from typing import Any

from tests import runner_harness


def run_program(tmp_path: Path, code: str, **options: Any) -> tuple[list[dict], str, str]:
    """Run ``code`` as the sandboxed child would, with the browser's ``options`` (``inspect``, ``profile``,
    ``passes``) and what a worker adds (``device_peak``, ``artifact_limit_bytes``); return (events, stdout,
    stderr)."""
    ran = runner_harness.run_program(textwrap.dedent(code), tmp_path / "run", options=options)
    return ran.events, ran.stdout, ran.stderr


def compiled_events(events: list[dict]) -> list[dict]:
    return [e for e in events if e["type"] == "compiled"]


def final_timing(events: list[dict]) -> dict[str, dict]:
    finals = [e for e in events if e["type"] == "fn_timing" and e["final"]]
    assert len(finals) == 1, [e["type"] for e in events]
    return {f["fn"]: f for f in finals[0]["functions"]}


def test_every_way_of_jitting_is_reported_once_per_distinct_compilation(tmp_path):
    events, stdout, stderr = run_program(tmp_path, """
        import functools
        import jax
        import jax.numpy as jnp
        from jax import jit

        @jax.jit
        def decorated(x):
            return x + 1

        def plain(x):
            return x * 2
        called = jax.jit(plain)

        @functools.partial(jax.jit, static_argnums=1)
        def powered(x, n):
            return x ** n

        @jit
        def imported(x):
            return -x

        @jax.jit(static_argnames="axis")
        def factory(x, axis):
            return x.sum(axis=axis)

        class Model:
            @functools.partial(jax.jit, static_argnums=0)
            def apply(self, x):
                return x - 1

        x = jnp.ones((2, 3))
        model = Model()
        for _ in range(3):  # repeats compile nothing new
            decorated(x); called(x); powered(x, 2); imported(x); factory(x, axis=0); model.apply(x)
        print(decorated(x).sum())
    """)
    assert stdout == "12.0\n", stderr
    compiled = compiled_events(events)
    assert [(e["fn"], e["line"]) for e in compiled] == [
        ("decorated", 8), ("plain", 11), ("powered", 16), ("imported", 20), ("factory", 24), ("Model.apply", 29),
    ]
    by_fn = {e["fn"]: e for e in compiled}
    assert by_fn["powered"]["signature"] == "x: f32[2,3], n=2"
    assert by_fn["factory"]["signature"] == "x: f32[2,3], axis=0"
    assert by_fn["decorated"]["outputs"] == "f32[2,3]"
    for event in compiled:
        assert event["key"] == f"{event['fn_id']}.1" and event["compile_index"] == 1
        assert event["cache_miss_reason"] is None and event["previous_key"] is None
        assert "<playground>:" in event["jaxpr"] and event["stablehlo"].startswith("module @jit_")
        assert event["hlo"].startswith("HloModule jit_")
        assert set(event["phases_ms"]) == {"trace", "lower", "compile", "execute"}
        assert event["phases_ms"]["compile"] > 0 and event["phases_ms"]["lower"] > 0
        assert event["cost"]["flops"] >= 0 and event["memory"]["argument_size_in_bytes"] > 0
        assert event["truncated"] == {} and "capture_errors" not in event
    timing = final_timing(events)
    assert timing["decorated"]["calls"] == 4 and timing["decorated"]["compile_calls"] == 1
    assert timing["decorated"]["sampled_calls"] == 3 and timing["decorated"]["median_ms"] > 0
    assert "TRACING CACHE MISS" not in stderr


def test_recompilations_carry_jax_own_reason(tmp_path):
    events, _, stderr = run_program(tmp_path, """
        import functools
        import jax
        import jax.numpy as jnp

        @functools.partial(jax.jit, static_argnames="n")
        def f(x, n):
            return x * n

        f(jnp.ones(3), n=2)
        f(jnp.ones(4), n=2)
        f(jnp.ones(4), n=3)
        f(jnp.ones(4), n=3)
        f({"a": jnp.ones(4)}["a"].astype(jnp.int32), n=3)
    """)
    compiled = compiled_events(events)
    assert [e["key"] for e in compiled] == ["1.1", "1.2", "1.3", "1.4"]
    assert [e["previous_key"] for e in compiled] == [None, "1.1", "1.2", "1.3"]
    reasons = [e["cache_miss_reason"] for e in compiled]
    assert reasons[0] is None
    assert reasons[1] == "different input types:\n* at x, now f32[4] and before f32[3]"
    assert "static argument n: now 3 and before 2" in reasons[2]
    assert reasons[3].startswith("different input")  # JAX picks the closest earlier key itself
    assert [e["signature"] for e in compiled] == ["x: f32[3], n=2", "x: f32[4], n=2", "x: f32[4], n=3", "x: i32[4], n=3"]
    assert "CACHE MISS" not in stderr


def test_a_function_re_created_in_a_loop_is_explained(tmp_path):
    events, _, _ = run_program(tmp_path, """
        import jax
        import jax.numpy as jnp
        for scale in (1.0, 2.0):
            step = jax.jit(lambda x: x * scale)
            step(jnp.ones(2))
    """)
    compiled = compiled_events(events)
    assert [e["key"] for e in compiled] == ["1.1", "1.2"]  # one function: the same code object
    assert compiled[0]["cache_miss_reason"] is None
    assert "new function object" in compiled[1]["cache_miss_reason"] or "re-defined" in compiled[1]["cache_miss_reason"]


def test_calls_under_transformations_never_report_the_plain_function(tmp_path):
    events, stdout, _ = run_program(tmp_path, """
        import jax
        import jax.numpy as jnp

        @jax.jit
        def f(x):
            return jnp.sin(x)

        x = jnp.ones(3)
        print(jax.grad(lambda v: f(v).sum())(x)[0])
        print(jax.vmap(f)(jnp.ones((2, 3))).shape)
        outer = jax.jit(lambda v: f(v) * 2)
        outer(x)
        gradient = jax.jit(jax.grad(lambda v: f(v).sum()))
        gradient(x)
    """)
    assert stdout.splitlines() == ["0.5403023", "(2, 3)"]
    compiled = compiled_events(events)
    assert [e["fn"] for e in compiled] == ["<lambda>", "grad(<lambda>)"]  # the outer jit and the jitted gradient
    assert "sin" in compiled[0]["jaxpr"] and "mul" in compiled[0]["jaxpr"]
    assert "cos" in compiled[1]["jaxpr"]  # what ran is the derivative, and it says so
    timing = final_timing(events)
    assert timing["f"]["calls"] == 0 and timing["f"]["traced_calls"] == 4


def test_a_jitted_transformation_is_named_for_it_and_not_explained_as_a_re_created_closure(tmp_path):
    events, stdout, _ = run_program(tmp_path, """
        import jax
        import jax.numpy as jnp

        def layer(w, x):
            return jnp.tanh(x @ w).sum()

        w, x = jnp.ones((3, 3)), jnp.ones((2, 3))
        jax.jit(layer)(w, x)
        step = jax.jit(jax.grad(layer))
        step(w, x)
        step(w, x)
        jax.jit(jax.vmap(jax.grad(layer), in_axes=(None, 0)))(w, x)
        jax.jit(jax.value_and_grad(layer))(w, x)
        jax.jit(jax.grad(layer))(w, x)  # made again: a new function object
        print("ok")
    """)
    assert stdout.strip() == "ok"
    compiled = compiled_events(events)
    named = [(e["fn"], e["compile_index"], e["line"]) for e in compiled]
    assert named == [("layer", 1, 5), ("grad(layer)", 1, 5), ("vmap(grad(layer))", 1, 5),
                     ("value_and_grad(layer)", 1, 5), ("grad(layer)", 2, 5)], named
    reasons = [e["cache_miss_reason"] for e in compiled]
    assert reasons[:4] == [None, None, None, None], reasons
    assert "each jax.grad(...) call makes a new function object" in reasons[4]
    assert not any("closure" in (r or "") or "lambda" in (r or "") for r in reasons), reasons
    assert "cos" not in compiled[0]["jaxpr"] and "mul" in compiled[1]["jaxpr"]  # the derivative is its own


def test_a_shard_map_is_named_by_its_public_name(tmp_path):
    events, stdout, _ = run_program(tmp_path, """
        import jax
        import jax.numpy as jnp
        from jax.sharding import PartitionSpec as P

        mesh = jax.make_mesh((1,), ("x",))

        def column_sums(block):
            return jax.lax.psum(block, "x")

        x = jax.device_put(jnp.ones(4), jax.sharding.NamedSharding(mesh, P("x")))
        print(jax.jit(jax.shard_map(column_sums, mesh=mesh, in_specs=P("x"), out_specs=P()))(x).sum())
    """)
    assert stdout.strip() == "4.0", [e for e in events if e["type"] in ("error", "stderr")]
    # JAX does the mapping in a private _shard_map; the name is the one the program wrote.
    assert [e["fn"] for e in compiled_events(events)] == ["shard_map(column_sums)"]


def test_inspect_false_leaves_jax_alone(tmp_path):
    events, stdout, _ = run_program(tmp_path, """
        import jax
        import jax.numpy as jnp
        f = jax.jit(lambda x: x + 1)
        print(type(f).__name__, f(jnp.ones(2)).sum())
    """, inspect=False)
    assert stdout == "PjitFunction 4.0\n"
    assert [e for e in events if e["type"] in ("compiled", "fn_timing")] == []


def test_results_are_unchanged_by_capture_including_donation_and_pytrees(tmp_path):
    code = """
        import functools
        import jax
        import jax.numpy as jnp

        @functools.partial(jax.jit, donate_argnums=0)
        def update(params, grads):
            return jax.tree.map(lambda p, g: p - 0.1 * g, params, grads)

        params = {"w": jnp.arange(6.0).reshape(2, 3), "b": jnp.ones(3)}
        grads = jax.tree.map(jnp.ones_like, params)
        for _ in range(3):
            params = update(params, grads)
        key = jax.random.key(0)
        print(params["w"].tolist(), params["b"].tolist(), jax.random.normal(key, (2,)).tolist())
    """
    events_on, out_on, err_on = run_program(tmp_path, code)
    _, out_off, _ = run_program(tmp_path, code, inspect=False)
    assert out_on == out_off and out_on, err_on
    (event,) = compiled_events(events_on)
    assert event["signature"] == "params: {'b': f32[3], 'w': f32[2,3]}, grads: {'b': f32[3], 'w': f32[2,3]}"
    assert event["outputs"] == "{'b': f32[3], 'w': f32[2,3]}"


def test_big_artifacts_are_cut_with_a_notice(tmp_path):
    events, _, _ = run_program(tmp_path, """
        import jax
        import jax.numpy as jnp

        @jax.jit
        def long(x):
            for i in range(200):
                x = jnp.sin(x) * i
            return x

        long(jnp.ones(8))
    """, artifact_limit_bytes=4096)
    (event,) = compiled_events(events)
    assert event["artifact_limit_bytes"] == 4096
    assert set(event["truncated"]) == {"jaxpr", "stablehlo", "hlo"}
    for name, full_size in event["truncated"].items():
        assert len(event[name].encode()) <= 4096 < full_size
        assert event[name].endswith("\n")  # cut at a line boundary
        last_text_line = event[name].count("\n") + 1
        assert all(last <= last_text_line for _, last, _ in event["source_lines"][name])


def test_hooks_add_fields_and_a_failing_hook_loses_nothing(tmp_path):
    events, _, _ = run_program(tmp_path, """
        import jax
        import jax.numpy as jnp
        from jaxplay.sandbox.capture import jit_capture

        def add_devices(event, compiled):
            event["hooked_devices"] = len(compiled.input_shardings[0])

        def broken(event, compiled):
            raise RuntimeError("hook bug")

        jit_capture.COMPILED_HOOKS[:0] = [add_devices, broken]
        jax.jit(lambda x: x)(jnp.ones(2))
    """)
    (event,) = compiled_events(events)
    assert event["hooked_devices"] == 1
    assert event["capture_errors"] == ["hook broken: RuntimeError: hook bug"]
    assert event["hlo"] and event["cost"] is not None


def test_calls_from_other_threads_are_captured(tmp_path):
    events, _, _ = run_program(tmp_path, """
        import threading
        import jax
        import jax.numpy as jnp
        f = jax.jit(lambda x: x * 3)
        worker = threading.Thread(target=lambda: f(jnp.ones(5)))
        worker.start(); worker.join()
    """)
    (event,) = compiled_events(events)
    assert event["signature"] == "x: f32[5]" and event["phases_ms"]["compile"] > 0


def test_loop_bodies_traced_inside_do_not_lend_their_explanations(tmp_path):
    events, _, _ = run_program(tmp_path, """
        import jax
        import jax.numpy as jnp
        from jax import lax

        @jax.jit
        def steps(n):
            def body(state):
                return state[0] // 2, state[1] + 1
            return lax.while_loop(lambda s: s[0] > 1, body, (n, 0))[1]

        steps(64)
        steps(jnp.int32(64))
    """)
    compiled = compiled_events(events)
    assert compiled[0]["cache_miss_reason"] is None
    assert [e["fn"] for e in compiled] == ["steps", "steps"]
    assert compiled[1]["cache_miss_reason"] == (  # the function's own reason, not its loop body's
        "different input types:\n* at n, now i32[]{weak_type=False} and before i32[]{weak_type=True}\n"
        "(https://docs.jax.dev/en/latest/type_promotion.html#weak-types)"
    )
