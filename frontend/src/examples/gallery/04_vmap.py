# vmap: write it for one example, run it on a batch
# jax.vmap adds a batch dimension to a function written for a single example; in_axes says which arguments carry it.
import jax
import jax.numpy as jnp


def distance(a, b):
    """Euclidean distance between two points."""
    return jnp.sqrt(jnp.sum((a - b) ** 2))


points = jax.random.normal(jax.random.key(1), (5, 3))
origin = jnp.zeros(3)

# One batched argument, one shared argument.
print("distances to the origin:", jax.vmap(distance, in_axes=(0, None))(points, origin))

# vmap twice for all pairs: a (5, 5) matrix without a Python loop.
pairwise = jax.jit(jax.vmap(jax.vmap(distance, in_axes=(None, 0)), in_axes=(0, None)))
matrix = pairwise(points, points)
print("pairwise distances:\n", matrix.round(2))

# Per-example gradients: vmap over grad.
def loss(w, x):
    return jnp.sum(jnp.sin(x * w))

per_example_grads = jax.vmap(jax.grad(loss), in_axes=(None, 0))(jnp.ones(3), points)
print("per-example gradient shape:", per_example_grads.shape)
