# chex: catch a shape bug before it becomes a wrong number
# Broadcasting hides mistakes: predictions of shape (n, 1) minus targets of shape (n,) is an (n, n) matrix, and its mean is a number like any other. chex assertions check shapes, ranks and dtypes while JAX traces, inside jit too, and fail with the shapes that disagree.
import chex
import jax
import jax.numpy as jnp

predictions = jnp.array([[1.0], [2.0], [3.0], [4.0]])  # (4, 1): a model's column output
targets = jnp.array([1.0, 2.0, 3.0, 4.0])  # (4,)


def mse(predictions, targets):
    return jnp.mean((predictions - targets) ** 2)


# The predictions are perfect, yet the loss is not 0: the difference broadcast to (4, 4).
print("unchecked loss:", mse(predictions, targets))


@jax.jit
def checked_mse(predictions, targets):
    chex.assert_rank(targets, 1)
    chex.assert_equal_shape([predictions, targets])  # runs at trace time: no cost per call
    return jnp.mean((predictions - targets) ** 2)


try:
    checked_mse(predictions, targets)
except AssertionError as error:
    print("chex caught it:", str(error).splitlines()[0])

# The fix: make the shapes agree, and the check passes.
print("fixed loss:", checked_mse(predictions[:, 0], targets))
chex.assert_trees_all_close(checked_mse(predictions[:, 0], targets), 0.0)
print("shapes and values check out")
