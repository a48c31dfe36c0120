"""A program that sets up JAX's backend itself: its run gets a fresh spare whose backend starts under
the filter, after the program's own settings."""
import os

os.environ["XLA_FLAGS"] = "--xla_force_host_platform_device_count=4"
import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402

jax.config.update("jax_platforms", "cpu")
print(jax.device_count(), jax.jit(lambda v: v + 1)(jnp.arange(4)))
