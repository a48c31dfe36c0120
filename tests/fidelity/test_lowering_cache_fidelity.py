"""A re-run served by the lowered-module cache behaves as the same program does in plain Python.

Each run is a fresh fork of a process that imported JAX, as in the sandbox
(tests/lowering_harness.py); only the cache folder carries over between runs,
as a browser session's saved entries do. Each case compares a cached re-run
with the same program run without any cache.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.lowering_harness import run_programs

RUNTIMES = [None, "0.12.0.1", "0.6.2", "0.4.38"]  # the venv's JAX, then the installed runtimes

UNUSED_DONATION = """
import warnings, jax, jax.numpy as jnp
with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    total = jax.jit(lambda x: x.sum(), donate_argnums=0)(jnp.ones(8))
print(float(total))
TEXTS["warnings"] = [str(w.message).split(".")[0] for w in caught]
"""


@pytest.mark.parametrize("runtime", RUNTIMES, ids=lambda r: r or "venv")
def test_a_warning_jax_gives_while_lowering_is_given_again_on_a_rerun(tmp_path: Path, runtime: str | None) -> None:
    # JAX warns of unused donations while it lowers: a re-run that loads the module must warn too.
    plain, first, again = run_programs(tmp_path / "cache", [{"code": UNUSED_DONATION, "cached": False},
                                                            UNUSED_DONATION, UNUSED_DONATION], runtime)
    (warning,) = plain["texts"]["warnings"]
    assert warning.startswith("Some donated buffers were not usable: ") and "float32[8]" in warning
    assert first["texts"] == plain["texts"]
    assert again["texts"] == plain["texts"], again["counts"]


def test_a_lowering_warning_a_run_ignored_is_given_to_the_next_run(tmp_path: Path) -> None:
    ignored = UNUSED_DONATION.replace('simplefilter("always")', 'simplefilter("ignore")')
    quiet, next_run = run_programs(tmp_path / "cache", [ignored, UNUSED_DONATION])
    assert quiet["texts"]["warnings"] == []
    assert next_run["texts"]["warnings"] == ["Some donated buffers were not usable: float32[8]"]


SWAPPED_RULE = """
import jax, jax.numpy as jnp
from jax import lax
from jax.interpreters import mlir
cosine = mlir._lowerings[lax.cos_p]
mlir.register_lowering(lax.sin_p, getattr(cosine, "rule", cosine))  # JAX's own rule, of another primitive
print(float(jnp.sin(jnp.float32(0.0))), float(jax.jit(jnp.sin)(jnp.float32(0.0))))
"""
HONEST_SINE = """
import jax, jax.numpy as jnp
print(float(jnp.sin(jnp.float32(0.0))), float(jax.jit(jnp.sin)(jnp.float32(0.0))))
"""


@pytest.mark.parametrize("runtime", RUNTIMES, ids=lambda r: r or "venv")
def test_a_rule_a_run_registered_for_a_primitive_does_not_outlive_the_run(tmp_path: Path, runtime: str | None) -> None:
    # The swapped rule is installed code, so "is the rule installed" says yes: the key must still tell
    # JAX's sine from a sine lowered by the cosine's rule, or the session's later runs compute cosines.
    swapped, honest, plain = run_programs(tmp_path / "cache", [SWAPPED_RULE, HONEST_SINE,
                                                                {"code": HONEST_SINE, "cached": False}], runtime)
    assert swapped["out"] == "1.0 1.0\n"  # what plain Python prints for the swap
    assert plain["out"] == "0.0 0.0\n"
    assert honest["out"] == plain["out"], honest["counts"]
    assert any("registered by the program" in why for why in swapped["counts"]["refusals"]), swapped["counts"]


DISTINCT_JITS = """
import gc, jax, jax.numpy as jnp
x = jnp.ones((32, 32))
def resident_mib():
    return int(open("/proc/self/statm").read().split()[1]) * 4096 >> 20
jax.jit(lambda v: v * 0.5)(x).block_until_ready()
before = resident_mib()
for i in range(80):
    f = jax.jit(lambda v, i=i: jnp.tanh(v @ v + i))
    f(x).block_until_ready()
    del f
gc.collect()
TEXTS["grew_mib"] = resident_mib() - before
"""


def test_lowerings_of_functions_the_program_dropped_are_freed_as_jax_frees_them(tmp_path: Path) -> None:
    # JAX's own in-memory caches hold a lowering only while its function lives; each lowered module
    # keeps an MLIR context (over a MiB), so holding them all runs a jit-in-a-loop program out of memory.
    plain, cached = run_programs(tmp_path / "cache", [{"code": DISTINCT_JITS, "cached": False}, DISTINCT_JITS])
    assert cached["counts"]["misses"] >= 80
    assert cached["texts"]["grew_mib"] <= plain["texts"]["grew_mib"] + 48, (plain["texts"], cached["texts"])


PATCHED_JAX = """
import jax, jax.numpy as jnp
from jax._src.lib.mlir.dialects import hlo
hlo.sine = hlo.cosine  # JAX's own module changed: sine's rule is still the installed one
print(float(jax.jit(jnp.sin)(jnp.float32(0.0))))
"""
HONEST_JIT_SINE = """
import jax, jax.numpy as jnp
print(float(jax.jit(jnp.sin)(jnp.float32(0.0))))
"""


@pytest.mark.xfail(strict=True, reason="the key describes installed code by what it is, not by the module globals "
                   "it reads: a program that changes JAX's own modules lowers otherwise under the same key, and "
                   "its session's later runs load that module (as they would an entry the program crafted)")
def test_a_run_that_changes_jaxs_own_modules_does_not_change_the_next_run(tmp_path: Path) -> None:
    patched, honest, plain = run_programs(tmp_path / "cache", [PATCHED_JAX, HONEST_JIT_SINE,
                                                                {"code": HONEST_JIT_SINE, "cached": False}])
    assert patched["out"] == "1.0\n" and plain["out"] == "0.0\n"
    assert honest["out"] == plain["out"], honest["counts"]


TRACE_TIME = """
import warnings, jax, jax.numpy as jnp
@jax.jit
def f(x):
    print("tracing f with", x.shape)
    warnings.warn("f was traced")
    return x * {factor}
with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    print(f(jnp.arange(3.0)))
    try:
        jax.jit(lambda x: x[jnp.float32(1.5)])(jnp.arange(3.0))
    except Exception as exc:
        print(type(exc).__name__)
TEXTS["warnings"] = [str(w.message) for w in caught]
"""


@pytest.mark.parametrize("runtime", RUNTIMES, ids=lambda r: r or "venv")
def test_trace_time_prints_warnings_and_errors_happen_in_every_run(tmp_path: Path, runtime: str | None) -> None:
    doubled, tripled = TRACE_TIME.format(factor="2.0"), TRACE_TIME.format(factor="3.0")  # the same line, name, shape
    plain, first, again, edited, plain_edited = run_programs(
        tmp_path / "cache", [{"code": doubled, "cached": False}, doubled, doubled, tripled,
                             {"code": tripled, "cached": False}], runtime)
    assert again["counts"]["hits"] >= 1 and again["counts"]["misses"] == 0
    assert plain["out"].startswith("tracing f with (3,)\n[0. 2. 4.]\n")
    assert first["out"] == again["out"] == plain["out"] and first["texts"] == again["texts"] == plain["texts"]
    assert "f was traced" in plain["texts"]["warnings"]
    assert edited["out"] == plain_edited["out"] != plain["out"]  # another body under the same name: another key
    assert edited["texts"] == plain_edited["texts"]
