"""pandas, scikit-learn, NumPyro, Diffrax, Optimistix: data and models beside JAX."""
import diffrax
import jax
import jax.numpy as jnp
import numpy as np
import numpyro
import numpyro.distributions as dist
import optimistix as optx
import pandas as pd
from numpyro.infer import MCMC, NUTS
from sklearn.cluster import KMeans
from sklearn.linear_model import LinearRegression

frame = pd.DataFrame({"group": list("abab"), "value": [1.0, 2.0, 3.0, 4.0]})
print(frame.groupby("group")["value"].mean().to_dict())
frame.to_csv("/tmp/frame.csv", index=False)
print(pd.read_csv("/tmp/frame.csv").shape, pd.Timestamp("2024-01-01").day_name())
xs = np.random.default_rng(0).standard_normal((50, 2))
print("sklearn", LinearRegression().fit(xs, xs @ [1.0, 2.0]).coef_.round(2))
print("kmeans", KMeans(2, n_init=2, random_state=0).fit(xs).cluster_centers_.shape)


def model(data):
    mu = numpyro.sample("mu", dist.Normal(0, 1))
    numpyro.sample("obs", dist.Normal(mu, 1), obs=data)


mcmc = MCMC(NUTS(model), num_warmup=20, num_samples=20, progress_bar=False)
mcmc.run(jax.random.key(0), jnp.ones(10))
print("numpyro", mcmc.get_samples()["mu"].shape)
solution = diffrax.diffeqsolve(diffrax.ODETerm(lambda t, y, args: -y), diffrax.Tsit5(), 0.0, 1.0, 0.1, jnp.ones(2))
print("diffrax", solution.ys.shape)
root = optx.root_find(lambda y, args: y ** 2 - 2.0, optx.Newton(1e-6, 1e-6), jnp.array(1.0))
print("optimistix", float(root.value))
