# Sharding: Explicit sharding and its type errors
# With Explicit axes (the default of jax.make_mesh) the sharding is part of an array's type, so a mismatch is an error at trace time, with a message, before anything runs. Here is one, caught, and two ways to fix it.
import jax
import jax.numpy as jnp
from jax.sharding import AxisType, PartitionSpec as P, reshard
from playground import show_sharding

n = jax.device_count()  # 8 on the cpu backend; 1 on one GPU, where every block is the whole array
rows = 2 if n % 2 == 0 else 1
mesh = jax.make_mesh((rows, n // rows), ("x", "y"), axis_types=(AxisType.Explicit, AxisType.Explicit))

with jax.set_mesh(mesh):  # bare PartitionSpecs now refer to this mesh
    a = jax.device_put(jnp.ones((8, 16)), P("x", "y"))  # columns over y
    b = jax.device_put(jnp.ones((16, 4)), P("x", None))  # rows over x
    print("a:", jax.typeof(a), " b:", jax.typeof(b))

    @jax.jit
    def product(a, b):
        return a @ b

    # The contracted dimension (16) is split over y in a but over x in b:
    # JAX will not guess which layout you meant.
    try:
        product(a, b)
    except Exception as error:  # jax's ShardingTypeError
        print(f"{type(error).__name__}: {str(error).splitlines()[0]}\n")

    # Fix 1: do not split the contracted dimension: a keeps whole rows, b is replicated.
    fixed = product(reshard(a, P("x", None)), reshard(b, P()))
    print("fix 1:", jax.typeof(fixed))

    # Fix 2: split it the same way in both (over y) and say which output sharding
    # you want: each device multiplies its slices and XLA adds the collective
    # that sums the partial products.
    @jax.jit
    def product_into(a, b):
        return jnp.matmul(a, reshard(b, P("y", None)), out_sharding=P("x", None))

    fixed2 = product_into(a, b)
    print("fix 2:", jax.typeof(fixed2))
    show_sharding(fixed2, name="a @ b, rows over x")

    # Uncomment to see the error with its full traceback:
    # product(a, b)
