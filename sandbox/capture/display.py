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

from typing import Any

from jaxplay import worker_protocol as wp
from jaxplay.sandbox.capture import display_event, display_figures, display_render
from jaxplay.sandbox.capture.display_budget import Budget

MAX_DISPLAYS = 200
MAX_DISPLAY_BYTES = 16 * 1024 * 1024
# How long a display waits for the worker to read the output printed before it.

budget = Budget("displayed values", MAX_DISPLAYS, MAX_DISPLAY_BYTES)


def install(run: wp.SandboxRun) -> None:
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
        display_event.emit(rendered, role)

