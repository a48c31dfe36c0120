"""The block an export puts above a program that imports the playground's helpers
(frontend/src/sharing/playground_fallback.py): a no-op in the playground, stand-ins anywhere else."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from tests.runner_harness import run_programs

REPO = Path(__file__).resolve().parents[2]
FALLBACK = (REPO / "frontend" / "src" / "sharing" / "playground_fallback.py").read_text()
PROGRAM = """import jax.numpy as jnp
from playground import HTML, TimingResult, display, show_sharding, timeit
x = jnp.arange(6.0).reshape(2, 3)
display(x, HTML("<b>bold</b>"))
show_sharding({"x": x}, name="params")
result = timeit("jnp.sin(x)", number=5, repeat=3)
assert isinstance(result, TimingResult) and result.median > 0 and len(result.samples) == 3
print("median is positive")
"""


def test_outside_the_playground_the_stand_ins_run_the_program(tmp_path):
    ran = subprocess.run([sys.executable, "-I", "-c", FALLBACK + PROGRAM], cwd=tmp_path, capture_output=True,
                         text=True, timeout=300, env={**os.environ, "JAX_PLATFORMS": "cpu"})
    assert ran.returncode == 0, ran.stderr[-2000:]
    assert "params['x']" in ran.stdout and "jnp.sin(x): " in ran.stdout and "median is positive" in ran.stdout
    assert "playground" not in ran.stderr


def test_in_the_playground_the_block_leaves_the_real_helpers_in_place():
    (events,) = run_programs([FALLBACK + PROGRAM], cwd=str(REPO))
    kinds = [event["type"] for event in events]
    assert "error" not in kinds, events
    assert "timing" in kinds and "sharding" in kinds and "display" in kinds  # the playground's own views
