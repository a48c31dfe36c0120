# Sharding: a data-parallel training step
# Every device on a 1-D mesh (the cpu backend's 8): each device takes its share of the batch, the parameters are replicated, and XLA adds an all-reduce to average the gradients. Open the Sharding tab.
import jax
import jax.numpy as jnp
from jax.sharding import NamedSharding, PartitionSpec as P
from playground import show_sharding

n = jax.device_count()  # 8 on the cpu backend; on one GPU the mesh has one device and no collective
mesh = jax.make_mesh((n,), ("data",))  # all devices along one axis
print(mesh)

key_w, key_x = jax.random.split(jax.random.key(0))
params = {
    "w": jax.random.normal(key_w, (16, 4)) * 0.1,
    "b": jnp.zeros(4),
}
# Replicated: P() shards no dimension, so every device holds all of it.
params = jax.device_put(params, NamedSharding(mesh, P()))

# The batch dimension is split over "data": 64 rows -> 64 / n rows per device (8 on 8 devices).
x = jax.device_put(jax.random.normal(key_x, (64, 16)), NamedSharding(mesh, P("data")))
y = jax.device_put(jnp.ones((64, 4)), NamedSharding(mesh, P("data")))
show_sharding(x, name="x (batch)")
show_sharding(params, name="params")


def loss_fn(params, x, y):
    prediction = x @ params["w"] + params["b"]
    return jnp.mean((prediction - y) ** 2)


@jax.jit
def train_step(params, x, y):
    loss, grads = jax.value_and_grad(loss_fn)(params, x, y)
    # Each device computed gradients on its rows; the mean over the whole
    # batch needs every device's part: XLA inserts an all-reduce here.
    new_params = jax.tree.map(lambda p, g: p - 0.1 * g, params, grads)
    return new_params, loss


for step in range(3):
    params, loss = train_step(params, x, y)
    print(f"step {step}: loss {loss:.4f}")

# The updated parameters are still replicated on every device.
show_sharding(params["w"], name="w after 3 steps")
