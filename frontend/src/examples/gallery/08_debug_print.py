# Printing inside jit: print vs jax.debug.print
# print runs once, while tracing, and sees abstract tracers. jax.debug.print is compiled into the program and prints the actual values on every call.
import jax
import jax.numpy as jnp


@jax.jit
def softmax(logits):
    print("print (trace time):", logits)                  # a tracer, printed once
    shifted = logits - logits.max()
    jax.debug.print("debug.print (run time): max shifted logit = {m}", m=shifted.max())
    weights = jnp.exp(shifted)
    return weights / weights.sum()


softmax(jnp.array([1.0, 2.0, 3.0]))
softmax(jnp.array([0.5, 0.5, 4.0]))  # cached: only debug.print prints


# debug.print also works under vmap and grad, once per batch element.
jax.vmap(lambda v: jax.debug.print("element {v}", v=v))(jnp.arange(3))
