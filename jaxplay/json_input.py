"""JSON from outside (browsers, API clients, workers), parsed so that no input can raise past us.

``json.loads`` raises RecursionError on deep nesting (not ValueError, so it
escaped the handlers: a 500, or a dropped connection) and accepts NaN and
Infinity, which are not JSON. ``loads`` turns all of it into ValueError with
a message a person can act on, and bounds the nesting depth.
``top_level_strings`` reads a refused message's ``type`` and ``id`` all the
same, so that the reply can name what it refuses.
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


def top_level_strings(text: str, names: tuple[str, ...]) -> dict[str, str]:
    """The string values of ``names`` among a JSON object's top-level members, read from the start of
    ``text`` even when the whole of it is not JSON (a NaN, nesting too deep, a cut-off end): what a
    reply needs to name the message it refuses. Linear in the text; nested values are skipped unread.
    Reading stops at the first thing that is not a member; a name given twice counts as json.loads does."""
    found: dict[str, str] = {}
    at = _skip_space(text, 1 if text.startswith("\ufeff") else 0)  # a byte-order mark, as parsers may ignore it
    if not text.startswith("{", at):
        return found
    at += 1
    while True:
        at = _skip_space(text, at)
        if not text.startswith('"', at):
            return found
        try:
            name, at = json.decoder.scanstring(text, at + 1)
        except ValueError:
            return found
        at = _skip_space(text, at)
        if not text.startswith(":", at):
            return found
        at = _skip_space(text, at + 1)
        value: Any = None
        if text.startswith(("{", "["), at):
            at = _skip_container(text, at)
        else:
            try:
                value, at = _LENIENT.raw_decode(text, at)
            except ValueError:
                return found
        if at < 0:
            return found
        if name in names and isinstance(value, str):
            found[name] = value
        at = _skip_space(text, at)
        if not text.startswith(",", at):
            return found
        at += 1


_LENIENT = json.JSONDecoder(parse_constant=lambda name: None)  # only scalars reach it


def _skip_space(text: str, at: int) -> int:
    while at < len(text) and text[at] in " \t\n\r":
        at += 1
    return at


def _skip_container(text: str, at: int) -> int:
    """The index just past the object or array that starts at ``at``; -1 if it never closes."""
    depth, in_string, escaped = 0, False, False
    for index in range(at, len(text)):
        char = text[index]
        if in_string:
            if escaped:
                escaped = False
            elif char == "\\":
                escaped = True
            elif char == '"':
                in_string = False
        elif char == '"':
            in_string = True
        elif char in "[{":
            depth += 1
        elif char in "]}":
            depth -= 1
            if depth == 0:
                return index + 1
    return -1
