"""CPU fairness between slots: a compute-bound run alone, and beside a run that spins 16 processes.

Measures, on a real server with two slots (real worker and sandbox), the time a compute-bound
NumPy program reports for its own loop (``time.perf_counter`` inside the run, so queueing and
start-up do not count):
- alone: nothing else runs in the other slot;
- beside a neighbour: the other slot runs a program that forks 15 children (each in a session of its
  own, as a hostile program would, so the kernel's autogroup cannot pool them) and spins in all 16.

Target: beside the neighbour the run is at most 2x slower than alone. With ``--checkout
DIR`` (repeatable) the same is measured for other checkouts (each with its own ``.venv``), their
servers started side by side and measured in turn, round after round. Figures taken on a busy
host are slower alone too: compare the ratios, measured side by side.
Usage: python bench/cpu_fairness.py [--runs 5] [--rounds 3] [--checkout /path/to/main]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import uuid
from pathlib import Path

import websockets

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.checkouts import servers  # noqa: E402
from bench.stats import percentile  # noqa: E402
from tests.live_server import LiveServer  # noqa: E402

COMPUTE = """
import time, numpy as np
x = np.random.default_rng(0).standard_normal(200_000)
start = time.perf_counter()
for _ in range(30):
    x = np.sort(np.sin(x) * 3.0)
print(f"{time.perf_counter() - start:.4f}")
"""
SPINNER = """
import os, time
end = time.monotonic() + {seconds}
for _ in range(15):
    if os.fork() == 0:
        os.setsid()  # a session each: out of any per-session grouping (autogroup) of its parent
        while time.monotonic() < end:
            pass
        os._exit(0)
while time.monotonic() < end:
    pass
print("spun")
"""


async def run(server: LiveServer, code: str, timeout_s: float = 30.0) -> str:
    async with websockets.connect(server.ws_url, max_size=None) as ws:
        run_id = uuid.uuid4().hex[:12]
        await ws.send(json.dumps({"type": "run", "id": run_id, "code": code, "fresh": True, "timeout_s": timeout_s}))
        out = []
        while True:
            event = json.loads(await ws.recv())
            if event.get("id") != run_id:
                continue
            if event["type"] == "stdout":
                out.append(event["text"])
            if event["type"] == "done":
                assert event["status"] == "ok", event
                return "".join(out)


async def measure(server: LiveServer, runs: int) -> tuple[list[float], list[float]]:
    """(seconds alone, seconds beside the spinning neighbour) of the compute-bound run."""
    alone = [float(await run(server, COMPUTE)) for _ in range(runs)]
    spinning = asyncio.create_task(run(server, SPINNER.format(seconds=4 + 2.5 * runs)))
    await asyncio.sleep(1.5)  # the neighbour has its slot and all 16 processes spin
    beside = [float(await run(server, COMPUTE)) for _ in range(runs)]
    await spinning
    return alone, beside


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--checkout", action="append", default=[], type=Path)
    args = parser.parse_args()
    with servers(args.checkout, ["--slots", "2"]) as started:
        results: dict[Path, tuple[list[float], list[float]]] = {c: ([], []) for c in started}
        for _ in range(args.rounds):
            for checkout, server in started.items():
                asyncio.run(run(server, COMPUTE))  # warm: NumPy's first calls
                alone, beside = asyncio.run(measure(server, args.runs))
                results[checkout][0].extend(alone)
                results[checkout][1].extend(beside)
    for checkout, (alone, beside) in results.items():
        ratio = percentile(beside, 0.5) / percentile(alone, 0.5)
        print(f"{str(checkout):<32} alone p50 {percentile(alone, 0.5) * 1000:7.0f} ms   beside a 16-process "
              f"neighbour p50 {percentile(beside, 0.5) * 1000:7.0f} ms   ratio {ratio:4.2f}x "
              f"[{'met' if ratio <= 2 else 'MISSED'}: <= 2x]  (n={len(alone)}+{len(beside)})")


if __name__ == "__main__":
    main()
