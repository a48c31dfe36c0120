"""stdout and stderr that reach the page in the order they were written.

The two streams travel on separate pipes, and the worker reads whichever is
ready; a program that alternates ``print(...)`` and
``print(..., file=sys.stderr)`` could be shown out of order. So before a
write switches from one stream to the other, it waits (briefly) until the
worker has read what the previous stream left in its pipe: the relay then has
sent that text before the new stream's text can be in a pipe at all. A run
that writes to one stream only never waits.

Each wait lasts about as long as the worker takes to wake up and read (well
under a millisecond on an idle host, a few on a busy one), so a program that
switches streams thousands of times could be slowed a lot. Waits therefore
share a budget per run: once it is spent, the streams stop waiting (lines may
then arrive out of order across the two streams) and the page is told so once.
"""

from __future__ import annotations

import io
import threading
import time

from sandbox import events

#: An unread pipe after this long means the worker is stalled; order then gives way to progress.
SWITCH_WAIT_LIMIT_S = 0.2
#: Total waiting one run may spend keeping the order.
SWITCH_WAIT_BUDGET_S = 1.0
BUDGET_SPENT_NOTICE = (
    "This program switches between stdout and stderr so often that keeping their exact order would slow it "
    "down; from here on, lines of the two streams may appear slightly out of order."
)


class StreamSwitch:
    """Which fd was written last; a write to the other one waits for that pipe to be read."""

    def __init__(self) -> None:
        self.last_fd: int | None = None
        self._lock = threading.Lock()
        self._is_pipe: dict[int, bool] = {}
        self.waited_s = 0.0

    def before_write(self, fd: int) -> None:
        with self._lock:
            previous, self.last_fd = self.last_fd, fd
        if previous is None or previous == fd:
            return
        # Only a pipe has a reader to wait for (a terminal or file in development does not).
        if self.waited_s >= SWITCH_WAIT_BUDGET_S or not self._is_pipe.setdefault(previous, events.is_pipe(previous)):
            return
        start = time.monotonic()
        deadline = start + min(SWITCH_WAIT_LIMIT_S, SWITCH_WAIT_BUDGET_S - self.waited_s)
        pause = 0.0001
        while events.unread_bytes(previous) > 0 and time.monotonic() < deadline:
            time.sleep(pause)
            pause = min(pause * 2, 0.002)
        self.waited_s += time.monotonic() - start
        if self.waited_s >= SWITCH_WAIT_BUDGET_S:
            events.emit({"type": "notice", "level": "info", "message": BUDGET_SPENT_NOTICE})


class _OrderedFile(io.FileIO):
    def __init__(self, fd: int, switch: StreamSwitch) -> None:
        super().__init__(fd, "wb", closefd=True)
        self._switch = switch

    def write(self, data: bytes) -> int:  # type: ignore[override]
        self._switch.before_write(self.fileno())
        return super().write(data)


def ordered_text_streams(stdout_fd: int = 1, stderr_fd: int = 2) -> tuple[io.TextIOWrapper, io.TextIOWrapper]:
    """Line-buffered text streams over the two fds, kept in written order with each other."""
    switch = StreamSwitch()
    streams = []
    for fd in (stdout_fd, stderr_fd):
        raw = io.BufferedWriter(_OrderedFile(fd, switch))
        streams.append(io.TextIOWrapper(raw, encoding="utf-8", errors="backslashreplace", line_buffering=True))
    return streams[0], streams[1]
