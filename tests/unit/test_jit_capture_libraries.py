"""jit capture through ``nnx.jit`` and ``eqx.filter_jit``: the user's function, the user's arguments.

Each program runs twice: with the library imported by the program (after the
capture is installed, as on a worker that does not preload it) and imported
before the run (as the zygote preloads it, sandbox/engine/library_preload.py).
"""

from __future__ import annotations

import textwrap
from pathlib import Path
from typing import Any

import pytest

from tests import runner_harness

PRELOAD = {"imported by the program": "", "preloaded": "import equinox, flax.nnx, optax\n"}


def run_program(tmp_path: Path, code: str, preload: str) -> tuple[list[dict[str, Any]], str, str]:
    ran = runner_harness.run_program(textwrap.dedent(code), tmp_path / "run", before=PRELOAD[preload], timeout=180)
    return ran.events, ran.stdout, ran.stderr


def compiled(events: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [e for e in events if e["type"] == "compiled"]


def final_timing(events: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    (final,) = [e for e in events if e["type"] == "fn_timing" and e["final"]]
    return {f["fn"]: f for f in final["functions"]}


@pytest.mark.parametrize("preload", list(PRELOAD))
def test_equinox_filter_jit_reports_each_user_function_with_its_own_arguments(tmp_path, preload):
    events, stdout, stderr = run_program(tmp_path, """
        import equinox as eqx
        import jax
        import jax.numpy as jnp

        @eqx.filter_jit
        def forward(mlp, x, scale):
            return mlp(x) * scale

        @eqx.filter_jit
        def shift(x):
            return x + 1

        mlp = eqx.nn.MLP(3, 2, 4, 1, key=jax.random.key(0))
        forward(mlp, jnp.ones(3), 2.0)
        forward(mlp, jnp.ones(3), 2.0)
        forward(mlp, jnp.ones(3), 3.0)
        print(shift(jnp.zeros(2)))
    """, preload)
    assert stdout == "[1. 1.]\n", stderr
    events_by_key = {e["key"]: e for e in compiled(events)}
    assert [(e["fn"], e["line"], e["compile_index"]) for e in events_by_key.values()] == [
        ("forward", 7, 1), ("forward", 7, 2), ("shift", 11, 1)]
    first, second, shifted = events_by_key.values()
    assert first["signature"] == (
        "mlp: MLP(layers[0].weight: f32[4,3], layers[0].bias: f32[4], layers[1].weight: f32[2,4], "
        "layers[1].bias: f32[2]), x: f32[3], scale=2.0")
    assert first["outputs"] == "f32[2]" and first["module"] is None
    # Our own reason, in the user's terms: JAX's would name equinox's internal arguments.
    assert second["cache_miss_reason"] == "different input types or static arguments:\n* static argument scale, now 3.0 and before 2.0"
    assert shifted["signature"] == "x: f32[2]" and shifted["outputs"] == "f32[2]"
    assert "<playground>:" in first["jaxpr"] and first["hlo"].startswith("HloModule jit_forward")
    timing = final_timing(events)
    assert set(timing) == {"forward", "shift"}
    assert timing["forward"]["calls"] == 3 and timing["forward"]["compile_calls"] == 2
    assert "cannot follow" not in stderr


@pytest.mark.parametrize("preload", list(PRELOAD))
def test_nnx_jit_reports_the_user_function_with_modules_by_their_variables(tmp_path, preload):
    events, stdout, stderr = run_program(tmp_path, """
        import jax.numpy as jnp
        import optax
        from flax import nnx

        class Model(nnx.Module):
            def __init__(self, rngs):
                self.linear = nnx.Linear(3, 2, rngs=rngs)

            def __call__(self, x):
                return self.linear(x)

        model = Model(nnx.Rngs(0))
        optimizer = nnx.Optimizer(model, optax.sgd(0.1), wrt=nnx.Param)

        @nnx.jit
        def train_step(model, optimizer, x, y):
            loss, grads = nnx.value_and_grad(lambda m: jnp.mean((m(x) - y) ** 2))(model)
            optimizer.update(model, grads)
            return loss

        @nnx.jit(graph=False)
        def predict(model, x):
            return {"y": model(x)}

        class Head(nnx.Module):
            def __init__(self, rngs):
                self.model = Model(rngs)

            @nnx.jit
            def apply(self, x):
                return self.model(x)

        x, y = jnp.ones((4, 3)), jnp.zeros((4, 2))
        losses = [float(train_step(model, optimizer, x, y)) for _ in range(3)]
        print(losses[0] > losses[-1], predict(model, x)["y"].shape, Head(nnx.Rngs(1)).apply(x).shape)
    """, preload)
    assert stdout == "True (4, 2) (4, 2)\n", stderr
    events_ = compiled(events)
    assert [(e["fn"], e["line"]) for e in events_] == [("train_step", 17), ("predict", 23), ("Head.apply", 31)]
    step, predict, method = events_
    # Each is the first compilation of its function: no reason, though all share NNX's one wrapper.
    assert [e["cache_miss_reason"] for e in events_] == [None, None, None]
    assert method["signature"].startswith("self: Head(model.linear.bias: Param f32[2], ")
    assert step["signature"].startswith("model: Model(linear.bias: Param f32[2], linear.kernel: Param f32[3,2]), "
                                        "optimizer: Optimizer(")
    assert step["signature"].endswith("x: f32[4,3], y: f32[4,2]")
    assert "NodeStates" not in step["signature"] and step["outputs"] == "f32[]"
    assert predict["signature"].startswith("model: Model(") and predict["outputs"] == "{'y': f32[4,2]}"
    assert "<playground>:" in step["jaxpr"]
    timing = final_timing(events)
    assert timing["train_step"]["calls"] == 3 and timing["train_step"]["compile_calls"] == 1


def test_patches_are_undone_after_the_run():
    import equinox._jit
    from flax.nnx.transforms import compilation

    from jaxplay.sandbox.capture import jit_libraries

    before = (equinox._jit._call, compilation.JitWrapped.__call__, compilation.SimpleJitWrapped.__call__)
    jit_libraries.install()
    assert equinox._jit._call is not before[0] and compilation.JitWrapped.__call__ is not before[1]
    jit_libraries.uninstall()
    assert (equinox._jit._call, compilation.JitWrapped.__call__, compilation.SimpleJitWrapped.__call__) == before


def test_a_large_model_shows_its_first_arrays_and_counts_the_rest():
    from jaxplay.sandbox.capture import jit_libraries

    class Optimizer:
        pass

    fields = [(f"opt_state.mu.w{i}", "OptVariable f32[2]") for i in range(10)]
    text = jit_libraries.object_text(Optimizer(), fields)
    assert text.startswith("Optimizer(opt_state.mu.w0: OptVariable f32[2], opt_state.mu.w1: ")
    assert text.endswith("opt_state.mu.w7: OptVariable f32[2], … 2 more)")
