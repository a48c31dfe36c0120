"""What the output panel shows: treescope values, figures, HTML, the sharding display."""
import jax
import jax.numpy as jnp
import matplotlib.pyplot as plt
import numpy as np
import treescope
from playground import HTML, display

params = {"w": jnp.ones((3, 4)), "b": jnp.zeros(4), "layers": [jnp.arange(5), {"scale": 2.0}]}
display(params)
print(len(treescope.render_to_html(params)) > 0)
fig, axes = plt.subplots(1, 2, figsize=(6, 3))
xs = np.linspace(0, 6, 100)
axes[0].plot(xs, np.sin(xs))
axes[1].imshow(np.asarray(jax.random.normal(jax.random.key(1), (16, 16))))
plt.show()
fig.savefig("/tmp/figure.png")
fig.savefig("/tmp/figure.svg")
display(HTML("<b>bold</b> text"))
jnp.arange(6).reshape(2, 3)
