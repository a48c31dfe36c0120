"""Turn one compilation's stages objects into the fields of a ``compiled`` event.

Everything here is pure formatting of what JAX already computed: the
``Traced``/``Lowered``/``Compiled`` objects come out of JAX's caches after the
user's own call (see jit_capture), so nothing is traced or compiled again.
The artifact texts are exactly what the stages API prints
(``jaxpr.pretty_print(source_info=True, width=JAXPR_WIDTH)``,
``lowered.as_text()``, ``compiled.as_text()``), cut at a byte limit when
they are larger, with the cut reported in ``truncated``.
"""

from __future__ import annotations

import inspect
import math
import re
from collections.abc import Sequence
from typing import Any

from jaxplay.sandbox.capture import buffer_proto, jax_compat, jit_source_map

# Narrow enough that every equation starts its own line (so each can point at
# its source line), wide enough that short equations stay on one line.
JAXPR_WIDTH = 40
DEFAULT_ARTIFACT_LIMIT_BYTES = 2 * 1024 * 1024
MAX_STATIC_REPR_CHARS = 200
MAX_TYPE_TEXT_CHARS = 1000
MEMORY_FIELDS = (
    "argument_size_in_bytes",
    "output_size_in_bytes",
    "alias_size_in_bytes",
    "temp_size_in_bytes",
    "generated_code_size_in_bytes",
    "peak_memory_in_bytes",
    "host_argument_size_in_bytes",
    "host_output_size_in_bytes",
    "host_alias_size_in_bytes",
    "host_temp_size_in_bytes",
    "host_generated_code_size_in_bytes",
)


class _Shown:
    """A pytree leaf replaced by its type text, so containers repr as types."""

    __slots__ = ("text",)

    def __init__(self, text: str) -> None:
        self.text = text

    def __repr__(self) -> str:
        return self.text


