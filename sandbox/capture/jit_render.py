"""The renderer thread: queued compilations become ``compiled`` events.

Printing a big module's MLIR and HLO and encoding megabytes of JSON takes
time, so the user's thread only queues the stages objects (fetched from
JAX's caches) and this daemon thread renders, runs the hooks and sends.
``drain`` sends everything still queued and stops the thread; the next
``submit`` starts a new one.
"""

from __future__ import annotations

import logging
import queue
import threading
from collections.abc import Callable
from typing import Any

from jaxplay.sandbox.capture import jaxpr_counts, jit_artifacts
from jaxplay.sandbox.output import events

Hook = Callable[[dict[str, Any], Any], None]

logger = logging.getLogger("jaxplay.sandbox.inspect")


def render(event: dict[str, Any], traced: Any, lowered: Any, compiled: Any, limit_bytes: int,
           hooks: list[Hook]) -> dict[str, Any]:
    """Fill the artifacts, cost, memory and equation counts, then let each hook add its fields."""
    errors: list[str] = []
    try:
        jit_artifacts.add_artifacts(event, traced, lowered, compiled, limit_bytes)
    except Exception as exc:
        errors.append(f"artifacts: {type(exc).__name__}: {exc}")
    getters = (("cost", jit_artifacts.cost_fields),
               ("memory", lambda compiled: jit_artifacts.memory_fields(compiled, lowered)))
    for field, getter in getters:
        try:
            event[field] = getter(compiled)
        except Exception as exc:  # e.g. NotImplementedError on some backends
            event[field] = None
            errors.append(f"{field}: {type(exc).__name__}: {exc}")
    try:
        event["eqn_counts"] = jaxpr_counts.eqn_counts(traced)
    except Exception as exc:
        event["eqn_counts"] = None
        errors.append(f"eqn_counts: {type(exc).__name__}: {exc}")
    for hook in list(hooks):
        try:
            hook(event, compiled)
        except Exception as exc:
            logger.debug("compiled hook %r failed", hook, exc_info=True)
            errors.append(f"hook {getattr(hook, '__qualname__', hook)!s}: {type(exc).__name__}: {exc}")
    if errors:
        event["capture_errors"] = errors
    return event


class Renderer:
    def __init__(self, hooks: list[Hook]) -> None:
        self.hooks = hooks
        self.limit_bytes = jit_artifacts.DEFAULT_ARTIFACT_LIMIT_BYTES
        self._queue: queue.Queue[tuple[Any, ...] | None] = queue.Queue()
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()

    def submit(self, event: dict[str, Any], traced: Any, lowered: Any, compiled: Any) -> None:
        with self._lock:
            if self._thread is None or not self._thread.is_alive():
                self._thread = threading.Thread(target=self._loop, name="jaxplay-inspect", daemon=True)
                self._thread.start()
        self._queue.put((event, traced, lowered, compiled))

    def drain(self) -> None:
        """Send everything queued, then stop the thread."""
        with self._lock:
            thread, self._thread = self._thread, None
        if thread is not None and thread.is_alive():
            self._queue.put(None)
            thread.join()

    def _loop(self) -> None:
        while True:
            item = self._queue.get()
            if item is None:
                return
            try:
                events.emit(render(*item, self.limit_bytes, self.hooks))
            except Exception:
                logger.debug("could not send a compiled event", exc_info=True)
