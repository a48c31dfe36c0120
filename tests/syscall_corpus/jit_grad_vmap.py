"""jit, grad, vmap, random, control flow, callbacks: the transformations a first program uses.
Its first compilation is ``step`` (the recording's passes request asks for it)."""
import functools

import jax
import jax.numpy as jnp
import numpy as np


@jax.jit
def step(w, x, y):
    loss = lambda w: jnp.mean((x @ w - y) ** 2)  # noqa: E731
    return w - 0.1 * jax.grad(loss)(w)


key = jax.random.key(0)
kx, kw, kd = jax.random.split(key, 3)
x = jax.random.normal(kx, (64, 4))
y = x @ jnp.arange(4.0)
w = jnp.zeros(4)
for _ in range(5):
    w = step(w, x, y)
print("w", w)
print("per row", jax.vmap(lambda r: r @ w)(x[:3]))
print("jacobian", jax.jacfwd(lambda v: jnp.sin(v) * v)(jnp.ones(3)).shape)
print("hessian", jax.hessian(lambda v: jnp.sum(v ** 3))(jnp.ones(2)))


@functools.partial(jax.jit, static_argnums=1)
def power(v, n):
    return jax.lax.fori_loop(0, n, lambda i, acc: acc * v, jnp.ones_like(v))


print("power", power(jnp.array([2.0, 3.0]), 3))
print("scan", jax.lax.scan(lambda c, v: (c + v, c * v), 0.0, jnp.arange(5.0)))
print("cond", jax.jit(lambda v: jax.lax.cond(v > 0, jnp.sin, jnp.cos, v))(1.0))
print("while", jax.lax.while_loop(lambda c: c < 100, lambda c: c * 2, 1))
print("dropout", jax.random.bernoulli(kd, 0.5, (8,)).sum(), jax.random.uniform(kw, (2,)))
jax.jit(lambda v: jax.debug.print("debug print {v}", v=v))(jnp.arange(3))
jax.debug.callback(lambda v: print("callback", np.asarray(v)), jnp.ones(2))
print("pure_callback", jax.jit(lambda v: jax.pure_callback(np.sin, jax.ShapeDtypeStruct(v.shape, v.dtype), v))(
    jnp.ones(2)))
print("remat", jax.grad(jax.checkpoint(lambda v: jnp.sum(jnp.tanh(v) ** 2)))(jnp.ones(3)))
print("fft", jnp.fft.rfft(jnp.arange(8.0)))
print("sort", jnp.sort(jax.random.normal(kw, (6,))), jnp.einsum("ij,jk->ik", x[:2], x[:4].T).shape)
print(jax.make_jaxpr(lambda v: jnp.exp(v) + 1)(1.0))
compiled = jax.jit(lambda a: a @ a.T).lower(x).compile()
print("cost", sorted(compiled.cost_analysis() if isinstance(compiled.cost_analysis(), dict)
                     else compiled.cost_analysis()[0])[:3])
print(compiled.as_text()[:60])
print(jax.device_get(w).dtype, jax.devices()[0].platform, jax.device_count())
