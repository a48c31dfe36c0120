"""Arrays sharded across the 8 CPU devices: meshes, NamedSharding, shard_map, pmap, collectives."""
import jax
import jax.numpy as jnp
import numpy as np
from jax.sharding import Mesh, NamedSharding
from jax.sharding import PartitionSpec as P
from playground import show_sharding

devices = np.array(jax.devices()).reshape(4, 2)
mesh = Mesh(devices, ("data", "model"))
x = jax.device_put(jnp.arange(64.0).reshape(8, 8), NamedSharding(mesh, P("data", "model")))
show_sharding(x)
y = jax.jit(lambda a: jnp.tanh(a @ a.T), out_shardings=NamedSharding(mesh, P("data", None)))(x)
print(y.sharding, float(y.sum()))
jax.debug.visualize_array_sharding(y)

try:
    from jax import shard_map  # newer JAX
except ImportError:
    from jax.experimental.shard_map import shard_map


def local_sum(block):
    return jax.lax.psum(block.sum(keepdims=True), "data")


summed = jax.jit(shard_map(local_sum, mesh=mesh, in_specs=P("data", None), out_specs=P(None, None)))(
    jnp.ones((8, 4)))
print("psum", summed)
print("pmap", jax.pmap(lambda v: jax.lax.pmean(v, "i"), axis_name="i")(jnp.arange(8.0)))
print("all_gather", jax.pmap(lambda v: jax.lax.all_gather(v, "i"), axis_name="i")(jnp.arange(8.0))[0])
print(jax.jit(lambda a: a * 2).lower(x).compile().as_text().count("all-"), "collectives")
