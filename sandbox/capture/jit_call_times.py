"""How long each jitted call took, reported as ``fn_timing``, and at the end of the run against the hardware.

``jit_capture`` hands each call with concrete arguments to ``CallTimes.count_call``
once JAX returned. The call is watched from dispatch to a ready result in a
watcher thread (``jit_ready``), so the program's asynchronous dispatch stays as
it made it. Its time goes to its function's record (``jit_functions.FunctionRecord``):
the first call apart, a call that compiled only counted (its compile time is
reported in the ``compiled`` event's ``phases_ms``), and the others by the
compilation they ran, for the roofline.

While the program runs, an ``fn_timing`` event reports the records that
changed, at most every ``FN_TIMING_INTERVAL_S``; ``finish`` sends the final one.
At the end of the run each compilation's calls are set against its cost and
the device's peak (``roofline``).

Threads: user threads count their calls; the watcher thread records when each
result was ready. Both change the records under the capture's one lock, the
one its compilations are recorded under (``jit_capture``).
"""

from __future__ import annotations

import functools
import statistics
import threading
import time
from typing import Any, Protocol

from jaxplay import worker_protocol as wp
from jaxplay.sandbox.capture import oom_link, roofline
from jaxplay.sandbox.capture.jit_functions import FunctionRecord
from jaxplay.sandbox.capture.jit_ready import ReadyWatcher
from jaxplay.sandbox.output import events

FN_TIMING_INTERVAL_S = 1.0
MAX_TIMING_SAMPLES = 100_000
MAX_SAMPLES_PER_COMPILATION = 10_000
READY_DRAIN_S = 5.0


class HeldRecords(Protocol):
    """What the capture holds of the run's functions (``jit_capture``): their records, and the lock over them."""

    lock: threading.Lock
    records: dict[Any, FunctionRecord]


class CallTimes:
    """The call times of the run's jitted functions (one per process, as the capture is)."""

    def __init__(self, held: HeldRecords) -> None:
        self.held = held
        self.ready = ReadyWatcher()
        self.roofline = roofline.RooflineCollector()
        self.last_timing_emit = 0.0
        self.device_peak: wp.DevicePeak | None = None

    def start(self, device_peak: wp.DevicePeak | None) -> None:
        """A new run: its device's peak, for the roofline (the run's records are the capture's)."""
        self.device_peak = device_peak
        self.roofline.clear()

    def wait_for_results(self) -> None:
        """Until every call watched so far has its result ready, or ``READY_DRAIN_S`` passed."""
        self.ready.drain(READY_DRAIN_S)

    def count_call(self, record: FunctionRecord, start: float, out: Any, compiled_now: bool,
                   key: str | None, failure: oom_link.Failure) -> None:
        record.calls += 1
        if compiled_now:  # compile time is reported in phases_ms, not as execution
            record.compile_calls += 1
        first = record.first_call_ms is None and not record.first_call_pending
        # Calls that compiled are watched too: running out of memory shows first in a new compilation.
        if first or compiled_now or len(record.samples) < MAX_TIMING_SAMPLES:
            record.first_call_pending = record.first_call_pending or first
            self.ready.watch(functools.partial(self._record_ready, record, first, compiled_now, key), start, out,
                             functools.partial(oom_link.result_failed, failure=failure))
        record.changed = True
        now = time.monotonic()
        if now - self.last_timing_emit > FN_TIMING_INTERVAL_S:
            self.last_timing_emit = now
            self.emit_fn_timing(final=False)

    def _record_ready(self, record: FunctionRecord, first: bool, compiled_now: bool, key: str | None,
                      elapsed_s: float) -> None:
        """In the watcher thread: one call's time from dispatch to a ready result."""
        with self.held.lock:
            if first:
                record.first_call_ms = elapsed_s * 1e3
            if not compiled_now:
                record.samples.append(elapsed_s)
                record.total_s += elapsed_s
                if key is not None:
                    samples = record.samples_by_key.setdefault(key, [])
                    if len(samples) < MAX_SAMPLES_PER_COMPILATION:
                        samples.append(elapsed_s)
            record.changed = True

    def emit_fn_timing(self, final: bool) -> None:
        with self.held.lock:
            records = [r for r in self.held.records.values() if r.calls or r.traced_calls]
            changed = any(r.changed for r in records)
            for record in records:
                record.changed = False
        if records and (changed or final):
            events.emit({"type": "fn_timing", "final": final, "functions": [r.timing() for r in records]})

    def emit_roofline(self) -> None:
        """At the end of the run: each compilation's cost against its calls' median time and the device's peak."""
        timings: dict[str, tuple[int, float | None]] = {}
        with self.held.lock:
            for record in self.held.records.values():
                for key, samples in record.samples_by_key.items():
                    timings[key] = (len(samples), statistics.median(samples) if samples else None)
        event = self.roofline.event(timings, self.device_peak)
        if event is not None:
            events.emit(event)
