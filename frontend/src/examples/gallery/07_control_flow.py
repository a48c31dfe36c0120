# Loops and branches inside jit: scan, cond, fori_loop
# Python if/for run at trace time. To loop or branch on traced values, use lax.scan, lax.fori_loop, lax.while_loop and lax.cond: they compile to one loop or branch.
import jax
import jax.numpy as jnp
from jax import lax


@jax.jit
def running_mean(xs):
    # scan carries state through a sequence and stacks per-step outputs.
    def step(carry, x):
        total, count = carry
        total, count = total + x, count + 1
        return (total, count), total / count

    _, means = lax.scan(step, (0.0, 0), xs)
    return means


print("running mean:", running_mean(jnp.array([2.0, 4.0, 6.0, 8.0])))


@jax.jit
def safe_log(x):
    # cond picks a branch from a traced boolean; both branches are compiled.
    return lax.cond(x > 0, jnp.log, lambda v: jnp.full_like(v, -jnp.inf), x)


print("safe_log:", safe_log(jnp.e), safe_log(-1.0))


@jax.jit
def newton_sqrt(a):
    # fori_loop: a fixed number of iterations, compiled as one loop.
    return lax.fori_loop(0, 8, lambda i, x: 0.5 * (x + a / x), a)


print("sqrt(2) ≈", newton_sqrt(2.0))


@jax.jit
def collatz_steps(n):
    # while_loop: the number of iterations depends on the data.
    def body(state):
        n, steps = state
        return jnp.where(n % 2 == 0, n // 2, 3 * n + 1), steps + 1

    return lax.while_loop(lambda s: s[0] != 1, body, (n, 0))[1]


print("Collatz steps for 27:", collatz_steps(27))
