"""What JAX reports while one top-level jitted call runs: its phases, cache hits and cache-miss
explanations, gathered in a per-thread *call frame* (``jit_capture`` pushes one around each call).

JAX reports through ``jax.monitoring`` (durations of tracing, lowering and XLA's compile; a
persistent-cache hit), through the lowered-module cache (sandbox/caches/lowered_modules.py: a module
loaded, not lowered), and through its loggers (``jax_explain_cache_misses``, whose records are taken
off the ``jax`` loggers for the frame instead of reaching stderr).
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from jaxplay.sandbox.output import events

if TYPE_CHECKING:
    from jaxplay.sandbox.capture.jit_functions import FunctionRecord

PHASE_EVENTS = {
    "/jax/core/compile/jaxpr_trace_duration": "trace",
    "/jax/core/compile/jaxpr_to_mlir_module_duration": "lower",
    "/jax/core/compile/backend_compile_duration": "compile",
}
PERSISTENT_CACHE_HIT_EVENT = "/jax/compilation_cache/cache_hits"
# Records jax logs at WARNING only because we turned on jax_explain_cache_misses.
EXPLAIN_LOGGERS = ("jax._src.interpreters.partial_eval", "jax._src.compiler", "jax._src.compilation_cache",
                   "jax._src.pjit")  # the last: where JAX before 0.5 explains tracing misses
EXPLAIN_PREFIXES = ("TRACING CACHE MISS", "PERSISTENT COMPILATION CACHE MISS", "Not writing persistent cache entry")

_local = threading.local()


class CallFrame:
    """What JAX reported while one top-level jitted call ran on this thread."""

    __slots__ = ("phases_ms", "explanations", "persistent_cache_hit", "lowered_module_cached", "record",
                 "compiling_sent")

    def __init__(self, record: FunctionRecord | None = None) -> None:
        self.phases_ms: dict[str, float] = {}
        self.explanations: list[str] = []
        self.persistent_cache_hit = False
        self.lowered_module_cached = False
        self.record = record
        self.compiling_sent = False


def stack() -> list[CallFrame]:
    """This thread's frames, innermost last."""
    frames = getattr(_local, "frames", None)
    if frames is None:
        frames = _local.frames = []
    return frames


def on_duration(event: str, duration_s: float, **_: Any) -> None:
    phase = PHASE_EVENTS.get(event)
    if phase is None:
        return
    frames = getattr(_local, "frames", None)
    if frames:
        frame = frames[-1]
        frame.phases_ms[phase] = frame.phases_ms.get(phase, 0.0) + duration_s * 1e3
        if phase == "trace" and not frame.compiling_sent:
            announce_compiling(frame)


def announce_compiling(frame: CallFrame) -> None:
    """Traced: lowering and XLA's compile come next, and may take seconds. The page says so meanwhile."""
    frame.compiling_sent = True
    record = frame.record
    if record is None:
        return
    events.emit({"type": "compiling", "fn_id": record.fn_id, "fn": record.fn, "line": record.line,
                 "compile_index": len(record.compiles) + 1})


def on_event(event: str, **_: Any) -> None:
    if event == PERSISTENT_CACHE_HIT_EVENT:
        frames = getattr(_local, "frames", None)
        if frames:
            frames[-1].persistent_cache_hit = True


def on_lowered_module_cached() -> None:
    """The module came from the lowered-module cache (sandbox/caches/lowered_modules.py): nothing lowered."""
    frames = getattr(_local, "frames", None)
    if frames:
        frames[-1].lowered_module_cached = True


def capturing_a_call() -> bool:
    return bool(getattr(_local, "frames", None))


class ExplainFilter(logging.Filter):
    """Keeps JAX's cache-miss explanations for the frame, off stderr."""

    def __init__(self, capturing: Callable[[], bool]) -> None:
        super().__init__()
        self.capturing = capturing

    def filter(self, record: logging.LogRecord) -> bool:
        if not self.capturing() or not isinstance(record.msg, str) or not record.msg.startswith(EXPLAIN_PREFIXES):
            return True
        frames = getattr(_local, "frames", None)
        if frames and record.msg.startswith("TRACING CACHE MISS"):
            frames[-1].explanations.append(record.getMessage())
        return False


def explanation_of(explanations: list[str], name: str | None) -> str | None:
    """This function's own cache-miss explanation among those logged in its call.

    JAX explains a miss when it happens, outermost first; functions traced
    inside (loop bodies, branches) log theirs after it.
    """
    if not explanations:
        return None
    if name:
        for text in explanations:
            if f"\n    {name} id=" in text or f"  for {name} defined at" in text:
                return text
    return explanations[0]
