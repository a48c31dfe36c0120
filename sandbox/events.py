"""Events a run sends to its worker: JSON lines on a pipe of their own.

Runs inside the sandboxed child. Output (fds 1 and 2) travels on separate
pipes; this channel carries everything structured (errors, compiled
functions, sharding, displays, timings). ``emit`` is thread-safe because JAX
callbacks and user threads may report at once.
"""

from __future__ import annotations

import json
import os
import threading
from typing import Any

_lock = threading.Lock()
_fd: int | None = None


def open_channel(fd: int) -> None:
    global _fd
    _fd = fd


def emit(event: dict[str, Any]) -> None:
    """Send one event (a dict with 'type'); dropped if no channel is open."""
    if _fd is None:
        return
    line = (json.dumps(event, default=_fallback, separators=(",", ":")) + "\n").encode()
    with _lock:
        view = memoryview(line)
        while view:
            written = os.write(_fd, view)
            view = view[written:]


def _fallback(value: Any) -> Any:
    # numpy scalars, paths, dtypes: reported as text rather than failing the run.
    if hasattr(value, "item"):
        try:
            return value.item()
        except Exception:
            pass
    return str(value)
