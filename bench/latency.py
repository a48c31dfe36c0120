"""End-to-end latency of a warm run vs a fresh Python process in the same sandbox.

Measures, in one run on this machine:
- warm: send ``run`` for ``print(1)`` over /ws to a real server with its real
  sandboxed worker, until ``done`` arrives (sequential runs, after warm-up);
- naive: a fresh ``python -c "import jax; print(jax.numpy.ones(3).sum())"``
  inside the same bubblewrap sandbox, from spawn to exit.

Targets: warm p50 <= 50 ms, and at least 10x faster than naive.
Usage: python bench/latency.py [--runs 50] [--naive-runs 10]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import subprocess
import sys
import time
from pathlib import Path

import websockets

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.stats import percentile  # noqa: E402
from jaxplay.sandbox.isolation import bwrap  # noqa: E402
from tests.live_server import LiveServer, running_server  # noqa: E402

NAIVE_CODE = "import jax; print(jax.numpy.ones(3).sum())"


async def warm_latencies(server: LiveServer, runs: int, warmup: int = 5) -> list[float]:
    samples: list[float] = []
    async with websockets.connect(server.ws_url) as ws:
        for i in range(warmup + runs):
            start = time.perf_counter()
            await ws.send(json.dumps({"type": "run", "id": f"b{i}", "code": "print(1)", "inspect": False,
                                      "fresh": True}))  # measure the worker path, not the result cache
            while True:
                event = json.loads(await ws.recv())
                if event["type"] == "done":
                    assert event["status"] == "ok", event
                    break
            if i >= warmup:
                samples.append((time.perf_counter() - start) * 1000)
    return samples


def naive_latencies(runs: int) -> list[float]:
    env = {"PATH": "/usr/bin:/bin", "HOME": "/tmp", "PYTHONPATH": str(bwrap.IMPORT_ROOT), "LANG": "C.UTF-8"}
    command = bwrap.sandbox_command([sys.executable, "-c", NAIVE_CODE], env, [])
    samples = []
    for _ in range(runs):
        start = time.perf_counter()
        result = subprocess.run(command, capture_output=True, text=True, check=False)
        samples.append((time.perf_counter() - start) * 1000)
        assert result.stdout.strip() == "3.0", result.stderr[-2000:]
    return samples


def line(name: str, samples: list[float]) -> str:
    return (f"{name:<28} n={len(samples):<3} p50={percentile(samples, 0.5):8.1f} ms  "
            f"p95={percentile(samples, 0.95):8.1f} ms  min={min(samples):8.1f} ms")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=50)
    parser.add_argument("--naive-runs", type=int, default=10)
    args = parser.parse_args()
    with running_server() as server:
        warm = asyncio.run(warm_latencies(server, args.runs))
    naive = naive_latencies(args.naive_runs)
    ratio = statistics.median(naive) / statistics.median(warm)
    print(line("warm run, print(1) over /ws", warm))
    print(line("naive fresh python in bwrap", naive))
    print(f"ratio naive/warm (p50): {ratio:.1f}x   targets: warm p50 <= 50 ms "
          f"[{'met' if percentile(warm, 0.5) <= 50 else 'MISSED'}], >= 10x [{'met' if ratio >= 10 else 'MISSED'}]")


if __name__ == "__main__":
    main()
