# Static arguments
# Arguments marked static are compile-time constants: Python control flow may depend on them, and each new value compiles a new version.
from functools import partial

import jax
import jax.numpy as jnp


@partial(jax.jit, static_argnames="order")
def taylor_exp(x, order):
    # `order` is a plain Python int here, so the loop unrolls at trace time.
    term = jnp.ones_like(x)
    total = jnp.ones_like(x)
    for k in range(1, order):
        term = term * x / k
        total = total + term
    return total


x = jnp.linspace(0.0, 1.0, 5)
for order in (2, 4, 8):
    error = jnp.abs(taylor_exp(x, order=order) - jnp.exp(x)).max()
    print(f"order {order}: max error {error:.2e}")

taylor_exp(x, order=8)  # seen before: no new compilation

# Without static_argnames, `order` would be a tracer and range(order) would fail:
try:
    jax.jit(taylor_exp.__wrapped__)(x, 3)
except Exception as err:
    print(type(err).__name__, "—", str(err).splitlines()[0])
