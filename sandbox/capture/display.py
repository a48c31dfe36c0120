"""Values shown as results: the last expression of the program.

``show_result`` is called by the runner with the value of a final bare
expression (as a notebook cell does); ``None`` shows nothing.
"""

from __future__ import annotations

from typing import Any

from sandbox import events

MAX_REPR_CHARS = 100_000


def install(options: dict[str, Any]) -> None:
    pass


def finish() -> None:
    pass


def show_result(value: Any) -> None:
    if value is None:
        return
    text = repr(value)
    if len(text) > MAX_REPR_CHARS:
        text = text[:MAX_REPR_CHARS] + f"\n... [truncated: {len(text)} characters in all]"
    events.emit({"type": "display", "mime": "text/plain", "data": text, "role": "result"})
