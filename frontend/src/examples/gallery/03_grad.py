# grad and value_and_grad
# Differentiate Python functions: gradients of scalar losses, values and gradients together, auxiliary outputs, and a jitted training step.
import jax
import jax.numpy as jnp


def loss(w, x, y):
    prediction = jnp.tanh(x @ w)
    return jnp.mean((prediction - y) ** 2)


x = jnp.array([[0.5, -1.0], [1.5, 0.3], [-0.7, 0.8]])
y = jnp.array([0.2, 0.9, -0.4])
w = jnp.zeros(2)

print("d loss / d w =", jax.grad(loss)(w, x, y))

# value_and_grad returns both in one pass; argnums picks what to differentiate.
value, (dw, dx) = jax.value_and_grad(loss, argnums=(0, 1))(w, x, y)
print("loss", value, "| d loss / d x has shape", dx.shape)


# has_aux: return extra outputs that are not differentiated.
def loss_with_stats(w, x, y):
    error = jnp.tanh(x @ w) - y
    return jnp.mean(error**2), {"max_error": jnp.abs(error).max()}


@jax.jit  # the Inspect tab shows the compiled gradient computation
def train_step(w, x, y):
    (value, stats), grads = jax.value_and_grad(loss_with_stats, has_aux=True)(w, x, y)
    return w - 0.5 * grads, value, stats


for step in range(5):
    w, value, stats = train_step(w, x, y)
    print(f"step {step}: loss {value:.4f}, max error {stats['max_error']:.3f}")
