"""JSON from outside (browsers, API clients, workers), parsed so that no input can raise past us.

``json.loads`` raises RecursionError on deep nesting (not ValueError, so it
escaped the handlers: a 500, or a dropped connection) and accepts NaN and
Infinity, which are not JSON. ``loads`` turns all of it into ValueError with
a message a person can act on, and bounds the nesting depth.
"""

from __future__ import annotations

import json
from typing import Any

MAX_DEPTH = 64


def _no_constants(name: str) -> Any:
    raise ValueError(f"{name} is not a JSON number")


def depth_within(value: Any, limit: int = MAX_DEPTH) -> bool:
    stack = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        if depth > limit:
            return False
        children = item.values() if isinstance(item, dict) else item
        stack.extend((child, depth + 1) for child in children if isinstance(child, dict | list))
    return True


def loads(text: str | bytes) -> Any:
    try:
        value = json.loads(text, parse_constant=_no_constants)
    except RecursionError:
        raise ValueError(f"nested deeper than {MAX_DEPTH} levels") from None
    if isinstance(value, dict | list) and not depth_within(value):
        raise ValueError(f"nested deeper than {MAX_DEPTH} levels")
    return value
