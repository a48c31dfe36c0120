"""Flax, Optax, Equinox, Chex, einops and jaxtyping: a model trained a few steps each way."""
import chex
import einops
import equinox as eqx
import jax
import jax.numpy as jnp
import optax
from flax import linen as nn
from jaxtyping import Array, Float


class MLP(nn.Module):
    @nn.compact
    def __call__(self, x):
        return nn.Dense(1)(nn.relu(nn.Dense(16)(x)))


key = jax.random.key(0)
x = jax.random.normal(key, (32, 3))
y = jnp.sum(x, axis=1, keepdims=True)
model = MLP()
params = model.init(key, x)
optimizer = optax.adam(1e-2)
state = optimizer.init(params)


@jax.jit
def train_step(params, state):
    loss, grads = jax.value_and_grad(lambda p: jnp.mean((model.apply(p, x) - y) ** 2))(params)
    updates, state = optimizer.update(grads, state)
    return optax.apply_updates(params, updates), state, loss


for _ in range(3):
    params, state, loss = train_step(params, state)
print("flax loss", float(loss))

try:
    from flax import nnx

    class Linear(nnx.Module):
        def __init__(self, rngs):
            self.layer = nnx.Linear(3, 1, rngs=rngs)

        def __call__(self, v):
            return self.layer(v)

    print("nnx", Linear(nnx.Rngs(0))(x).shape)
except ImportError:
    print("nnx: not in this Flax")

eqx_model = eqx.nn.MLP(3, 1, 8, 2, key=key)


@eqx.filter_jit
def eqx_loss(m, v, t):
    return jnp.mean((jax.vmap(m)(v) - t) ** 2)


print("equinox", float(eqx_loss(eqx_model, x, y)), eqx.filter_grad(eqx_loss)(eqx_model, x, y) is not None)


def scale(v: Float[Array, "n 3"]) -> Float[Array, "n 3"]:  # noqa: F722 - a jaxtyping shape
    chex.assert_rank(v, 2)
    return v * 2


print("einops", einops.rearrange(scale(x), "(b n) c -> b n c", b=4).shape)
