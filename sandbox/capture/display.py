"""Values shown in the Output, as a notebook shows them: one ``display`` event each.

Three sources, told apart by the event's ``role``:

- ``result``: the value of the program's final bare expression, which the
  runner passes to ``show_result`` (``None`` shows nothing, as in Python's REPL);
- ``display``: each value given to ``playground.display(...)``;
- ``figure``: matplotlib figures, from ``plt.show()`` or still open at the end
  (see display_figures).

A value becomes one event ``{"type": "display", "mime", "data", "role"}``
plus ``notice`` when it had to be shown in a smaller form and ``width`` /
``height`` (CSS pixels) for images. Rendering is bounded (display_render)
and so is the whole run: MAX_DISPLAYS values and MAX_DISPLAY_BYTES of data
besides figures. Printing is not touched: it stays plain text.
"""

from __future__ import annotations

import fcntl
import os
import stat
import struct
import sys
import termios
import time
from typing import Any

from sandbox import events
from sandbox.capture import display_figures, display_render
from sandbox.capture.display_budget import Budget
from sandbox.capture.display_render import Rendered

MAX_DISPLAYS = 200
MAX_DISPLAY_BYTES = 16 * 1024 * 1024
# How long a display waits for the worker to read the output printed before it.
OUTPUT_DRAIN_LIMIT_S = 0.2

budget = Budget("displayed values", MAX_DISPLAYS, MAX_DISPLAY_BYTES)


def install(options: dict[str, Any]) -> None:
    global budget
    budget = Budget("displayed values", MAX_DISPLAYS, MAX_DISPLAY_BYTES)
    display_figures.configure_matplotlib()


def finish() -> None:
    display_figures.finish()


def show_result(value: Any) -> None:
    if value is None:
        return
    show(value, "result")


def show(value: Any, role: str) -> None:
    """Render ``value`` within the bounds and send it."""
    if display_figures.is_figure(value):
        display_figures.send_figure(value, role)
        return
    if budget.exhausted():
        budget.refuse(0)
        return
    rendered = display_render.render(value)
    if budget.admit(len(rendered.data)):
        emit_rendered(rendered, role)


def emit_rendered(rendered: Rendered, role: str) -> None:
    # What was printed before this value must reach the page first.
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except Exception:
            pass
    wait_for_output_read()
    event: dict[str, Any] = {"type": "display", "mime": rendered.mime, "data": rendered.data, "role": role}
    if rendered.notice:
        event["notice"] = rendered.notice
    if rendered.width is not None and rendered.height is not None:
        event["width"], event["height"] = rendered.width, rendered.height
    events.emit(event)


def wait_for_output_read(limit_s: float = OUTPUT_DRAIN_LIMIT_S) -> None:
    """Wait (briefly) until the worker has read what is in the stdout/stderr pipes.

    Output and events travel on separate pipes, so the worker could otherwise
    read a display before the lines printed just ahead of it.
    """
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
