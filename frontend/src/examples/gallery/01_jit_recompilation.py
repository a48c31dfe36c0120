# jit and when it compiles again
# jax.jit traces a function once per input shape and dtype and caches the result. Open the Inspect tab to see each compilation and JAX's reason for every new one.
import jax
import jax.numpy as jnp


@jax.jit
def normalize(x):
    print("tracing normalize for", x.shape, x.dtype)  # runs only while tracing
    return (x - x.mean()) / (x.std() + 1e-6)


normalize(jnp.arange(4.0))        # first call: trace, lower, compile, run
normalize(jnp.arange(4.0) * 10)   # same shape and dtype: the cached executable runs
normalize(jnp.arange(8.0))        # new shape: compiled again
normalize(jnp.arange(8))          # new dtype (int32): compiled again

# A Python scalar is "weakly typed": it takes the dtype of what it meets,
# and is still a new input type for the cache.
normalize(3.0)

print(normalize(jnp.array([1.0, 2.0, 3.0, 4.0])))
