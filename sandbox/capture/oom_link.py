"""Which jitted function an out-of-memory error came from, with its peak: what the error event links to.

XLA runs out of memory in one of three places, and each is caught where it shows:

- while compiling (an accelerator's compiler reports the memory it would
  need): the call itself raises, before there is anything to show;
- while allocating for the call, synchronously: the call raises;
- while running, asynchronously: the call returns, and the error is raised
  when the program reads the result (``print``, ``block_until_ready``), far
  from the call. The ready watcher (jit_ready) waits on every result the
  capture times and sees the same failure; its text names the same
  allocation, so the program's error is matched to the call by its text.

A failure names the compilation by its key; the key's peak comes from the
memory view the renderer built for it (``note_peak``, a compiled hook).
Threads: the user's thread and the watcher add failures, the renderer adds
peaks, the runner reads; one lock guards them.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Literal

from jaxplay.sandbox.learning import oom_message

MAX_FAILURES = 64
MAX_CAUSE_DEPTH = 8


@dataclass
class Failure:
    fn: str
    line: int | None
    phase: Literal["compile", "execute"]
    # The compilation's key; for a call that compiled, set once its compiled event is queued.
    key: dict[str, str | None] = field(default_factory=lambda: {"key": None})


_lock = threading.Lock()
_raised: list[tuple[BaseException, Failure]] = []
_by_text: list[tuple[str, Failure]] = []
_peaks: dict[str, tuple[int, str | None]] = {}


def clear() -> None:
    with _lock:
        _raised.clear()
        _by_text.clear()
        _peaks.clear()


def is_out_of_memory(exc: BaseException) -> bool:
    return oom_message.is_out_of_memory(exc, str(exc))


def call_raised(exc: BaseException, failure: Failure) -> None:
    """The jitted call raised ``exc`` (an out-of-memory error)."""
    with _lock:
        if len(_raised) < MAX_FAILURES:
            _raised.append((exc, failure))


def result_failed(exc: BaseException, failure: Failure) -> None:
    """In the ready watcher: a call's result could not be computed."""
    if not is_out_of_memory(exc):
        return
    with _lock:
        if len(_by_text) < MAX_FAILURES:
            _by_text.append((str(exc), failure))


def note_peak(event: dict[str, Any], compiled: Any) -> None:
    """A compiled hook, after the memory view's: remember each compilation's peak for its errors."""
    view = event.get("memory_view")
    if not view:
        return
    peak = view["peak"]
    index = peak.get("instruction")
    instruction = view["instructions"][index][0] if index is not None else None
    with _lock:
        _peaks[event["key"]] = (peak["bytes"], instruction)


def _failure_of(exc: BaseException) -> Failure | None:
    seen: BaseException | None = exc
    for _ in range(MAX_CAUSE_DEPTH):
        if seen is None:
            return None
        text = str(seen)
        with _lock:
            for raised, failure in reversed(_raised):
                if raised is seen:
                    return failure
            for failed_text, failure in reversed(_by_text):
                if failed_text == text:
                    return failure
        seen = seen.__cause__ or seen.__context__
    return None


def link_of(exc: BaseException, settle: Callable[[], None]) -> dict[str, Any] | None:
    """The error event's ``out_of_memory`` for ``exc``, or None when no jitted call of ours raised it.

    ``settle`` lets the watcher and the renderer finish what they hold, so an asynchronous failure and
    the failed compilation's memory view are both known."""
    settle()
    failure = _failure_of(exc)
    if failure is None:
        return None
    key = failure.key["key"]
    with _lock:
        peak = _peaks.get(key) if key is not None else None
    return {"fn": failure.fn, "line": failure.line, "phase": failure.phase, "key": key,
            "peak_bytes": peak[0] if peak else None, "instruction": peak[1] if peak else None}
