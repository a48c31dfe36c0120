"""Which measured device peak a worker keeps: measured when the host is idle, the best of several, re-checked.

A peak is what the device can do. A worker that measured it while runs (its
own, or anything else on the host) hogged the CPU saw 0.50x the FLOP/s and
0.75x the bytes/s, and kept that for good. So:

- a measurement is taken when the host is idle where it can be: no run in
  flight on this worker and the host's CPUs less than ``IDLE_BELOW`` busy
  (``/proc/stat`` over a second); a worker's first start waits up to
  ``START_IDLE_WAIT_S`` for that, then measures anyway and calls the figure
  provisional;
- each figure (FLOP/s, bytes/s) kept is the best measured within
  ``MAX_AGE_S``: a new measurement replaces a kept one only if it is better,
  or if the kept one is older than that (the host may have changed); so a
  figure measured under load never replaces one measured idle, and the best
  of every try stands;
- the worker re-checks from time to time (``PeakKeeper.forever``): every
  ``PROVISIONAL_RECHECK_S`` while the figure is provisional, else every
  ``RECHECK_S``, whenever the host is idle then; a run that arrives meanwhile
  waits for the measurement (about a second on a CPU).

Tasks: the agent awaits ``PeakKeeper.initial`` at start and runs
``PeakKeeper.forever`` as a task of its own; both measure through the agent's
sandboxed probe, on a seat it holds meanwhile.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from jaxplay import worker_protocol as wp
from jaxplay.sandbox.engine.peak_cache import PeakCache, checked

log = logging.getLogger("jaxplay.worker")

RATES = ("flops_per_s", "bytes_per_s")
IDLE_BELOW = 0.25  # fraction of all the host's CPU time busy: below it, the host is idle enough to measure
BUSY_SAMPLE_S = 1.0
START_IDLE_WAIT_S = 3.0  # a first start waits this long at most: its figure is provisional, re-checked soon
MAX_AGE_S = 7 * 24 * 3600
RECHECK_S = 6 * 3600
PROVISIONAL_RECHECK_S = 120.0
PROC_STAT = Path("/proc/stat")

Measure = Callable[[], Awaitable[wp.DevicePeak | None]]


def _cpu_times() -> tuple[int, int]:
    """(busy, total) jiffies of all the host's CPUs since boot."""
    fields = [int(v) for v in PROC_STAT.read_text().split("\n", 1)[0].split()[1:]]
    idle = fields[3] + (fields[4] if len(fields) > 4 else 0)  # idle + iowait
    total = sum(fields[:8])  # guest time is counted in user already
    return total - idle, total


async def host_busy_fraction(sample_s: float = BUSY_SAMPLE_S) -> float:
    """How busy the host's CPUs were over the next ``sample_s`` (0 idle, 1 every CPU busy); 1 if unknown."""
    try:
        busy0, total0 = _cpu_times()
        await asyncio.sleep(sample_s)
        busy1, total1 = _cpu_times()
    except (OSError, ValueError, IndexError):
        return 1.0
    return (busy1 - busy0) / (total1 - total0) if total1 > total0 else 1.0


def merge(kept: dict[str, Any] | None, new: dict[str, Any], now: float, max_age_s: float = MAX_AGE_S) -> dict[str, Any]:
    """The record to keep after measuring ``new`` (a record as ``record`` makes): for each figure, the
    better of the two, or the new one when the kept one is older than ``max_age_s``."""
    if kept is None or checked(kept) is None:
        return dict(new)
    merged = dict(kept)
    for rate in RATES:
        at = f"{rate}_at"
        if new[rate] >= kept[rate] or now - float(kept.get(at, 0)) > max_age_s:
            merged[rate], merged[at], merged[f"{rate}_busy"] = new[rate], new[at], new[f"{rate}_busy"]
            merged["how"], merged["device_kind"] = new.get("how", kept.get("how")), new.get("device_kind")
    merged["measured_at"] = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(max(merged[f"{r}_at"] for r in RATES)))
    merged["provisional"] = any(merged.get(f"{r}_busy", 1.0) >= IDLE_BELOW for r in RATES)
    return merged


def record(peak: wp.DevicePeak, busy: float, now: float) -> dict[str, Any]:
    """A probe's checked peak as kept: each figure with when it was measured and how busy the host was."""
    kept: dict[str, Any] = wp.to_wire(peak)
    for rate in RATES:
        kept[f"{rate}_at"], kept[f"{rate}_busy"] = now, round(busy, 3)
    kept["provisional"] = busy >= IDLE_BELOW
    return kept


class PeakKeeper:
    def __init__(self, cache: PeakCache, description: dict[str, Any], measure: Measure,
                 runs_in_flight: Callable[[], int]) -> None:
        self.cache = cache
        self.description = description
        self.measure = measure  # one sandboxed probe with calibration: a checked peak, or None
        self.runs_in_flight = runs_in_flight
        self.kept: dict[str, Any] | None = cache.load_record(description)

    @property
    def peak(self) -> wp.DevicePeak | None:
        """What the hello and every run's roofline get (the kept record's public part)."""
        return checked(self.kept) if self.kept is not None else None

    def next_check_s(self) -> float:
        return PROVISIONAL_RECHECK_S if self.kept is None or self.kept.get("provisional") else RECHECK_S

    async def initial(self) -> wp.DevicePeak | None:
        """The kept peak, measured now (waiting a little for an idle host) when there is none."""
        if self.kept is None:
            deadline = time.monotonic() + START_IDLE_WAIT_S
            busy = await host_busy_fraction()
            while busy >= IDLE_BELOW and time.monotonic() < deadline:
                busy = await host_busy_fraction()
            await self.measure_once(busy)
        return self.peak

    async def measure_once(self, busy: float) -> bool:
        """Measure (the host this busy just before) and keep what is better; whether the kept peak changed."""
        peak = await self.measure()
        if peak is None:
            return False
        now = time.time()
        merged = merge(self.kept, record(peak, busy, now), now)
        changed = self.kept is None or any(merged[r] != self.kept[r] for r in RATES)
        self.kept = merged
        self.cache.save(self.description, merged)
        log.info("device peak measured (host %.0f%% busy): %.3g FLOP/s, %.3g bytes/s; kept %.3g FLOP/s, %.3g bytes/s%s",
                 busy * 100, peak.flops_per_s, peak.bytes_per_s, merged["flops_per_s"], merged["bytes_per_s"],
                 " (provisional: re-checked when the host is idle)" if merged["provisional"] else "")
        return changed

    async def recheck(self) -> bool:
        """One re-check, only with no run in flight and an idle host; whether the kept peak changed."""
        if self.runs_in_flight():
            return False
        busy = await host_busy_fraction()
        if busy >= IDLE_BELOW or self.runs_in_flight():
            return False
        return await self.measure_once(busy)

    async def forever(self, on_change: Callable[[wp.DevicePeak | None], None]) -> None:
        while True:
            await asyncio.sleep(self.next_check_s())
            try:
                if await self.recheck():
                    on_change(self.peak)
            except Exception:  # a failed re-check keeps the last peak; the next one tries again
                log.exception("device peak re-check failed")
