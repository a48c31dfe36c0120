"""A GPU host, side by side in one run: a bf16 matmul timed bare vs in the playground, and run latency.

Prints: the bare median of an 8192x8192 bf16 matmul in a plain process; the
playground's ``timeit`` median of the same; their ratio (target within 10%);
and run latency over /ws for ``print(1)`` and for a first jnp op (target
p50 <= 150 ms). Needs an NVIDIA GPU; says so and exits 0 without one.
Usage: python bench/gpu.py [--runs 20]
"""

from __future__ import annotations

import argparse
import asyncio
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.stats import percentile  # noqa: E402
from bench.warm import timed_runs  # noqa: E402
from jaxplay.sandbox.isolation import gpu  # noqa: E402
from tests.gpu.test_gpu_host import BARE, MATMUL  # noqa: E402
from tests.live_server import running_server  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=20)
    args = parser.parse_args()
    if not gpu.nvidia_gpus():
        print("no NVIDIA GPU on this host: nothing to measure")
        return
    bare = float(subprocess.run([sys.executable, "-c", BARE], capture_output=True, text=True, check=True).stdout)
    with running_server(["--memory-limit-mb", "16384"]) as server:
        time.sleep(5)
        events = server.run(MATMUL, timeout=300)
        played = next(e for e in events if e["type"] == "timing")["median_ms"]
        print1 = asyncio.run(timed_runs(server, ["print(1)"] * args.runs, None))
        first_op = asyncio.run(timed_runs(server, ["import jax.numpy as jnp\nprint(float(jnp.ones(3).sum()))"]
                                          * args.runs, None))
    print(f"bf16 8192x8192 matmul  bare {bare:.3f} ms  playground {played:.3f} ms  ratio {played / bare:.3f} "
          f"[{'met' if abs(played / bare - 1) <= 0.10 else 'MISSED'}: within 10%]")
    for name, samples in (("print(1)", print1), ("first jnp op", first_op)):
        print(f"{name:<14} n={len(samples)} p50={percentile(samples, 0.5):8.1f} ms  p95={percentile(samples, 0.95):8.1f} ms")
    print(f"first jnp op p50 <= 150 ms [{'met' if percentile(first_op, 0.5) <= 150 else 'MISSED'}]")


if __name__ == "__main__":
    main()
