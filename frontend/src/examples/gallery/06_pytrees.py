# Pytrees: nested parameters
# JAX functions accept nested dicts, lists and tuples of arrays ("pytrees"). jax.tree utilities map over every leaf; grad returns gradients of the same shape.
import jax
import jax.numpy as jnp


def init_mlp(key, sizes):
    params = []
    for n_in, n_out in zip(sizes[:-1], sizes[1:]):
        key, sub = jax.random.split(key)
        params.append({"w": jax.random.normal(sub, (n_in, n_out)) / jnp.sqrt(n_in), "b": jnp.zeros(n_out)})
    return params


def mlp(params, x):
    for layer in params[:-1]:
        x = jax.nn.relu(x @ layer["w"] + layer["b"])
    last = params[-1]
    return x @ last["w"] + last["b"]


params = init_mlp(jax.random.key(0), [2, 16, 1])
print("shapes:", jax.tree.map(jnp.shape, params))
print("parameter count:", sum(leaf.size for leaf in jax.tree.leaves(params)))

x = jax.random.uniform(jax.random.key(1), (64, 2), minval=-1, maxval=1)
y = jnp.sin(3 * x[:, :1]) * x[:, 1:]


@jax.jit
def update(params, x, y):
    loss, grads = jax.value_and_grad(lambda p: jnp.mean((mlp(p, x) - y) ** 2))(params)
    return jax.tree.map(lambda p, g: p - 0.1 * g, params, grads), loss


for step in range(201):
    params, loss = update(params, x, y)
    if step % 50 == 0:
        print(f"step {step:3d}: loss {loss:.4f}")
