"""A lowered-module entry's format: its name, its header, and what JAX's lowering returns besides the module.

An entry is one file, ``<module>-<key>-lowered``::

    jaxplay-lowered 1\n
    {"key": ..., "result": <layout>, "sizes": [module, key bytes without locations, with]}\n
    <the module as MLIR bytecode><the bytes JAX hashed for it, without locations><with>

Reading one trusts nothing in it: a file of another key, of sizes that do not add up,
or of a layout this version does not know is refused (``ValueError``), and the run
lowers as usual (``lowered_modules``).
"""

from __future__ import annotations

import json
import re
from typing import Any

ENTRY_SUFFIX = "-lowered"
MAGIC = b"jaxplay-lowered 1\n"
MLIR_BYTECODE = b"ML\xefR"  # how every module JAX serializes starts
MAX_HEADER_BYTES = 4096
MAX_ENTRY_BYTES = 64 << 20
UNSAFE_NAME = re.compile(r"[^A-Za-z0-9_.\-]")


def entry_name(module_name: str, key: str) -> str:
    return f"{UNSAFE_NAME.sub('_', module_name)[:80]}-{key}{ENTRY_SUFFIX}"


def encode(key: str, layout: list[Any], module_bytes: bytes, key_bytes: dict[bool, bytes]) -> bytes:
    parts = [key_bytes.get(False, b""), key_bytes.get(True, b"")]
    header = json.dumps({"key": key, "result": layout, "sizes": [len(module_bytes), *map(len, parts)]}).encode()
    return b"".join([MAGIC, header, b"\n", module_bytes, *parts])


def parse(data: bytes, key: str) -> tuple[dict[str, Any], bytes, dict[bool, bytes]]:
    if len(data) > MAX_ENTRY_BYTES or not data.startswith(MAGIC):
        raise ValueError("not an entry")
    end = data.find(b"\n", len(MAGIC), len(MAGIC) + MAX_HEADER_BYTES)
    if end < 0:
        raise ValueError("no header")
    header = json.loads(data[len(MAGIC):end])
    if not isinstance(header, dict) or header.get("key") != key or not isinstance(header.get("result"), list):
        raise ValueError("another key")
    sizes = header.get("sizes")
    if not isinstance(sizes, list) or not all(type(n) is int and n >= 0 for n in sizes) or len(sizes) != 3:
        raise ValueError("bad sizes")
    module_size, without_locations, with_locations = sizes
    body = data[end + 1:]
    if len(body) != module_size + without_locations + with_locations or module_size == 0:
        raise ValueError("truncated")
    module_bytes = body[:module_size]
    key_bytes: dict[bool, bytes] = {}
    if without_locations:
        key_bytes[False] = body[module_size:module_size + without_locations]
    if with_locations:
        key_bytes[True] = body[module_size + without_locations:]
    return header, module_bytes, key_bytes


# --- what the lowering returns besides the module --------------------------------
# JAX versions return (module, keepalive, host_callbacks, unordered_effects, ordered_effects, [nreps,]
# tuple_args, shape_poly_state). An entry records the rest by kind, and only when it is empty or plain.

def layout(result: tuple[Any, ...]) -> list[Any] | None:
    """What ``result`` holds besides the module, by kind; None when it holds more than plain values."""
    kinds: list[Any] = []
    for item in result[1:]:
        if isinstance(item, bool):
            kinds.append(["bool", item])
        elif isinstance(item, int):
            kinds.append(["int", item])
        elif item is None:
            kinds.append(["none"])
        elif isinstance(item, (list, tuple)) and not item:
            kinds.append([type(item).__name__])
        elif type(item).__name__ == "ShapePolyLoweringState":
            if item.uses_dim_vars or getattr(item, "has_platform_index_argument", False) or item.dim_vars:
                return None
            kinds.append(["shape_poly"])
        else:
            return None  # host callbacks, kept-alive objects, effects: lowered every time
    return kinds


def rebuild(kinds: list[Any]) -> list[Any] | None:
    """The rest of the lowering's result from its ``layout``; None for one this version does not know."""
    from jax._src.interpreters import mlir

    items: list[Any] = []
    for entry in kinds:
        kind = entry[0] if isinstance(entry, list) and entry else None
        if kind == "bool" and len(entry) == 2 and isinstance(entry[1], bool):
            items.append(entry[1])
        elif kind == "int" and len(entry) == 2 and type(entry[1]) is int:
            items.append(entry[1])
        elif kind == "none":
            items.append(None)
        elif kind in ("list", "tuple"):
            items.append([] if kind == "list" else ())
        elif kind == "shape_poly":  # none of its dimension variables, no platform index: one platform
            items.append(mlir.ShapePolyLoweringState((), None))
        else:
            return None
    return items
