# Equinox modules and eqx.filter_jit
# An eqx.Module is a frozen dataclass that is also a pytree, so a whole model passes through jit, grad and optax. eqx.filter_jit traces every array and keeps everything else static (activation functions, ints, Python floats): no static_argnums to write. Change a static value and it compiles again; Inspect lists each function with the model's arrays and the reason.
import equinox as eqx
import jax
import jax.numpy as jnp
import optax


class Polynomial(eqx.Module):
    coefficients: jax.Array  # an array: traced, trained
    degree: int = eqx.field(static=True)  # part of the structure: a new degree is a new program

    def __init__(self, degree: int, key: jax.Array):
        self.coefficients = 0.1 * jax.random.normal(key, (degree + 1,))
        self.degree = degree

    def __call__(self, x):
        return jnp.polyval(self.coefficients, x)


@eqx.filter_jit
def loss(model, x, y):
    return jnp.mean((jax.vmap(model)(x) - y) ** 2)


@eqx.filter_jit
def train_step(model, opt_state, x, y):
    value, grads = eqx.filter_value_and_grad(loss)(model, x, y)
    updates, opt_state = optimizer.update(grads, opt_state, model)
    return eqx.apply_updates(model, updates), opt_state, value


x = jnp.linspace(-2, 2, 64)
y = x**3 - 2 * x + 1
model = Polynomial(degree=3, key=jax.random.key(0))
optimizer = optax.adam(0.05)
opt_state = optimizer.init(eqx.filter(model, eqx.is_array))

for step in range(301):
    model, opt_state, value = train_step(model, opt_state, x, y)
    if step % 100 == 0:
        print(f"step {step:3d}   loss {value:.5f}")
print("learned coefficients:", jnp.round(model.coefficients, 2))  # close to [1, 0, -2, 1]


@eqx.filter_jit
def scaled(model, x, factor):
    return model(x) * factor  # factor is a Python float: static


print(scaled(model, 2.0, 2.0), scaled(model, 2.0, 3.0))  # two compilations: see Inspect for why
