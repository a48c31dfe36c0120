"""What a run's flags cost, side by side in one run: the same program in one warm sandbox without flags,
with JAX options only (set in the warm spare, before the program), and with XLA flags (which need a spare
whose backend starts after they are set, so the backend's start-up is paid while the run waits).

Rounds alternate the three, so load on the machine falls on each alike. Prints each one's p50 and p90 of
the run's time as the worker measures it, and its ratio to the run without flags.
Usage: python bench/run_flags.py [--rounds 8]
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import statistics
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.stats import percentile  # noqa: E402
from jaxplay import worker_protocol as wp  # noqa: E402
from jaxplay.run_flags import validate  # noqa: E402
from jaxplay.sandbox.engine.warm_sandbox import WarmSandbox  # noqa: E402
from jaxplay.settings import Settings  # noqa: E402

PROGRAM = """
import jax, jax.numpy as jnp
print(jax.jit(lambda x: x / 2.0 + 1)(jnp.arange(8.0)).sum())
"""
CASES = {
    "no flags": validate(None),
    # Each set to its default: the same program compiles to the same code, so what differs is where it runs.
    "JAX options": validate({"config": {"jax_numpy_rank_promotion": "allow"}}),
    "XLA flags": validate({"xla": {"xla_cpu_enable_fast_math": False}}),
}


async def measure(rounds: int) -> dict[str, list[float]]:
    sandbox = WarmSandbox(0, dataclasses.replace(Settings.from_env(), cgroups="off"), "bench-flags")
    times: dict[str, list[float]] = {name: [] for name in CASES}
    try:
        await asyncio.wait_for(sandbox.start(), 120)
        for round_ in range(rounds + 1):
            for name, flags in CASES.items():
                events: list[dict] = []
                result = await sandbox.run(f"{name}-{round_}", PROGRAM, 60.0, wp.JobOptions(flags=flags),
                                           events.append)
                if str(result.status) != "ok":
                    raise SystemExit(f"{name}: {result} {events}")
                if round_:  # the first round warms the sandbox's caches
                    times[name].append(result.elapsed_ms)
                await asyncio.sleep(0.5)  # as a person presses Run: the next spare is ready
    finally:
        await sandbox.close()
    return times


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=8)
    args = parser.parse_args()
    times = asyncio.run(measure(args.rounds))
    base = statistics.median(times["no flags"])
    print(f"{'run':<12} {'p50 ms':>8} {'p90 ms':>8} {'x no flags':>11}")
    for name, values in times.items():
        p50 = statistics.median(values)
        print(f"{name:<12} {p50:>8.1f} {percentile(values, 0.9):>8.1f} {p50 / base:>10.2f}x")


if __name__ == "__main__":
    main()
