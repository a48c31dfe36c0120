# Sharding: shard_map and a collective
# shard_map runs the function once per device on that device's block; psum and all_gather talk across the mesh. Inside, show_sharding draws each device's own block.
import jax
import jax.numpy as jnp
from jax.sharding import NamedSharding, PartitionSpec as P
from playground import show_sharding

mesh = jax.make_mesh((2, 4), ("x", "y"))
x = jax.device_put(jnp.arange(64.0).reshape(8, 8), NamedSharding(mesh, P("x", "y")))
show_sharding(x, name="x")


def block_sums(block):
    # block is this device's (4, 2) piece of x.
    show_sharding(block, name="block inside shard_map")
    column_sums = block.sum(axis=0, keepdims=True)   # (1, 2) partial sums
    total = jax.lax.psum(column_sums, "x")          # add the two rows of devices
    return jax.lax.all_gather(total, "y", axis=1, tiled=True)  # (1, 8) on every device


column_totals = jax.jit(
    jax.shard_map(block_sums, mesh=mesh, in_specs=P("x", "y"), out_specs=P(), check_vma=False)
)(x)
print(column_totals)
print("same as x.sum(axis=0):", bool(jnp.allclose(column_totals[0], x.sum(axis=0))))
show_sharding(column_totals, name="column totals (replicated)")
