"""A GPU host, side by side in one run: what a person waits for, against the targets.

Measures, with the server's own local worker on this host (``jaxplay serve`` as a new
operator starts it, every run naming ``backend: gpu``):

- a bf16 8192x8192 matmul: a bare process's median and the playground's ``timeit``
  median, interleaved (bare, playground, bare, ...) so drift hits both alike; the ratio of
  their medians (target: within 10%);
- ``print(1)`` back-to-back on one GPU slot (p50 <= 50 ms) and trivial runs per second,
  16 sent at once (>= 10 runs/s per GPU); both again on a second server whose runs share
  each GPU (``--runs-per-gpu``, 4 unless ``--shared`` says otherwise), side by side;
- the first jnp operation of code never seen before, a new session each, 1.5 s apart as a
  person presses Run (p50 <= 150 ms);
- a final-expression array's display against ``print`` of the same array (<= 50 ms over);
- the default example's first run, its text already in the shared cache, against its
  re-run (<= 1.5x).

Needs an NVIDIA GPU; says so and exits 0 without one.
Usage: python bench/gpu.py [--runs 20]
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.stats import percentile  # noqa: E402
from bench.warm import DEFAULT, session_cookie, timed_runs, wait_for_shared_cache  # noqa: E402
from jaxplay.sandbox.isolation import gpu  # noqa: E402
from tests.gpu.test_gpu_host import BARE, MATMUL  # noqa: E402
from tests.live_server import LiveServer, running_server  # noqa: E402

ARRAY = "import jax.numpy as jnp\nx = jnp.arange({n}.0).reshape(10, -1)\n"


async def timed(server: LiveServer, codes: list[str], cookie: str | None = None, gap_s: float = 0.0,
                field: str = "wall") -> list[float]:
    """``timed_runs`` on the GPU backend, named explicitly (a host may offer cpu too)."""
    return await timed_runs(server, codes, cookie, gap_s, backend="gpu", field=field)


async def at_once(server: LiveServer, count: int) -> float:
    """Runs per second for ``count`` trivial runs sent together, each on its own connection."""
    start = time.perf_counter()
    await asyncio.gather(*(timed(server, ["print(1)"]) for _ in range(count)))
    return count / (time.perf_counter() - start)


def interleaved_matmul(server: LiveServer, rounds: int) -> tuple[list[float], list[float]]:
    bare, played = [], []
    for _ in range(rounds):
        out = subprocess.run([sys.executable, "-c", BARE], capture_output=True, text=True, check=True,
                             env={"PATH": "/usr/bin:/bin", "CUDA_VISIBLE_DEVICES": "0"})
        bare.append(float(out.stdout))
        events = server.run(MATMUL, timeout=300, backend="gpu")
        played.append(next(e for e in events if e["type"] == "timing")["median_ms"])
    return bare, played


def line(name: str, samples: list[float]) -> str:
    return f"{name:<40} n={len(samples):<3} p50={percentile(samples, 0.5):8.1f} ms  p95={percentile(samples, 0.95):8.1f} ms"


def verdict(ok: bool, target: str) -> str:
    return f"[{'met' if ok else 'MISSED'}: {target}]"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=20)
    parser.add_argument("--matmul-rounds", type=int, default=5)
    parser.add_argument("--shared", type=int, default=4, help="--runs-per-gpu of the second server (1: none)")
    args = parser.parse_args()
    if not gpu.nvidia_gpus():
        print("no NVIDIA GPU on this host: nothing to measure")
        return
    with running_server(["--memory-limit-mb", "16384"]) as server:
        print(f"shared cache filled after {wait_for_shared_cache(server):.0f} s")
        cookie = session_cookie(server)
        first = asyncio.run(timed(server, [DEFAULT], cookie))[0]
        rerun = asyncio.run(timed(server, [DEFAULT] * 5, cookie))
        bare, played = interleaved_matmul(server, args.matmul_rounds)
        back_to_back = asyncio.run(timed(server, ["print(1)"] * args.runs))
        per_second = asyncio.run(at_once(server, 16))
        first_op = [asyncio.run(timed(server, [f"import jax.numpy as jnp\nprint(float((jnp.arange({7 + i}) * {i + 2}.5)"
                                               f".sum()))"], session_cookie(server), gap_s=1.5))[0]
                    for i in range(args.runs // 2)]
        shown = asyncio.run(timed(server, [ARRAY.format(n=1000 + 10 * i) + "x" for i in range(10)], field="elapsed"))
        printed = asyncio.run(timed(server, [ARRAY.format(n=1000 + 10 * i) + "print(x)" for i in range(10)],
                                    field="elapsed"))
    shared_figures = None
    if args.shared > 1:
        with running_server(["--memory-limit-mb", "16384", "--runs-per-gpu", str(args.shared)]) as shared:
            wait_for_shared_cache(shared)
            shared_figures = (asyncio.run(timed(shared, ["print(1)"] * args.runs)), asyncio.run(at_once(shared, 16)))
    ratio = statistics.median(played) / statistics.median(bare)
    print(f"bf16 8192x8192 matmul, {len(bare)} interleaved rounds: bare median {statistics.median(bare):.3f} ms, "
          f"playground median {statistics.median(played):.3f} ms, ratio {ratio:.3f} "
          + verdict(abs(ratio - 1) <= 0.10, "within 10%"))
    print(line("print(1) back-to-back, one GPU slot", back_to_back),
          verdict(percentile(back_to_back, 0.5) <= 50, "p50 <= 50 ms"))
    print(f"{'16 trivial runs at once':<40} {per_second:.1f} runs/s", verdict(per_second >= 10, ">= 10 runs/s"))
    if shared_figures is not None:
        shared_back_to_back, shared_per_second = shared_figures
        print(line(f"print(1) back-to-back, {args.shared} runs per GPU", shared_back_to_back),
              verdict(percentile(shared_back_to_back, 0.5) <= 50, "p50 <= 50 ms"))
        print(f"{f'16 trivial runs at once, {args.shared} per GPU':<40} {shared_per_second:.1f} runs/s",
              verdict(shared_per_second >= 10 * len(gpu.nvidia_gpus()), ">= 10 runs/s per GPU"))
    print(line("first jnp op, never-seen code, 1.5 s apart", first_op),
          verdict(percentile(first_op, 0.5) <= 150, "p50 <= 150 ms"))
    over = percentile(shown, 0.5) - percentile(printed, 0.5)
    print(line("array as the final expression (run time)", shown))
    print(line("the same array printed (run time)", printed))
    print(f"{'display over print':<40} {over:+.1f} ms", verdict(over <= 50, "<= 50 ms"))
    print(f"{'default example, first run (shared cache)':<40} {first:8.1f} ms; re-run p50 "
          f"{percentile(rerun, 0.5):.1f} ms; ratio {first / percentile(rerun, 0.5):.2f}",
          verdict(first <= 1.5 * percentile(rerun, 0.5), "<= 1.5x the re-run"))


if __name__ == "__main__":
    main()
