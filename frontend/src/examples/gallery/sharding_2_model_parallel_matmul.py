# Sharding: a 2x4 model-parallel matmul
# A 2x4 mesh on the cpu backend's 8 devices (smaller where there are fewer): the batch is split over "x" and the weight columns over "y", so the product is split both ways, one block per device. The second layer contracts over the split dimension, which takes a collective.
import jax
import jax.numpy as jnp
from jax.sharding import NamedSharding, PartitionSpec as P

n = jax.device_count()  # 8 on the cpu backend; 1 on one GPU, where every block is the whole array
rows = 2 if n % 2 == 0 else 1
mesh = jax.make_mesh((rows, n // rows), ("x", "y"))  # on 8 devices: 0-3 in row x=0, 4-7 in row x=1

x = jax.device_put(jnp.ones((8, 16)), NamedSharding(mesh, P("x", None)))   # rows over x
w1 = jax.device_put(jnp.ones((16, 32)), NamedSharding(mesh, P(None, "y")))  # columns over y
w2 = jax.device_put(jnp.ones((32, 16)), NamedSharding(mesh, P("y", None)))  # rows over y

jax.debug.visualize_array_sharding(x)   # 2 blocks, each on the 4 devices of a row
jax.debug.visualize_array_sharding(w1)  # 4 column blocks, each on 2 devices


@jax.jit
def layer1(x, w1):
    return jnp.tanh(x @ w1)  # rows split over x, columns over y: 8 blocks


h = layer1(x, w1)
print(jax.typeof(h))  # float32[8@x,32@y]: the sharding is part of the type
jax.debug.visualize_array_sharding(h)


@jax.jit
def layer2(h, w2):
    # The contracted dimension (32) is split over y: each device holds a partial
    # sum. Asking for rows over x, columns whole makes XLA sum across y.
    return jnp.matmul(h, w2, out_sharding=NamedSharding(mesh, P("x", None)))


out = layer2(h, w2)
jax.debug.visualize_array_sharding(out)
print(jax.device_get(out)[0, :4])  # 32 * tanh(16) each