def short(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


def aval_text(value: Any) -> str:

    try:
        aval = jax_compat.typeof(value)
    except TypeError:
        return type(value).__name__
    text = aval.str_short(short_dtypes=True) if hasattr(aval, "str_short") else str(aval)
    if getattr(aval, "weak_type", False):
        text += " weak"
    return text


def tree_type_text(value: Any) -> str:
    import jax

    try:
        shown = jax.tree.map(lambda leaf: _Shown(aval_text(leaf)), value)
    except Exception:
        return type(value).__name__
    return short(repr(shown), MAX_TYPE_TEXT_CHARS)


def positional_names(fun: Any) -> tuple[list[str], str | None]:
    """Names of the positional parameters, and of ``*args`` if any."""
    try:
        parameters = inspect.signature(fun).parameters.values()
    except (TypeError, ValueError):
        return [], None
    names = [p.name for p in parameters if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    star = next((p.name for p in parameters if p.kind == p.VAR_POSITIONAL), None)
    return names, star


def describe_arguments(
    names: tuple[list[str], str | None], jit_info: Any, args: tuple[Any, ...], kwargs: dict[str, Any]
) -> list[dict[str, str]]:
    """One entry per argument: ``{"name", "type"}`` or ``{"name", "static"}``."""
    positional, star = names
    static_nums = set(getattr(jit_info, "static_argnums", ()) or ())
    static_names = set(getattr(jit_info, "static_argnames", ()) or ())
    described: list[dict[str, str]] = []

    def add(name: str, value: Any, static: bool) -> None:
        if static:
            described.append({"name": name, "static": short(repr(value), MAX_STATIC_REPR_CHARS)})
        else:
            described.append({"name": name, "type": tree_type_text(value)})

    for index, value in enumerate(args):
        if index < len(positional):
            name = positional[index]
        else:
            name = f"{star or 'args'}[{index - len(positional)}]"
        add(name, value, index in static_nums or name in static_names)
    for name, value in kwargs.items():
        add(name, value, name in static_names)
    return described


def signature_text(arguments: list[dict[str, str]]) -> str:
    parts = [f"{a['name']}={a['static']}" if "static" in a else f"{a['name']}: {a['type']}" for a in arguments]
    return ", ".join(parts)


def outputs_text(traced: Any) -> str | None:
    try:
        return avals_text(jax_compat.out_avals(traced))
    except Exception:
        return None


def avals_text(avals: Any) -> str:
    """A pytree of abstract values as types: ``(f32[3], {'a': i32[]})``."""
    import jax

    shown = jax.tree.map(lambda aval: _Shown(aval.str_short(short_dtypes=True)), avals)
    return short(repr(shown), MAX_TYPE_TEXT_CHARS)


_STATIC_DIFF = re.compile(
    r"\* at input path (\S+), now <class 'jax\._src\.tree_util\.Static'> with pytree metadata "
    r"Static\(val=(.*)\) and before <class 'jax\._src\.tree_util\.Static'> with pytree metadata "
    r"Static\(val=(.*)\), so the pytree node metadata does not match"
)
_WEAK_TYPE_URL = "https://docs.jax.dev/en/latest/type_promotion.html#weak-types"


def _argument_name(path: str, positional: Sequence[str]) -> str:
    """JAX's input path ``[0][i]`` (positional) or ``[1]['name']`` as a parameter name."""
    if (match := re.fullmatch(r"\[0\]\[(\d+)\]", path)) and int(match.group(1)) < len(positional):
        return positional[int(match.group(1))]
    if match := re.fullmatch(r"\[1\]\[['\"](.+)['\"]\]", path):
        return match.group(1)
    return path


def clean_cache_miss_reason(message: str, first_compile: bool, positional: Sequence[str] = (),
                            transformed: str | None = None) -> str | None:
    """JAX's explanation without its header lines, in JAX's own words.

    Returns None for the first compilation of a function unless JAX points
    out that the function object is being re-created (then that is the news).
    ``transformed``: the name of a function a JAX transformation made (``grad(layer)``). Each
    ``jax.grad(layer)`` makes a new function object, always defined on the same line of JAX's
    own source, so JAX's hints about closures and lambdas defined repeatedly are not about it.
    """
    lines = message.splitlines()
    if lines and lines[0].startswith("TRACING CACHE MISS"):
        lines = lines[1:]
    body = "\n".join(lines)
    if "never seen function" in body and transformed is not None:
        if first_compile:
            return None
        transform = transformed.partition("(")[0]
        return (f"JAX has not seen this function object before: each jax.{transform}(...) call makes a new "
                f"function object, and JAX's caches are keyed on the function object. Make {transformed} once "
                "(e.g. step = jax.jit(...) outside the loop) and call that.")
    if "never seen function" in body:
        if "re-defined repeatedly" in body:
            return ("JAX has not seen this function object before, but has seen another function defined on "
                    "the same line: it may be re-defined repeatedly (e.g. a lambda or closure created in a "
                    "loop), which prevents caching.")
        if first_compile:
            return None
        return ("JAX has not seen this function object before: it is a new function object for the same code "
                "(e.g. a re-created closure or lambda), and JAX's caches are keyed on the function object.")
    kept = [
        line for line in lines
        if not line.strip().startswith("for ") or " defined at " not in line
    ]
    kept = [line for line in kept if "all previously seen cache keys differ" not in line]
    text = "\n".join(line[2:] if line.startswith("  ") else line for line in kept).strip()
    text = _STATIC_DIFF.sub(
        lambda m: f"* static argument {_argument_name(m.group(1), positional)}: "
        f"now {m.group(2)} and before {m.group(3)}",
        text,
    )
    text = text.replace("({})", "").replace(_WEAK_TYPE_URL, "\n(" + _WEAK_TYPE_URL + ")")
    return text or None


def signature_difference(now: list[dict[str, str]], before: list[dict[str, str]]) -> str:
    """Our own account when JAX logged none (e.g. it was not a tracing miss)."""
    diffs: list[str] = []
    before_by_name = {a["name"]: a for a in before}
    for arg in now:
        old = before_by_name.get(arg["name"])
        if old is None:
            diffs.append(f"* new argument {arg['name']}")
        elif arg != old:
            new_text, old_text = arg.get("type", arg.get("static")), old.get("type", old.get("static"))
            kind = "static argument" if "static" in arg else "at"
            diffs.append(f"* {kind} {arg['name']}, now {new_text} and before {old_text}")
    for name in before_by_name.keys() - {a["name"] for a in now}:
        diffs.append(f"* argument {name} no longer passed")
    if diffs:
        return "different input types or static arguments:\n" + "\n".join(diffs)
    return ("same argument types as the previous compilation: JAX compiled again because the arguments' "
            "placement (device, sharding, committedness) or the tracing context changed, or its cache evicted "
            "the earlier executable.")


def truncate(text: str, limit_bytes: int) -> tuple[str, int | None]:
    """Cut at a line boundary under the limit; also return the full size if cut."""
    data = text.encode("utf-8")
    if len(data) <= limit_bytes:
        return text, None
    head = data[:limit_bytes].decode("utf-8", errors="ignore")
    cut = head.rfind("\n")
    return (head[: cut + 1] if cut > 0 else head), len(data)


def _finite(value: Any) -> Any:
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return value


def cost_fields(compiled: Any) -> dict[str, Any] | None:
    """``compiled.cost_analysis()`` as JSON: every key JAX returns, unchanged."""
    cost = compiled.cost_analysis()
    if isinstance(cost, list | tuple):  # older jaxlibs: one dict per device program
        cost = cost[0] if cost else None
    if not cost:
        return None
    return {str(key): _finite(float(value)) if isinstance(value, int | float) else str(value) for key, value in cost.items()}


def memory_fields(compiled: Any, lowered: Any = None) -> dict[str, int] | None:
    """``compiled.memory_analysis()`` as JSON, as the program's own compile reported it (``lowered``: the
    compilation's, to compile it again where this JAX's persistent cache loses the donated aliases)."""
    stats = buffer_proto.memory_stats(compiled)  # kept for the memory view, which reads it too
    if stats is None:
        return None
    fields = {name: int(getattr(stats, name)) for name in MEMORY_FIELDS if hasattr(stats, name)}
    if lowered is not None and fields.get("alias_size_in_bytes") == 0 and jax_compat.donates(lowered):
        again = jax_compat.memory_analysis_as_compiled(lowered)
        if again is not None:
            fields = {name: int(getattr(again, name)) for name in MEMORY_FIELDS if hasattr(again, name)}
    return fields


def artifact_texts(traced: Any, lowered: Any, compiled: Any) -> dict[str, tuple[str, jit_source_map.LineRanges]]:
    """The three texts with their source-line ranges, before any cutting."""
    jaxpr = traced.jaxpr.pretty_print(source_info=True, width=JAXPR_WIDTH)
    stablehlo = lowered.as_text()
    located = jax_compat.stablehlo_with_locations(lowered)
    stablehlo_ranges = jit_source_map.stablehlo_line_ranges(stablehlo, located) if located else []
    hlo = compiled.as_text()
    return {
        "jaxpr": (jaxpr, jit_source_map.jaxpr_line_ranges(jaxpr)),
        "stablehlo": (stablehlo, stablehlo_ranges),
        "hlo": (hlo, jit_source_map.hlo_line_ranges(hlo)),
    }


def add_artifacts(event: dict[str, Any], traced: Any, lowered: Any, compiled: Any, limit_bytes: int) -> None:
    """Fill jaxpr/stablehlo/hlo, their ``source_lines`` and ``truncated``."""
    truncated: dict[str, int] = {}
    source_lines: dict[str, jit_source_map.LineRanges] = {}
    for name, (text, ranges) in artifact_texts(traced, lowered, compiled).items():
        shown, full_size = truncate(text, limit_bytes)
        if full_size is not None:
            truncated[name] = full_size
            ranges = jit_source_map.clip_ranges(ranges, shown.count("\n") + 1)
        event[name] = shown
        source_lines[name] = ranges
    event["source_lines"] = source_lines
    event["truncated"] = truncated
    event["artifact_limit_bytes"] = limit_bytes
