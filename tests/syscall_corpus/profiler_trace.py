"""JAX's profiler writing a Perfetto trace to /tmp, and the playground's timing helpers."""
import glob

import jax
import jax.numpy as jnp
from playground import profile, timeit

f = jax.jit(lambda a: jnp.sin(a) @ a)
x = jnp.ones((128, 128))
with jax.profiler.trace("/tmp/jax-trace", create_perfetto_trace=True):
    with jax.profiler.TraceAnnotation("matmul"):
        f(x).block_until_ready()
print(sorted(p.rsplit("/", 1)[1] for p in glob.glob("/tmp/jax-trace/**/*", recursive=True) if "." in p)[:4])
with profile("steps"):
    for _ in range(3):
        f(x).block_until_ready()
timeit(lambda: f(x).block_until_ready(), label="f")
jax.profiler.save_device_memory_profile("/tmp/memory.prof")
print("memory profile written")
