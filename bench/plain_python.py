"""What a program costs in plain Python, for the benchmarks to set the playground beside it.

- ``fresh_python``: a new ``python`` process running the file (import, backend, every compile);
- ``in_process_reruns``: a warm process executing the same code again and again, what a notebook
  user sees on a re-run (everything compiled is in memory);
- ``snippets_cpu_ms``: one warm process (JAX imported, backend started, a first operation done)
  executing each snippet once, in turn: the CPU each costs there, all the process's threads
  counted. The playground's figure for the same snippets is its whole process tree's.

``interpreter`` picks the JAX: the benchmark's own Python, or an installed runtime's.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile


def _write(code: str) -> str:
    with tempfile.NamedTemporaryFile("w", suffix=".py", delete=False) as f:
        f.write(code)
    return f.name


def fresh_python(code: str, runs: int, interpreter: str = sys.executable) -> list[float]:
    import time

    path = _write(code)
    samples = []
    for _ in range(runs):
        start = time.perf_counter()
        subprocess.run([interpreter, path], check=True, capture_output=True)
        samples.append((time.perf_counter() - start) * 1000)
    return samples


IN_PROCESS = """
import sys, time, io, contextlib
code = open(sys.argv[1]).read()
with contextlib.redirect_stdout(io.StringIO()):
    exec(compile(code, "<p>", "exec"), {"__name__": "__main__"})
    samples = []
    for _ in range(int(sys.argv[2])):
        start = time.perf_counter()
        exec(compile(code, "<p>", "exec"), {"__name__": "__main__"})
        samples.append((time.perf_counter() - start) * 1000)
print(" ".join(f"{s:.3f}" for s in samples))
"""


def in_process_reruns(code: str, runs: int, interpreter: str = sys.executable) -> list[float]:
    out = subprocess.run([interpreter, "-c", IN_PROCESS, _write(code), str(runs)], check=True,
                         capture_output=True, text=True).stdout
    return [float(x) for x in out.split()]


SNIPPETS = """
import contextlib, io, json, sys, time
import jax, jax.numpy as jnp
jax.block_until_ready(jnp.ones(8).sum())  # warm: the backend started, JAX's first-use set-up done
codes = json.load(open(sys.argv[1]))
start = time.process_time()
with contextlib.redirect_stdout(io.StringIO()):
    for code in codes:
        exec(compile(code, "<p>", "exec"), {"__name__": "__main__"})
print((time.process_time() - start) * 1000 / len(codes))
"""


def snippets_cpu_ms(codes: list[str], devices: int, interpreter: str = sys.executable) -> float:
    """CPU per snippet in one warm plain process with the worker's device count."""
    env = {**os.environ, "XLA_FLAGS": f"--xla_force_host_platform_device_count={devices}", "JAX_PLATFORMS": "cpu"}
    out = subprocess.run([interpreter, "-c", SNIPPETS, _write(json.dumps(codes))], check=True, capture_output=True,
                         text=True, env=env).stdout
    return float(out.split()[-1])
