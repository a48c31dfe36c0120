"""One value as the page shows it (``Rendered``) and the ``display`` event that carries it.

The bottom of the display modules: display_render and display_figures make
``Rendered`` values and send them through ``emit``; display (the entry point
the runner and ``playground.display`` call) sits on top and imports both, so
nothing imports back up.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from jaxplay.sandbox.output import events


@dataclasses.dataclass(frozen=True)
class Rendered:
    mime: str
    data: str
    # Why the value is shown in a smaller form than asked, for the person.
    notice: str | None = None
    # Size in CSS pixels, for images.
    width: int | None = None
    height: int | None = None
    # The value as plain text, beside a richer form: what an exported notebook shows where HTML or
    # images are not (GitHub, nbviewer, an untrusted Jupyter), and what a screen reader can read.
    text: str | None = None


def emit(rendered: Rendered, role: str) -> None:
    event: dict[str, Any] = {"type": "display", "mime": rendered.mime, "data": rendered.data, "role": role}
    if rendered.notice:
        event["notice"] = rendered.notice
    if rendered.width is not None and rendered.height is not None:
        event["width"], event["height"] = rendered.width, rendered.height
    if rendered.text is not None and rendered.mime != "text/plain":
        event["text"] = rendered.text
    events.emit(event)
