"""The zygote preloads what every run needs, and never starts a JAX backend (a fork would deadlock)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

CHECK = """
import sys
from jaxplay.sandbox.engine import zygote
zygote.preload()
from jax._src import xla_bridge
print("backends", sorted(xla_bridge._backends))
print("dialects", "jaxlib.mlir.dialects.mhlo" in sys.modules or "jaxlib.mlir.dialects.stablehlo" in sys.modules)
"""


def test_preload_imports_the_lowering_path_and_starts_no_backend() -> None:
    env = {**os.environ, "PYTHONPATH": str(ROOT), "JAX_PLATFORMS": "cpu"}
    result = subprocess.run([sys.executable, "-c", CHECK], capture_output=True, text=True, env=env, timeout=120)
    assert result.returncode == 0, result.stderr[-2000:]
    assert "backends []" in result.stdout
    assert "dialects True" in result.stdout


def test_each_context_made_ahead_is_handed_out_once_then_new_ones_are_made() -> None:
    from jaxplay.sandbox.engine.zygote import contexts_made_ahead

    made_fresh: list[object] = []

    def make() -> object:
        made_fresh.append(object())
        return made_fresh[-1]

    make_ir_context = contexts_made_ahead(make, 3)
    assert len(made_fresh) == 3  # made ahead, before any caller
    handed = [make_ir_context() for _ in range(5)]
    assert len({id(context) for context in handed}) == 5  # never the same context twice
    assert set(map(id, handed[:3])) == set(map(id, made_fresh[:3]))
    assert len(made_fresh) == 5  # past the ones made ahead, each call makes its own


BROKEN = """
import sys
from jaxplay.sandbox.engine import zygote
zygote.preload()
print("preloaded", "einops" in sys.modules)
try:
    import built_for_another_jax
except AttributeError as exc:
    print("the run gets:", exc)
"""


def test_a_library_that_fails_at_import_is_left_to_the_run_and_the_zygote_starts(tmp_path: Path) -> None:
    """flax 0.12.8 (this project's pin for JAX 0.10) raises AttributeError at import under JAX 0.12: a zygote
    that preloads it must start all the same, and a run that imports it get the error plain Python gives."""
    (tmp_path / "built_for_another_jax.py").write_text(
        "raise AttributeError(\"module 'jax.experimental.hijax' has no attribute 'HiPrimitive'\")\n")
    env = {**os.environ, "PYTHONPATH": f"{ROOT}:{tmp_path}", "JAX_PLATFORMS": "cpu",
           "JAXPLAY_PRELOAD_LIBRARIES": "built_for_another_jax,einops"}
    result = subprocess.run([sys.executable, "-c", BROKEN], capture_output=True, text=True, env=env, timeout=120)
    assert result.returncode == 0, result.stderr[-2000:]
    assert result.stdout.splitlines() == [
        "preloaded True", "the run gets: module 'jax.experimental.hijax' has no attribute 'HiPrimitive'"]


LOWER = """
import jax, jax.numpy as jnp
def loss(w, x):
    return jnp.mean(jnp.tanh(x @ w) ** 2)
step = jax.jit(lambda w, x: w - 0.1 * jax.grad(loss)(w, x))
lowered = step.lower(jnp.ones(3), jnp.ones((4, 3)))
print(lowered.as_text(debug_info=True))
print(step(jnp.ones(3), jnp.ones((4, 3))))
"""

# The same script with and without the zygote's preload, so that every source location matches.
FORKED = """
import os, sys
from jaxplay.sandbox.engine import zygote
from jax._src import xla_bridge
from jax._src.interpreters import mlir
if sys.argv[1] == "preload": zygote.preload()
print("made ahead", mlir.make_ir_context.__closure__ is not None, "plugins searched", xla_bridge._plugins_registered, file=sys.stderr)
code = sys.stdin.read()
pid = os.fork()
if pid == 0:
    exec(compile(code, "<lowered>", "exec"), {"__name__": "__main__"})
    sys.stdout.flush()
    os._exit(0)
_, status = os.waitpid(pid, 0)
sys.exit(os.waitstatus_to_exitcode(status))
"""


def test_a_fork_of_the_zygote_lowers_and_computes_what_a_fresh_python_does() -> None:
    """Lowered in a context the zygote made ahead, the module (source locations included) and the
    result are those of a process that made its own."""
    env = {**os.environ, "PYTHONPATH": str(ROOT), "JAX_PLATFORMS": "cpu"}
    outputs = {}
    for mode in ("preload", "fresh"):
        result = subprocess.run([sys.executable, "-c", FORKED, mode], input=LOWER, capture_output=True, text=True,
                                env=env, timeout=120)
        assert result.returncode == 0, result.stderr[-2000:]
        outputs[mode] = result.stdout
        searched = mode == "preload"  # no plugin is installed here: the zygote searched, once, ahead
        assert f"made ahead {searched} plugins searched {searched}" in result.stderr
    assert "stablehlo" in outputs["preload"] and "<lowered>" in outputs["preload"]
    assert outputs["preload"] == outputs["fresh"]
