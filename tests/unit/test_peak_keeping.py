"""The device peak a worker keeps: never a figure measured under a CPU hog over a better one, the best of every
try, re-checked only when the host is idle. Measured for real (calibration.measure in this process), with real
spinning processes as the hog."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from jaxplay import worker_protocol as wp
from jaxplay.sandbox.engine import calibration, peak_keeping
from jaxplay.sandbox.engine.peak_cache import PeakCache, checked
from jaxplay.sandbox.engine.peak_keeping import IDLE_BELOW, PeakKeeper, merge, record

CPU = {"backend": "cpu", "device_kind": "cpu", "device_count": 1, "jax_version": "test"}
DAY = 24 * 3600.0


@contextmanager
def cpu_hog() -> Iterator[None]:
    """Two spinning processes per core: the host's CPUs are all busy."""
    hogs = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(2 * (os.cpu_count() or 1))]
    try:
        time.sleep(1.0)
        yield
    finally:
        for hog in hogs:
            hog.kill()
        for hog in hogs:
            hog.wait()


def measured() -> wp.DevicePeak:
    peak = checked(calibration.measure())
    assert peak is not None
    return peak


def figures(kept: dict[str, Any] | wp.DevicePeak | None) -> tuple[float, float]:
    if isinstance(kept, wp.DevicePeak):
        return kept.flops_per_s, kept.bytes_per_s
    assert kept is not None
    return kept["flops_per_s"], kept["bytes_per_s"]


def test_each_figure_kept_is_the_better_one_unless_the_kept_one_is_stale():
    now = 1e9
    idle = record(wp.DevicePeak(100.0, 50.0, how="idle"), 0.05, now - DAY)
    hogged = record(wp.DevicePeak(50.0, 60.0, how="hogged"), 0.95, now)
    kept = merge(idle, hogged, now)
    assert figures(kept) == (100.0, 60.0)  # each figure on its own: the better of the two
    assert kept["flops_per_s_at"] == now - DAY and kept["bytes_per_s_at"] == now
    assert kept["provisional"]  # its bytes/s was measured on a busy host: re-checked soon
    stale = merge(idle, hogged, now + 8 * DAY)  # a week on, the host may have changed: the new figure stands
    assert figures(stale) == (50.0, 60.0)
    assert figures(merge(None, hogged, now)) == (50.0, 60.0)


def test_a_measurement_under_a_cpu_hog_does_not_replace_an_idle_one_and_the_best_of_every_try_stands(tmp_path):
    results: list[wp.DevicePeak] = []

    async def measure() -> wp.DevicePeak:
        results.append(measured())
        return results[-1]

    async def scenario() -> None:
        keeper = PeakKeeper(PeakCache(tmp_path), CPU, measure, lambda: 0)
        await keeper.measure_once(await peak_keeping.host_busy_fraction())  # as idle as this host gets
        with cpu_hog():
            busy = await peak_keeping.host_busy_fraction()
            assert busy >= IDLE_BELOW, busy  # the hog is seen
            assert not await keeper.recheck() and len(results) == 1  # a re-check does not measure under it
            await keeper.measure_once(busy)  # a measurement forced under the hog
        for _ in range(2):
            await keeper.measure_once(await peak_keeping.host_busy_fraction())
        best = tuple(max(figures(r)[i] for r in results) for i in range(2))
        assert figures(keeper.kept) == best and figures(keeper.peak) == best
        hogged = results[1]
        assert figures(keeper.kept) >= figures(hogged)
        # What a restarted worker loads: the same best figures.
        assert figures(PeakCache(tmp_path).load_record(CPU)) == best

    asyncio.run(scenario())
    first, hogged = results[0], results[1]
    print(f"idle {first.flops_per_s:.3g} FLOP/s {first.bytes_per_s:.3g} B/s; "
          f"under the hog {hogged.flops_per_s:.3g} FLOP/s {hogged.bytes_per_s:.3g} B/s")


def test_a_re_check_waits_for_the_worker_to_have_no_run_in_flight(tmp_path):
    asked: list[int] = []

    async def measure() -> wp.DevicePeak:
        asked.append(1)
        return wp.DevicePeak(1.0, 1.0)

    keeper = PeakKeeper(PeakCache(tmp_path), CPU, measure, lambda: 1)
    assert not asyncio.run(keeper.recheck()) and asked == []
