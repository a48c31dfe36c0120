"""A run computes what plain Python computes on the same host, to the last digit.

Hosts set OpenBLAS's kernel choices (OPENBLAS_CORETYPE, OPENBLAS_L2_SIZE) where older builds misdetect
the processor; LAPACK's results then depend on them. The sandbox keeps the host's numerical-library
settings (sandbox/isolation/numeric_settings.py), so eigenvalues printed in a run and in a plain
process of the same environment are the same numbers.
"""

from __future__ import annotations

import os
import subprocess
import sys

from tests.conftest import done_of, output_text

EIGENVALUES = """
import jax, jax.numpy as jnp, numpy as np
a = jax.random.uniform(jax.random.key(0), (64, 64)) + 3 * jnp.eye(64)
print([complex(v) for v in np.asarray(jnp.linalg.eigvals(a))])
"""


def test_lapack_results_match_a_plain_process_of_this_host(live):
    events = live.run(EIGENVALUES, timeout=120)
    assert done_of(events)["status"] == "ok", output_text(events)
    plain = subprocess.run([sys.executable, "-c", EIGENVALUES], capture_output=True, text=True, timeout=120,
                           env={**os.environ, "JAX_PLATFORMS": "cpu"}, check=True)
    assert output_text(events).strip() == plain.stdout.strip()
