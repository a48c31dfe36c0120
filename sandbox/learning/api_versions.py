"""Which JAX versions have a name a program used and this JAX lacks: the data behind "Run on JAX x.y".

An error event for a missing JAX name carries ``api`` (``jax.typeof``) and,
where known, ``api_versions``: ``{"removed_in": V}`` (the program needs a JAX
older than V; JAX's own removal message says which) or ``{"added_in": V}``
(the oldest JAX this project checked has it: its runtimes 0.4.38, 0.6.2 and
0.10.2 were asked, so a name marked 0.6.2 may be older, never newer). The
page offers an offered runtime that fits (frontend/src/runtimes/runtimes.ts).
"""

from __future__ import annotations

import re

# Names newer JAX has: the oldest checked version that has each.
ADDED_BY: dict[str, str] = {
    "jax.typeof": "0.6.2",
    "jax.shard_map": "0.6.2",
    "jax.sharding.AxisType": "0.6.2",
    "jax.sharding.use_mesh": "0.6.2",
    "jax.lax.pvary": "0.6.2",
    "jax.set_mesh": "0.10.2",
    "jax.sharding.reshard": "0.10.2",
    "jax.sharding.auto_axes": "0.10.2",
    "jax.enable_x64": "0.10.2",
}
# Names newer JAX removed, beyond those whose removal message names the version.
REMOVED_IN: dict[str, str] = {
    "jax.tree_map": "0.6.0",
    "jax.tree_leaves": "0.6.0",
    "jax.tree_flatten": "0.6.0",
    "jax.tree_unflatten": "0.6.0",
    "jax.tree_structure": "0.6.0",
    "jax.tree_transpose": "0.6.0",
    "jax.tree_reduce": "0.6.0",
    "jax.tree_all": "0.6.0",
}
_MISSING_ATTRIBUTE = re.compile(r"^module '(jax(?:\.[\w.]+)?)' has no attribute '(\w+)'")
_CANNOT_IMPORT = re.compile(r"^cannot import name '(\w+)' from '(jax(?:\.[\w.]+)?)'")
_REMOVED_MESSAGE = re.compile(r"^(jax\.[\w.]+) was removed in JAX v?(\d+\.\d+\.\d+)")
# An access JAX turned into an error after deprecating it: the name, without the version it went in.
_DEPRECATED_MESSAGE = re.compile(r"^(jax\.[\w.]+) (?:is deprecated|has been deprecated|has been removed)")


def missing_api(ename: str, message: str) -> tuple[str, dict[str, str]] | None:
    """(name, versions) for an error about a JAX name this JAX lacks; None for any other error."""
    if ename not in ("AttributeError", "ImportError"):
        return None
    removed = _REMOVED_MESSAGE.match(message)
    if removed:
        return removed.group(1), {"removed_in": removed.group(2)}
    found = _MISSING_ATTRIBUTE.match(message)
    name = f"{found.group(1)}.{found.group(2)}" if found else None
    if name is None and (deprecated := _DEPRECATED_MESSAGE.match(message)):
        name = deprecated.group(1)
    if name is None and (imported := _CANNOT_IMPORT.match(message)):
        name = f"{imported.group(2)}.{imported.group(1)}"
    if name is None:
        return None
    if name in REMOVED_IN:
        return name, {"removed_in": REMOVED_IN[name]}
    if name in ADDED_BY:
        return name, {"added_in": ADDED_BY[name]}
    return name, {}
