# Timing JAX code properly
# JAX dispatches work asynchronously, so timing a call alone measures dispatch. playground.timeit warms up (the first call compiles), blocks until results are ready and repeats, like %timeit. The Inspect tab charts every run.
import jax
import jax.numpy as jnp
from playground import timeit

x = jax.random.normal(jax.random.key(0), (256, 256))


def gelu_mlp(x):
    return jax.nn.gelu(x @ x) @ x


fast = jax.jit(gelu_mlp)

eager = timeit(gelu_mlp, x, repeat=5)  # op by op: each operation dispatched on its own
fused = timeit(fast, x, repeat=5)      # one compiled, fused program
timeit("fast(x).sum()", repeat=5)      # an expression works too
print(f"jit is {eager.median / fused.median:.1f}x faster here")
