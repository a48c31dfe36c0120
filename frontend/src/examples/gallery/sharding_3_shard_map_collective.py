# Sharding: shard_map and a collective
# shard_map runs the function once per device on that device's block; psum and all_gather talk across the mesh. Inside, show_sharding draws each device's own block and which devices hold equal copies.
import jax
import jax.numpy as jnp
from jax.sharding import NamedSharding, PartitionSpec as P
from playground import show_sharding

n = jax.device_count()  # 8 on the cpu backend; 1 on one GPU, where every block is the whole array
rows = 2 if n % 2 == 0 else 1
mesh = jax.make_mesh((rows, n // rows), ("x", "y"))  # 2x4 on the cpu backend
x = jax.device_put(jnp.arange(64.0).reshape(8, 8), NamedSharding(mesh, P("x", "y")))
show_sharding(x, name="x")


def column_sums(block):
    # block is this device's piece of x ((4, 2) on a 2x4 mesh): different on every device.
    show_sharding(block, name="block")
    partial = block.sum(axis=0, keepdims=True)  # (1, 2): sums of this device's 4 rows
    total = jax.lax.psum(partial, "x")          # add the two devices of each column: equal along x now
    gathered = jax.lax.all_gather(total, "y", axis=1, tiled=True)  # (1, 8): every column's sum
    show_sharding(gathered, name="after psum and all_gather")
    return gathered


# out_specs=P("y"): stack the devices' (1, 8) results along y ((4, 8) on a 2x4 mesh).
sums = jax.jit(jax.shard_map(column_sums, mesh=mesh, in_specs=P("x", "y"), out_specs=P("y")))(x)
print(sums)  # four equal rows: every device ended up with all the sums
rows = jax.device_get(sums)  # a NumPy array: index it freely
print("equal to x.sum(axis=0):", bool((rows == jax.device_get(x).sum(axis=0)).all()))
