"""A jitted function announces its compilation (`compiling`) before its `compiled` event, while the run goes on."""

from __future__ import annotations

from tests.conftest import done_of

PROGRAM = """
import jax, jax.numpy as jnp

@jax.jit
def many_steps(x):
    for _ in range(200):
        x = jnp.sin(x) * 1.01
    return x

print("before")
many_steps(jnp.ones(4)).block_until_ready()
print("after")
many_steps(jnp.ones(4))
"""


def test_compiling_is_announced_before_compiled_and_only_when_compiling(live):
    events = live.run(PROGRAM)
    assert done_of(events)["status"] == "ok"
    kinds = [(e["type"], e.get("text", "").strip()) for e in events]
    compiling = [e for e in events if e["type"] == "compiling"]
    assert len(compiling) == 1  # the second call hits the cache: nothing to announce
    assert compiling[0]["fn"] == "many_steps" and compiling[0]["line"] == 5 and compiling[0]["compile_index"] == 1
    at = kinds.index(("compiling", ""))
    assert kinds.index(("stdout", "before")) < at
    compiled_at = next(i for i, e in enumerate(events) if e["type"] == "compiled")
    assert at < compiled_at
