# Random numbers with explicit keys
# JAX has no hidden random state: a key goes in, numbers come out. Split keys to get independent streams, and the same key always gives the same numbers.
import jax
import jax.numpy as jnp

key = jax.random.key(42)
print("same key, same numbers:", jax.random.uniform(key, (3,)), jax.random.uniform(key, (3,)))

# split: independent keys for independent uses. Never reuse a key.
key, init_key, noise_key = jax.random.split(key, 3)
weights = jax.random.normal(init_key, (2, 3))
noise = 0.1 * jax.random.normal(noise_key, (3,))
print("weights:\n", weights)

# fold_in derives a key from a counter, e.g. one per step or per device.
step_keys = [jax.random.fold_in(key, step) for step in range(3)]
print("dropout masks:", [jax.random.bernoulli(k, 0.5, (4,)).astype(int).tolist() for k in step_keys])


@jax.jit
def noisy_mean(key, x):
    # Keys work inside jit like any other array.
    return jnp.mean(x + jax.random.normal(key, x.shape))


print("noisy mean:", noisy_mean(noise_key, jnp.arange(10.0)))
