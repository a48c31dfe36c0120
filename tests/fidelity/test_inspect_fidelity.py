"""The Inspect panel shows exactly what JAX's stages API gives.

One program with a dozen jitted functions (static arguments, pytrees, scan,
cond, fori_loop, a jitted gradient, vmap, donation, recompilations) runs
twice, each in a process of its own with the worker's 8 CPU devices:

- through the playground runner (in a fork of a process that imported JAX,
  tests/runner_harness.py), which reports a ``compiled`` event per compilation;
- in a plain process with an untouched ``jax.jit``, which runs the same
  program and then asks the stages API, for each (function, arguments) the
  program recorded in ``CASES``: ``f.trace(*args).jaxpr.pretty_print(
  source_info=True, width=40)``, ``.lower().as_text()``,
  ``.compile().as_text()``, ``cost_analysis()`` and ``memory_analysis()``.

They must be equal, text for text and number for number. The one documented
difference, unavoidable and made equal here: each process's own harness
frames (the runner's, or the plain script's) are excluded from source
locations, so IR metadata names only the user's ``<playground>`` frames.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

from tests import runner_harness

REPO = Path(__file__).resolve().parents[2]
EIGHT_DEVICES = {"XLA_FLAGS": "--xla_force_host_platform_device_count=8", "JAX_PLATFORMS": "cpu"}
ENV = {**os.environ, **EIGHT_DEVICES}

PROGRAM = textwrap.dedent("""
    import functools
    import jax
    import jax.numpy as jnp
    from jax import lax

    CASES = []

    def call(fn, *args, **kwargs):
        CASES.append((fn, args, kwargs))
        return fn(*args, **kwargs)

    @jax.jit
    def scale_shift(x):
        return jnp.sin(x) * 2.0 + 1.0

    @functools.partial(jax.jit, static_argnums=1)
    def power(x, n):
        for _ in range(n):
            x = x * x
        return x

    @functools.partial(jax.jit, static_argnames="axis")
    def normalize(x, axis):
        return (x - x.mean(axis=axis, keepdims=True)) / (x.std(axis=axis, keepdims=True) + 1e-6)

    @jax.jit
    def sgd(params, grads):
        return jax.tree.map(lambda p, g: p - 0.1 * g, params, grads)

    @jax.jit
    def cumulative(xs):
        def step(carry, x):
            carry = carry + jnp.tanh(x)
            return carry, carry * 2
        return lax.scan(step, 0.0, xs)

    @jax.jit
    def branchy(x):
        y = lax.fori_loop(0, 4, lambda i, v: v * 0.5 + i, x)
        return lax.cond(y.sum() > 0, lambda v: v @ v, lambda v: -v.sum(), y)

    def loss(w, x):
        return jnp.mean(jnp.tanh(x @ w) ** 2)

    gradient = jax.jit(jax.grad(loss))
    batched = jax.jit(jax.vmap(lambda a, b: jnp.dot(a, b), in_axes=(0, None)))

    @functools.partial(jax.jit, donate_argnums=0)
    def accumulate(total, x):
        return total + x

    x4, x8 = jnp.arange(4.0), jnp.arange(8.0)
    m = jnp.arange(12.0).reshape(3, 4)
    params = {"w": jnp.ones((4, 2)), "b": jnp.zeros(2)}
    call(scale_shift, x4)
    call(scale_shift, x8)                  # recompiled: new shape
    call(scale_shift, x8.astype(jnp.int32))  # recompiled: new dtype
    call(power, x4, 3)
    call(power, x4, 5)                     # recompiled: new static value
    call(normalize, m, axis=1)
    call(sgd, params, jax.tree.map(jnp.ones_like, params))
    call(cumulative, x8)
    call(branchy, jnp.ones(4))
    call(gradient, jnp.ones((4, 3)), m)
    call(batched, m, x4)
    call(accumulate, jnp.zeros(4), x4)
""")

REFERENCE = """
import json, linecache, sys
from jax._src import source_info_util

source_info_util.register_exclusion(__file__)  # this harness is not the user's code
code = open(sys.argv[1]).read()
linecache.cache["<playground>"] = (len(code), None, code.splitlines(True), "<playground>")
namespace = {"__name__": "__main__"}
exec(compile(code, "<playground>", "exec"), namespace)
MEMORY = ("argument_size_in_bytes", "output_size_in_bytes", "alias_size_in_bytes", "temp_size_in_bytes",
          "generated_code_size_in_bytes", "peak_memory_in_bytes")
results = []
for fn, args, kwargs in namespace["CASES"]:
    traced = fn.trace(*args, **kwargs)
    lowered = traced.lower()
    compiled = lowered.compile()
    stats = compiled.memory_analysis()
    results.append({
        "jaxpr": traced.jaxpr.pretty_print(source_info=True, width=40),
        "stablehlo": lowered.as_text(),
        "hlo": compiled.as_text(),
        "cost": {k: float(v) for k, v in compiled.cost_analysis().items()},
        "memory": {name: int(getattr(stats, name)) for name in MEMORY},
    })
print(json.dumps(results))
"""


def captured_events(tmp_path: Path) -> list[dict]:
    (tmp_path / "prog.py").write_text(PROGRAM)  # for the plain process
    ran = runner_harness.run_program(PROGRAM, tmp_path / "run", EIGHT_DEVICES, timeout=180)
    assert ran.status == 0, ran.stderr[-3000:]
    return ran.events


def reference(tmp_path: Path) -> list[dict]:
    program = tmp_path / "prog.py"
    script = tmp_path / "reference.py"
    script.write_text(REFERENCE)
    result = subprocess.run([sys.executable, str(script), str(program)], cwd=tmp_path, env=ENV,
                            capture_output=True, timeout=180)
    assert result.returncode == 0, result.stderr.decode()[-3000:]
    return json.loads(result.stdout)


def test_captured_artifacts_equal_the_stages_api_in_a_plain_process(tmp_path):
    compiled = [e for e in captured_events(tmp_path) if e["type"] == "compiled"]
    expected = reference(tmp_path)
    assert len(compiled) == len(expected) == 12
    assert [e["fn"] for e in compiled] == [
        "scale_shift", "scale_shift", "scale_shift", "power", "power", "normalize", "sgd", "cumulative",
        "branchy", "grad(loss)", "vmap(<lambda>)", "accumulate",  # named for the transformation compiled
    ]
    assert [e["compile_index"] for e in compiled[:5]] == [1, 2, 3, 1, 2]
    for event, plain in zip(compiled, expected, strict=True):
        label = f"{event['key']} {event['fn']}({event['signature']})"
        assert event["truncated"] == {}, label
        for artifact in ("jaxpr", "stablehlo", "hlo"):
            assert event[artifact] == plain[artifact], f"{label}: {artifact} differs"
        assert event["cost"] == plain["cost"], label
        assert {k: event["memory"][k] for k in plain["memory"]} == plain["memory"], label
    # The texts really are the functions': e.g. scan and the gradient's own ops.
    assert "scan[" in compiled[7]["jaxpr"] and "while" in compiled[7]["stablehlo"]
    gradient = compiled[9]
    assert gradient["outputs"] == "f32[4,3]" and gradient["jaxpr"].count("dot_general") == 2  # forward and backward
    assert compiled[11]["memory"]["alias_size_in_bytes"] == 16  # the donated buffer is reused
