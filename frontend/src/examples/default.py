# Edit the code, then press Ctrl+Enter (Cmd+Enter on a Mac) to run it.
import time
import jax
import jax.numpy as jnp

def loss(w, x, y):
    """Mean squared error of a linear model."""
    return jnp.mean((x @ w - y) ** 2)

@jax.jit  # compiled by XLA on first call, fast afterwards
def update(w, x, y):
    return w - 0.3 * jax.grad(loss)(w, x, y)

kx, kn = jax.random.split(jax.random.key(0))
x = jax.random.normal(kx, (128, 3))
y = x @ jnp.array([2.0, -1.0, 0.5]) + 0.01 * jax.random.normal(kn, (128,))

w = jnp.zeros(3)
for step in range(8):
    w = update(w, x, y)
    print(f"step {step}: loss {loss(w, x, y):.5f}")
    time.sleep(0.25)  # slow down to watch the output stream in

# vmap turns the per-example loss into a batched one, no loop needed.
per_example = jax.vmap(loss, in_axes=(None, 0, 0))(w, x[:4], y[:4])
print("per-example loss:", per_example)
w  # a final expression is shown as the result
