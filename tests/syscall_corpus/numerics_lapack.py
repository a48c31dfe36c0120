"""numpy, scipy and jax.numpy linear algebra: LAPACK and BLAS with their threads."""
import jax
import jax.numpy as jnp
import jax.scipy as jsp
import numpy as np
import scipy.fft
import scipy.integrate
import scipy.linalg
import scipy.optimize
import scipy.sparse
import scipy.sparse.linalg
import scipy.stats

rng = np.random.default_rng(0)
a = rng.standard_normal((64, 64))
spd = a @ a.T + 64 * np.eye(64)
print("eig", np.sort(np.linalg.eigvals(a).real)[:2])
print("svd", np.linalg.svd(a, compute_uv=False)[:2])
print("solve", np.linalg.solve(spd, np.ones(64))[:2], np.linalg.cholesky(spd)[0, 0], np.linalg.qr(a)[1][0, 0])
print("scipy", scipy.linalg.expm(a / 64)[0, 0], scipy.linalg.lu_factor(a)[0][0, 0])
print("minimize", scipy.optimize.minimize(lambda v: ((v - 3) ** 2).sum(), np.zeros(2)).x)
sparse = scipy.sparse.random(100, 100, density=0.05, random_state=0) + scipy.sparse.eye(100)
print("sparse", scipy.sparse.linalg.spsolve(sparse.tocsc(), np.ones(100))[:2])
print("fft", np.abs(scipy.fft.fft(np.arange(8.0)))[:2], scipy.integrate.quad(np.sin, 0, np.pi)[0])
print("stats", scipy.stats.norm.cdf(1.0))
print("jnp", jnp.linalg.eigvals(jnp.asarray(a[:8, :8])).shape, jnp.linalg.svd(jnp.asarray(a[:8, :8]))[1][:2])
print("jnp solve", jnp.linalg.solve(jnp.asarray(spd), jnp.ones(64))[:2], jnp.linalg.inv(jnp.eye(3)))
print("jsp", jsp.linalg.cho_factor(jnp.asarray(spd))[0][0, 0], jsp.special.logsumexp(jnp.arange(3.0)))
jax.config.update("jax_enable_x64", True)
print("x64", jnp.linalg.det(jnp.asarray(a[:4, :4])).dtype)
