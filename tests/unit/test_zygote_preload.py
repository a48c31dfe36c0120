"""The zygote preloads what every run needs, and never starts a JAX backend (a fork would deadlock)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

CHECK = """
import sys
from jaxplay.sandbox.engine import zygote
zygote.preload()
from jax._src import xla_bridge
print("backends", sorted(xla_bridge._backends))
print("dialects", "jaxlib.mlir.dialects.mhlo" in sys.modules or "jaxlib.mlir.dialects.stablehlo" in sys.modules)
"""


def test_preload_imports_the_lowering_path_and_starts_no_backend() -> None:
    env = {**os.environ, "PYTHONPATH": str(ROOT), "JAX_PLATFORMS": "cpu"}
    result = subprocess.run([sys.executable, "-c", CHECK], capture_output=True, text=True, env=env, timeout=120)
    assert result.returncode == 0, result.stderr[-2000:]
    assert "backends []" in result.stdout
    assert "dialects True" in result.stdout
