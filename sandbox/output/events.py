"""Events a run sends to its worker: JSON lines on a pipe of their own.

Runs inside the sandboxed child. Output (fds 1 and 2) travels on separate
pipes; this channel carries everything structured (errors, compiled
functions, sharding, displays, timings). ``emit`` is thread-safe because JAX
callbacks and user threads may report at once.

Ordering: the worker reads the pipes independently, so before writing an
event ``emit`` flushes Python's streams and waits (briefly) until the worker
has read what is in the output pipes: what was printed before an event is
shown before it.
"""

from __future__ import annotations

import fcntl
import json
import os
import stat
import struct
import sys
import termios
import threading
import time
from typing import Any

_lock = threading.Lock()
_fd: int | None = None
OUTPUT_DRAIN_LIMIT_S = 0.2


def open_channel(fd: int) -> None:
    global _fd
    _fd = fd


def emit(event: dict[str, Any]) -> None:
    """Send one event (a dict with 'type'); dropped if no channel is open."""
    if _fd is None:
        return
    line = (json.dumps(event, default=_fallback, separators=(",", ":")) + "\n").encode()
    wait_for_output_read()
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


def wait_for_output_read(limit_s: float = OUTPUT_DRAIN_LIMIT_S) -> None:
    """Flush stdout/stderr, then wait until the worker has read what is in their pipes."""
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except Exception:
            pass
    pipes = [fd for fd in (1, 2) if is_pipe(fd)]
    deadline = time.monotonic() + limit_s
    pause = 0.0002
    while pipes and time.monotonic() < deadline:
        pipes = [fd for fd in pipes if unread_bytes(fd) > 0]
        if pipes:
            time.sleep(pause)
            pause = min(pause * 2, 0.005)


def is_pipe(fd: int) -> bool:
    try:
        return stat.S_ISFIFO(os.fstat(fd).st_mode)
    except OSError:
        return False


def unread_bytes(fd: int) -> int:
    try:
        return struct.unpack("i", fcntl.ioctl(fd, termios.FIONREAD, b"\0\0\0\0"))[0]
    except OSError:
        return 0
