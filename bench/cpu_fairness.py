"""CPU fairness between slots: a compute-bound run alone, and beside a run that spins 16 processes.

Measures, on a real server with two slots (real worker and sandbox), the time a compute-bound
NumPy program reports for its own loop (``time.perf_counter`` inside the run, so queueing and
start-up do not count):
- alone: nothing else runs in the other slot;
- beside a neighbour: the other slot runs a program that forks 15 children (each in a session of its
  own, as a hostile program would, so the kernel's autogroup cannot pool them) and spins in all 16.

The two are measured in pairs, back to back (alone and beside a neighbour started for that one run,
in turns first), and the ratio is taken per pair: on a busy host the load others put on it changes from second to
second, and two blocks of runs measured a minute apart compared that load as much as the slots (a
ratio of 0.8x to 3.3x over three tries). ``--host-load N`` adds N spinning processes on the host,
outside any sandbox, for the whole measurement.

Target: beside the neighbour the run is at most 2x slower than alone (the median of the pairs'
ratios). With ``--checkout DIR`` (repeatable) the same is measured for other checkouts (each with
its own ``.venv``), their servers started side by side and measured in turn, round after round.
Usage: python bench/cpu_fairness.py [--pairs 5] [--rounds 3] [--host-load 2] [--checkout /path/to/main]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import subprocess
import sys
import uuid
from collections.abc import Iterator
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


async def beside_a_neighbour(server: LiveServer, expected_s: float) -> float:
    """Seconds of the compute-bound run while the other slot spins 16 processes (started for this run)."""
    spinning = asyncio.create_task(run(server, SPINNER.format(seconds=2.5 + 3 * expected_s)))
    await asyncio.sleep(1.5)  # the neighbour has its slot and all 16 processes spin
    beside = float(await run(server, COMPUTE))
    await spinning
    return beside


async def pair(server: LiveServer, beside_first: bool) -> tuple[float, float]:
    """(seconds alone, seconds beside the spinning neighbour) of the compute-bound run, back to back; the
    order alternates between pairs, so that whatever the first of two runs meets counts for both."""
    if beside_first:
        beside = await beside_a_neighbour(server, 1.0)
        return float(await run(server, COMPUTE)), beside
    alone = float(await run(server, COMPUTE))
    return alone, await beside_a_neighbour(server, alone)


@contextlib.contextmanager
def host_load(processes: int) -> Iterator[None]:
    """``processes`` spinning processes on the host, outside any sandbox, until the block ends."""
    spinners = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(processes)]
    try:
        yield
    finally:
        for spinner in spinners:
            spinner.kill()
            spinner.wait()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pairs", type=int, default=5, help="pairs (alone, beside) per round")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--host-load", type=int, default=0, help="spinning processes on the host, outside the sandbox")
    parser.add_argument("--checkout", action="append", default=[], type=Path)
    args = parser.parse_args()
    with servers(args.checkout, ["--slots", "2"]) as started, host_load(args.host_load):
        results: dict[Path, list[tuple[float, float]]] = {c: [] for c in started}
        for _ in range(args.rounds):
            for checkout, server in started.items():
                asyncio.run(run(server, COMPUTE))  # warm: NumPy's first calls
                for index in range(args.pairs):
                    results[checkout].append(asyncio.run(pair(server, beside_first=index % 2 == 1)))
    print(f"host: {os.cpu_count()} CPUs, {args.host_load} spinning processes added, load average "
          f"{' '.join(f'{v:.1f}' for v in os.getloadavg())} at the end")
    for checkout, pairs in results.items():
        alone, beside = [a for a, _ in pairs], [b for _, b in pairs]
        ratios = [b / a for a, b in pairs]
        ratio = percentile(ratios, 0.5)
        print(f"{str(checkout):<32} alone p50 {percentile(alone, 0.5) * 1000:7.0f} ms   beside a 16-process "
              f"neighbour p50 {percentile(beside, 0.5) * 1000:7.0f} ms   ratio p50 {ratio:4.2f}x "
              f"(pairs p10 {percentile(ratios, 0.1):4.2f}x, p90 {percentile(ratios, 0.9):4.2f}x) "
              f"[{'met' if ratio <= 2 else 'MISSED'}: <= 2x]  (n={len(pairs)} pairs)")


if __name__ == "__main__":
    main()
