"""Shardings and collectives of a compiled function, added to its ``compiled`` event.

``add_sharding_fields(event, compiled)`` is registered in
``jit_capture.COMPILED_HOOKS``: it adds ``in_shardings`` and ``out_shardings``
(one layout per array argument/result, as in ``sharding`` events) and
``collectives`` (how many of each collective XLA put in the optimized HLO).
Counting reads the HLO text because that is what runs: the collectives exist
only after XLA's SPMD partitioner, never in the jaxpr or StableHLO.
"""

from __future__ import annotations

import logging
import re
from collections import Counter
from typing import Any

from jax import tree_util

from jaxplay.sandbox.capture import jax_compat
from jaxplay.sandbox.capture.sharding_layout import describe_layout

log = logging.getLogger("jaxplay.sandbox.sharding")

COLLECTIVE_OPS = ("all-reduce", "all-gather", "reduce-scatter", "all-to-all", "collective-permute")
# A model with hundreds of parameters would make a huge event; the panel shows the first ones.
MAX_LAYOUTS_PER_SIDE = 64

# Rarer collectives XLA may emit; counted too so the table never hides one.
EXTRA_COLLECTIVE_OPS = ("ragged-all-to-all", "collective-broadcast")

_COLLECTIVES = frozenset(COLLECTIVE_OPS + EXTRA_COLLECTIVE_OPS)
# An instruction's opcode is the first word glued to "(" after its result shape:
# "%x = (f32[4]{0}, f32[]) all-reduce(%a, %b), ..., metadata={op_name=\"jit(f)/all-gather\"}".
# Only that first word counts, so operand names and metadata never do.
_OPCODE = re.compile(r"\s([a-z][a-z0-9-]*)\(")


def count_collectives(hlo_text: str) -> dict[str, int]:
    """Occurrences of each collective op in optimized HLO text; the five main ones always present."""
    counts: Counter[str] = Counter({op: 0 for op in COLLECTIVE_OPS})
    for line in hlo_text.splitlines():
        _, sep, rhs = line.partition(" = ")
        if not sep:
            continue
        match = _OPCODE.search(" " + rhs)
        if match is None:
            continue
        opcode = match.group(1)
        # Async pairs count once, at "-start".
        opcode = opcode.removesuffix("-start")
        if opcode in _COLLECTIVES:
            counts[opcode] += 1
    return dict(counts)


def leaf_name(path: tuple[Any, ...], root: str) -> str:
    """'arg0', "arg0['w']", 'scale', 'out[1]' from a pytree key path."""
    return root + tree_util.keystr(path) if path else root


def input_layouts(compiled: Any, positional_names: list[str]) -> list[dict[str, Any]]:
    """One layout per array leaf of the arguments, named like ``params['w']``."""
    shardings, _ = tree_util.tree_flatten(compiled.input_shardings, is_leaf=lambda x: x is None)
    leaves, _ = tree_util.tree_flatten_with_path(compiled.args_info)
    if len(leaves) != len(shardings):
        log.debug("input shardings (%d) do not match arguments (%d)", len(shardings), len(leaves))
        return []
    out = []
    for (path, info), sharding in zip(leaves, shardings, strict=True):
        if sharding is None or not hasattr(info, "shape"):
            continue
        # args_info is (positional, keyword): path[0] picks one, path[1] the argument.
        if len(path) >= 2 and getattr(path[0], "idx", None) == 0:
            index = path[1].idx
            root = positional_names[index] if index < len(positional_names) else f"arg{index}"
        elif len(path) >= 2:
            root = str(getattr(path[1], "key", path[1]))
        else:
            root = "args"
        entry = {"name": leaf_name(path[2:], root), **describe_layout(info.shape, info.dtype, sharding)}
        entry["donated"] = bool(getattr(info, "donated", False))
        out.append(entry)
    return out


def dynamic_argument_names(event: dict[str, Any]) -> list[str]:
    """Names of the traced arguments, in order: jit_capture's ``arguments`` minus static ones.

    ``args_info`` leaves static arguments out, so its n-th positional argument
    is the n-th non-static one here.
    """
    arguments = event.get("arguments")
    if not isinstance(arguments, list):
        return []
    return [str(a.get("name")) for a in arguments if isinstance(a, dict) and "static" not in a]


def output_layouts(compiled: Any) -> list[dict[str, Any]]:
    leaves, _ = tree_util.tree_flatten_with_path(jax_compat.compiled_out_info(compiled))
    out = []
    for path, info in leaves:
        sharding = getattr(info, "sharding", None)
        sharding = getattr(sharding, "sharding", sharding)  # a Format wraps the sharding
        if sharding is None:
            continue
        out.append({"name": leaf_name(path, "out"), **describe_layout(info.shape, info.dtype, sharding)})
    return out


def device_count(layouts: list[dict[str, Any]]) -> int:
    return len({d for layout in layouts for d in layout["devices"]})


def add_sharding_fields(event: dict[str, Any], compiled: Any) -> None:
    """The COMPILED_HOOKS entry: fills ``in_shardings``, ``out_shardings``, ``collectives``, ``num_devices``."""
    hlo = event.get("hlo")
    truncated = event.get("truncated")
    if not isinstance(hlo, str) or (isinstance(truncated, dict) and "hlo" in truncated):
        hlo = compiled.as_text()  # the shown text was cut: count over the whole program
    event["collectives"] = count_collectives(hlo or "")
    try:
        ins, outs = input_layouts(compiled, dynamic_argument_names(event)), output_layouts(compiled)
    except Exception:
        # A backend without sharding information: the collectives still stand.
        log.debug("no sharding information for %s", event.get("fn"), exc_info=True)
        return
    event["num_devices"] = device_count(ins + outs)
    for key, layouts in (("in_shardings", ins), ("out_shardings", outs)):
        event[key] = layouts[:MAX_LAYOUTS_PER_SIDE]
        if len(layouts) > MAX_LAYOUTS_PER_SIDE:
            event[key + "_omitted"] = len(layouts) - MAX_LAYOUTS_PER_SIDE
