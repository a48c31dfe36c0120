"""An out-of-memory error names the jitted function that ran out, its compilation and that compilation's peak.

The programs run through the real runner (a fork of one process that
imported JAX, as the zygote does) and ask XLA's CPU client for far more
memory than any machine has, so the allocation fails at once, whatever
the host.
"""

from __future__ import annotations

from pathlib import Path

from jaxplay.sandbox.learning import oom_message
from tests.runner_harness import run_programs

REPO = Path(__file__).resolve().parents[2]

# The result is read on another line than the call: XLA's error surfaces where the value is used.
ASYNC_READ = """import jax, jax.numpy as jnp

@jax.jit
def small(x):
    return x * 2

@jax.jit
def outer_square(x):
    y = jnp.outer(x, x)          # 2**19 x 2**19 float32: a terabyte
    return jnp.sum(jnp.sin(y) * y)

print(small(jnp.ones(3)))
total = outer_square(jnp.ones((1 << 19,)))
print(total)
"""

# The error is caught and the program raises its own MemoryError from it: the link follows the cause.
CHAINED = """import jax, jax.numpy as jnp

@jax.jit
def huge(x):
    return jnp.outer(x, x) + 1

try:
    huge(jnp.ones((1 << 19,))).block_until_ready()
except Exception as exc:
    raise MemoryError("the model did not fit") from exc
"""


def test_an_out_of_memory_error_links_to_the_compilation_and_its_peak():
    events, chained = run_programs([ASYNC_READ, CHAINED], str(REPO))
    error = next(e for e in events if e["type"] == "error")
    assert error["ename"] == "MemoryError" and error["line"] == 14
    link = error["out_of_memory"]
    compiled = {e["key"]: e for e in events if e["type"] == "compiled"}
    failed = compiled[link["key"]]
    assert failed["fn"] == "outer_square" and link["fn"] == "outer_square" and link["line"] == 8
    assert link["phase"] == "execute"
    view = failed["memory_view"]
    assert link["peak_bytes"] == view["peak"]["bytes"] >= (1 << 19) ** 2 * 4
    assert link["instruction"] == view["instructions"][view["peak"]["instruction"]][0]

    error = next(e for e in chained if e["type"] == "error")
    assert error["ename"] == "MemoryError" and error["out_of_memory"]["fn"] == "huge"
    assert error["out_of_memory"]["key"] == next(e["key"] for e in chained if e["type"] == "compiled")


def test_an_out_of_memory_error_of_plain_numpy_links_to_nothing():
    (events,) = run_programs(["import numpy as np\nx = np.ones(1 << 47)\n"], str(REPO))
    error = next(e for e in events if e["type"] == "error")
    assert error["ename"] == "MemoryError" and "out_of_memory" not in error


def test_xla_cpu_out_of_memory_reported_as_a_failed_precondition_is_out_of_memory():
    # JAX 0.4.38's CPU client words a failed allocation this way (not RESOURCE_EXHAUSTED).
    message = ("FAILED_PRECONDITION: Buffer Definition Event: Error preparing computation: %sOut of memory "
               "allocating 275146342400 bytes.")
    assert oom_message.is_out_of_memory(RuntimeError(message), message)
    assert oom_message.asked_bytes(message) == 275146342400
    assert not oom_message.is_out_of_memory(RuntimeError("FAILED_PRECONDITION: bad shape"), "FAILED_PRECONDITION: bad shape")
