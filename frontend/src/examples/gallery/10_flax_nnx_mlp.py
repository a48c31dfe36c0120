# Training an MLP with Flax NNX and Optax
# A small network learns y = sin(3x) from noisy samples: an nnx.Module holds the layers, optax.adam updates them through nnx.Optimizer, and nnx.jit compiles the whole training step once. The loss prints while it trains and is plotted at the end; Inspect shows the compiled step with the model's parameters as arguments.
import jax
import jax.numpy as jnp
import matplotlib.pyplot as plt
import optax
from flax import nnx

# Synthetic data: 256 noisy samples of sin(3x) on [-1, 1].
key_x, key_noise = jax.random.split(jax.random.key(0))
x = jax.random.uniform(key_x, (256, 1), minval=-1.0, maxval=1.0)
y = jnp.sin(3 * x) + 0.1 * jax.random.normal(key_noise, x.shape)


class MLP(nnx.Module):
    def __init__(self, hidden: int, rngs: nnx.Rngs):
        self.layer1 = nnx.Linear(1, hidden, rngs=rngs)
        self.layer2 = nnx.Linear(hidden, hidden, rngs=rngs)
        self.head = nnx.Linear(hidden, 1, rngs=rngs)

    def __call__(self, x):
        x = nnx.gelu(self.layer1(x))
        x = nnx.gelu(self.layer2(x))
        return self.head(x)


model = MLP(hidden=32, rngs=nnx.Rngs(0))  # parameters are created eagerly, from explicit keys
optimizer = nnx.Optimizer(model, optax.adam(1e-2), wrt=nnx.Param)


@nnx.jit  # traced and compiled on the first call; model and optimizer are updated in place
def train_step(model, optimizer, x, y):
    def loss_fn(model):
        return jnp.mean((model(x) - y) ** 2)

    loss, grads = nnx.value_and_grad(loss_fn)(model)
    optimizer.update(model, grads)
    return loss


losses = []
for step in range(201):
    loss = float(train_step(model, optimizer, x, y))
    losses.append(loss)
    if step % 25 == 0:
        print(f"step {step:3d}   loss {loss:.4f}")

grid = jnp.linspace(-1, 1, 200)[:, None]
fig, (ax_loss, ax_fit) = plt.subplots(1, 2, figsize=(9, 3.2))
ax_loss.semilogy(losses)
ax_loss.set(title="training loss", xlabel="step")
ax_fit.scatter(x[:, 0], y[:, 0], s=6, alpha=0.4, label="data")
ax_fit.plot(grid[:, 0], model(grid)[:, 0], color="C1", label="model")
ax_fit.set(title="fit after training")
ax_fit.legend()
plt.show()
