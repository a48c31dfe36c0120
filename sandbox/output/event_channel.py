"""What a run may say on its event channel, checked by the worker: the channel is a protocol, not trust.

The run's own process writes JSON lines on fd 3 (``sandbox/output/events.py``), but
user code can write anything there. The worker accepts only the event types
a run may send (never ``started`` or ``done``: those are the worker's and the
server's), enforces every cap itself (the largest line, bytes per type,
total bytes, events per second), parses with a depth limit, and rejects
non-finite numbers. What it refuses is dropped, with one notice per reason,
and the lines after it are read as usual.

An admitted event is one the server accepts in turn: the worker protocol
wraps it one level deep (``WorkerEvent.event``) and the server parses every
frame with ``jaxplay.json_input`` (its depth limit, finite numbers only). A
frame the server refuses would end the worker's connection and every run on
it, so this gate is the stricter of the two.
"""

from __future__ import annotations

import json
import math
import time
from typing import Any

from jaxplay import json_input

# type -> bytes of that type one run may send. Output (stdout/stderr) has its own pipes and cap.
RUN_EVENT_BUDGETS: dict[str, int] = {
    "error": 1 << 20,
    "notice": 256 << 10,
    "compiled": 48 << 20,
    "compiling": 1 << 20,
    "fn_timing": 4 << 20,
    "timing": 4 << 20,
    "sharding": 8 << 20,
    "display": 20 << 20,
    "nondeterministic": 64 << 10,
    "roofline": 1 << 20,
    "profile": 24 << 20,  # at most 3 profiles (sandbox/capture/profile_capture.py), each under 8 MiB
    "passes": 16 << 20,  # one, in a passes request's run (sandbox/capture/pass_pipeline.py)
    "probe": 256 << 10,
}
MAX_EVENT_BYTES = 16 << 20
MAX_TOTAL_BYTES = 80 << 20
MAX_DEPTH = json_input.MAX_DEPTH - 1  # the worker protocol's frame holds each event one level down
EVENTS_PER_SECOND = 2000
EVENT_BURST = 10000


class EventRefused(ValueError):
    """An event line the worker will not pass on. ``reason`` is one of a few fixed phrases: the relay sends one
    notice per reason, so nothing the run chooses (a type's name, a size) may vary it; ``detail`` says more."""

    def __init__(self, reason: str, detail: str | None = None) -> None:
        super().__init__(f"{reason} ({detail})" if detail else reason)
        self.reason = reason
        self.detail = detail


def _no_constants(name: str) -> Any:
    raise EventRefused(f"non-finite number {name}")


def _problem(value: Any, limit: int) -> str | None:
    """What the server would refuse in ``value``: nesting deeper than ``limit``, or a non-finite number
    (``1e999`` parses as infinity without ever spelling it)."""
    stack = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, float) and not math.isfinite(item):
            return "an event with a non-finite number"
        if isinstance(item, dict | list):
            if depth > limit:
                return "an event nested too deeply"
            children = item.values() if isinstance(item, dict) else item
            stack.extend((child, depth + 1) for child in children if isinstance(child, dict | list | float))
    return None


class EventGate:
    """One run's budgets; ``admit`` turns a line into an event or raises EventRefused."""

    def __init__(self, allow_probe: bool = False) -> None:
        self.spent: dict[str, int] = {}
        self.total = 0
        self.allow_probe = allow_probe
        self.tokens = float(EVENT_BURST)
        self.refill_at = time.monotonic()

    def admit(self, line: bytes) -> dict[str, Any]:
        size = len(line)
        if size > MAX_EVENT_BYTES:
            raise EventRefused("an event over the size limit", f"{size} bytes; the limit is {MAX_EVENT_BYTES}")
        self._take_token()
        try:
            event = json.loads(line, parse_constant=_no_constants)
        except RecursionError:
            raise EventRefused("an event nested too deeply") from None
        except ValueError as exc:
            raise EventRefused("an unreadable event", str(exc)) from None
        if not isinstance(event, dict) or not isinstance(event.get("type"), str):
            raise EventRefused("an event without a type")
        kind = event["type"]
        budget = RUN_EVENT_BUDGETS.get(kind)
        if budget is None or (kind == "probe" and not self.allow_probe):
            raise EventRefused("an event of a type a run may not send", repr(kind[:40]))
        problem = _problem(event, MAX_DEPTH)
        if problem:
            raise EventRefused(problem)
        if self.spent.get(kind, 0) + size > budget or self.total + size > MAX_TOTAL_BYTES:
            raise EventRefused(f"more {kind!r} data than a run may send")
        self.spent[kind] = self.spent.get(kind, 0) + size
        self.total += size
        return event

    def _take_token(self) -> None:
        now = time.monotonic()
        self.tokens = min(EVENT_BURST, self.tokens + (now - self.refill_at) * EVENTS_PER_SECOND)
        self.refill_at = now
        if self.tokens < 1:
            raise EventRefused(f"more than {EVENTS_PER_SECOND} events a second")
        self.tokens -= 1
