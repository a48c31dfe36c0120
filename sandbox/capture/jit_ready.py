"""Timing jitted calls without changing what the program measures.

JAX dispatches asynchronously: a call returns before its result is computed,
and tutorials time exactly that (with and without ``block_until_ready``).
Blocking in the user's thread to time each call would change it. Instead the
call's start time and outputs go to one daemon *watcher* thread, which waits
for each result in call order and records when it was ready: the time from
dispatch to ready. The user's thread pays an append to a queue.
"""

from __future__ import annotations

import queue
import threading
import time
from collections.abc import Callable
from typing import Any

Record = Callable[[float], None]
Failed = Callable[[BaseException], None]


def _block_until_ready(out: Any) -> None:
    method = getattr(out, "block_until_ready", None)
    if method is not None:
        method()
    else:
        import jax

        jax.block_until_ready(out)


class ReadyWatcher:
    def __init__(self) -> None:
        self._queue: queue.SimpleQueue[tuple[Record, float, Any, Failed | None] | threading.Event] = queue.SimpleQueue()
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()

    def watch(self, record: Record, start: float, out: Any, failed: Failed | None = None) -> None:
        """Call ``record(seconds)`` once ``out`` is ready (in the watcher thread); ``failed(exc)`` first if
        computing it raised."""
        if self._thread is None:
            with self._lock:
                if self._thread is None:
                    self._thread = threading.Thread(target=self._loop, name="jaxplay-ready-watcher", daemon=True)
                    self._thread.start()
        self._queue.put((record, start, out, failed))

    def _loop(self) -> None:
        while True:
            item = self._queue.get()
            if isinstance(item, threading.Event):
                item.set()
                continue
            record, start, out, failed = item
            try:
                _block_until_ready(out)
            except Exception as exc:  # noqa: BLE001 - the user's own code sees the error where it uses the value
                if failed is not None:
                    try:
                        failed(exc)
                    except Exception:  # noqa: BLE001 - noting a failure must not stop the watcher
                        pass
            record(time.perf_counter() - start)
            del item, out

    def drain(self, timeout_s: float) -> None:
        """Wait until every result watched so far has been recorded (at the end of the run)."""
        if self._thread is None:
            return
        done = threading.Event()
        self._queue.put(done)
        done.wait(timeout_s)
