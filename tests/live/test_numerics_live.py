"""A run computes what plain Python computes on the same host, to the last digit.

Hosts set OpenBLAS's kernel choices (OPENBLAS_CORETYPE, OPENBLAS_L2_SIZE) where older builds misdetect
the processor; LAPACK's results then depend on them. The sandbox keeps the host's numerical-library
settings (sandbox/isolation/numeric_settings.py), so eigenvalues printed in a run and in a plain
process of the same environment are the same numbers. The second test sets such a setting itself, so
it proves the pass-through on any host, not only on one whose environment happens to carry one.
"""

from __future__ import annotations

import os
import platform
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import done_of, output_text
from tests.live_server import LiveServer

EIGENVALUES = """
import jax, jax.numpy as jnp, numpy as np
a = jax.random.uniform(jax.random.key(0), (64, 64)) + 3 * jnp.eye(64)
print([complex(v) for v in np.asarray(jnp.linalg.eigvals(a))])
"""


def plain_output(settings: dict[str, str]) -> str:
    plain = subprocess.run([sys.executable, "-c", EIGENVALUES], capture_output=True, text=True, timeout=120,
                           env={**os.environ, **settings, "JAX_PLATFORMS": "cpu"}, check=True)
    return plain.stdout.strip()


def test_lapack_results_match_a_plain_process_of_this_host(live):
    events = live.run(EIGENVALUES, timeout=120)
    assert done_of(events)["status"] == "ok", output_text(events)
    assert output_text(events).strip() == plain_output({})


@pytest.mark.skipif(platform.machine() != "x86_64", reason="OpenBLAS's Prescott kernels exist on x86_64 only")
def test_a_host_that_picks_openblas_kernels_gets_their_results_in_runs(tmp_path: Path):
    # Prescott's kernels round differently from the ones a modern processor is given: the eigenvalues'
    # last digits (and their order) change, as on the hosts that must set this.
    settings = {"OPENBLAS_CORETYPE": "Prescott"}
    server = LiveServer(tmp_path / "data", ["--slots", "1"], env=settings)
    try:
        server.wait_ready()
        events = server.run(EIGENVALUES, timeout=120)
    finally:
        server.stop()
    assert done_of(events)["status"] == "ok", output_text(events)
    assert output_text(events).strip() == plain_output(settings)
