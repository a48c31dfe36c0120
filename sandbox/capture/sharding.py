"""Capture of how arrays are sharded: ``sharding`` events and compiled shardings.

Three sources, all sending the layout built by ``sharding_layout``:

- ``jax.debug.visualize_array_sharding(x)`` and ``jax.debug.visualize_sharding
  (shape, sharding)``: replaced at install time, so the page draws the grid
  instead of rich printing text (which only handles 1-D/2-D, colourless here).
- ``from playground import show_sharding``: ``show_sharding(x, name="w")``,
  for any array or pytree of arrays, also inside ``jit`` and ``shard_map``.
- every compiled function: a hook in ``jit_capture.COMPILED_HOOKS`` adds its
  input/output shardings and collective counts to its ``compiled`` event.

Inside a traced function the sharding is only known once XLA has partitioned
the program, so a traced value is reported through
``jax.debug.inspect_array_sharding`` (once per compilation, like JAX's own
visualize). Inside ``shard_map`` each device holds its own block: the event
then describes that per-device block and which devices hold equal copies.
"""

from __future__ import annotations

import ast
import functools
import linecache
import logging
import sys
from collections.abc import Callable
from typing import Any

import jax
import numpy as np

from jaxplay import worker_protocol as wp
from jaxplay.sandbox.capture import jax_compat
from jaxplay.sandbox.capture.sharding_compiled import add_sharding_fields
from jaxplay.sandbox.capture.sharding_layout import axis_type_name, describe_layout, describe_mesh
from jaxplay.sandbox.output import events

log = logging.getLogger("jaxplay.sandbox.sharding")

USER_FILENAME = "<playground>"
# A visualize call in a long loop must not flood the page: later ones are counted, not sent.
MAX_SHARDING_EVENTS = 200

_originals: dict[str, Callable[..., Any]] = {}
_sent = 0
_dropped = 0


def install(run: wp.SandboxRun) -> None:
    global _sent, _dropped
    _sent = _dropped = 0
    _originals.setdefault("visualize_array_sharding", jax.debug.visualize_array_sharding)
    _originals.setdefault("visualize_sharding", jax.debug.visualize_sharding)
    jax.debug.visualize_array_sharding = visualize_array_sharding
    jax.debug.visualize_sharding = visualize_sharding
    try:
        from jaxplay.sandbox.capture import jit_capture
    except ImportError:
        log.debug("jit_capture is not available: compiled functions carry no shardings")
        return
    hooks = getattr(jit_capture, "COMPILED_HOOKS", None)
    if hooks is not None and add_sharding_fields not in hooks:
        hooks.append(add_sharding_fields)


def finish() -> None:
    if _dropped:
        print(
            f"[playground] {_dropped} more sharding views were not drawn: a run shows at most "
            f"{MAX_SHARDING_EVENTS}. Call show_sharding/visualize_array_sharding fewer times (e.g. not in a loop).",
            file=sys.stderr,
        )


def user_location() -> dict[str, Any]:
    """The innermost frame of the user's program: its line and function."""
    frame = sys._getframe(1)
    while frame is not None:
        if frame.f_code.co_filename == USER_FILENAME:
            fn = frame.f_code.co_qualname if frame.f_code.co_name != "<module>" else None
            return {"line": frame.f_lineno, "fn": fn}
        frame = frame.f_back
    return {"line": None, "fn": None}


@functools.lru_cache(maxsize=4)
def _user_calls(source: str) -> dict[tuple[int, str], str]:
    """(line, called name) -> source text of the first argument, for every call in the program."""
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return {}
    calls: dict[tuple[int, str], str] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and node.args:
            func = node.func
            name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", None)
            text = ast.get_source_segment(source, node.args[0])
            if name and text:
                calls.setdefault((node.lineno, name), text)
    return calls


def argument_text(line: int | None, called: str) -> str | None:
    """What the user passed, as written: ``w1`` in ``jax.debug.visualize_array_sharding(w1)``."""
    if line is None:
        return None
    lines = linecache.getlines(USER_FILENAME)
    return _user_calls("".join(lines)).get((line, called)) if lines else None


def send(layout: dict[str, Any], source: dict[str, Any], **extra: Any) -> None:
    global _sent, _dropped
    if _sent >= MAX_SHARDING_EVENTS:
        _dropped += 1
        return
    _sent += 1
    events.emit({"type": "sharding", **layout, **extra, "source": source})


def typeof_text(value: Any) -> str | None:
    try:
        return jax_compat.type_text(value)
    except Exception:
        return None


def is_tracer(value: Any) -> bool:
    return isinstance(value, jax.core.Tracer)


def report(value: Any, source: dict[str, Any]) -> None:
    """Send one ``sharding`` event for a concrete array, or arrange one for a traced value."""
    if is_tracer(value):
        report_traced(value, source)
        return
    sharding = getattr(value, "sharding", None)
    if sharding is None or not hasattr(value, "shape"):
        raise TypeError(
            f"show_sharding needs a JAX array, got {type(value).__module__}.{type(value).__qualname__}. "
            "Put it on devices first, e.g. jax.device_put(x, NamedSharding(mesh, P('x')))."
        )
    sharding = getattr(sharding, "sharding", sharding)  # ShapeDtypeStruct may carry a Format
    array = value if isinstance(value, jax.Array) else None
    send(describe_layout(value.shape, value.dtype, sharding, array=array), source, typeof=typeof_text(value))


def report_traced(value: Any, source: dict[str, Any]) -> None:
    aval = jax_compat.typeof(value)
    text = str(aval)
    abstract_mesh = getattr(getattr(aval, "sharding", None), "mesh", None)
    manual = list(getattr(abstract_mesh, "manual_axes", ()) or ())
    shape, dtype = tuple(value.shape), value.dtype
    source = {**source, "traced": True}
    tracked = vma_tracked() if manual else True  # read while tracing: the callback runs later

    def on_sharding(sharding: Any) -> None:
        if manual:
            layout = local_block_layout(shape, dtype, sharding, manual, aval, tracked)
            send(layout, source, typeof=text)
            return
        layout = describe_layout(shape, dtype, sharding)
        # XLA hands back a mesh rebuilt with Auto axes; the traced type knows the user's axis types.
        if layout["mesh"] is not None and abstract_mesh is not None:
            if list(abstract_mesh.axis_names) == layout["mesh"]["axis_names"]:
                layout["mesh"]["axis_types"] = [axis_type_name(t) for t in abstract_mesh.axis_types]
        send(layout, source, typeof=text)

    jax.debug.inspect_array_sharding(value, callback=on_sharding)


def vma_tracked() -> bool:
    """Whether the enclosing shard_map tracks varying manual axes (its ``check_vma``, default True)."""
    try:
        from jax._src import config as jax_config

        return bool(jax_config._check_vma.value)
    except Exception:  # a JAX without this flag: assume the default
        return True


def local_block_layout(
    shape: tuple[int, ...], dtype: Any, sharding: Any, manual_axes: list[str], aval: Any, tracked: bool
) -> dict[str, Any]:
    """Inside shard_map: every device holds a block of ``shape``; equal along the invariant axes."""
    mesh = sharding.mesh
    names = list(mesh.axis_names)
    # Without vma tracking (check_vma=False) JAX does not know which blocks are
    # equal: treat every manual axis as varying, so no copy is claimed.
    varying = set(getattr(getattr(aval, "manual_axis_type", None), "varying", ()) or ()) if tracked else set(manual_axes)
    ids = np.asarray(mesh.device_ids)
    groups: dict[tuple[int, ...], int] = {}
    shards = []
    itemsize = np.dtype(dtype).itemsize
    elements = int(np.prod(shape)) if shape else 1
    for coords in np.ndindex(*ids.shape):
        key = tuple(c for name, c in zip(names, coords, strict=True) if name in varying)
        replica = groups.get(key, 0)
        groups[key] = replica + 1
        shards.append({
            "device": int(ids[coords]),
            "index": [[0, d] for d in shape],
            "replica": replica,
            "bytes": elements * itemsize,
        })
    mesh_fields = describe_mesh(mesh)
    # XLA reports the enclosing mesh; inside shard_map the user's axes are Manual.
    mesh_fields["axis_types"] = [
        "Manual" if name in manual_axes else kind for name, kind in zip(names, mesh_fields["axis_types"], strict=True)
    ]
    return {
        "shape": list(shape),
        "dtype": str(np.dtype(dtype)),
        "sharding_type": "shard_map block",
        "spec": "P()",
        "mesh": mesh_fields,
        "devices": [s["device"] for s in shards],
        "device_kind": getattr(next(iter(mesh.devices.flat)), "device_kind", None),
        "platform": getattr(next(iter(mesh.devices.flat)), "platform", None),
        "memory_kind": None,
        "bytes": elements * itemsize,
        "uneven": False,
        "shards": shards,
        "local_block": True,
        "manual_axes": manual_axes,
        "varying_axes": sorted(varying) if tracked else None,
    }


def show_sharding(value: Any, name: str | None = None) -> None:
    """Draw how ``value`` (an array or a pytree of arrays) is laid out over devices."""
    location = user_location()
    leaves = jax.tree_util.tree_flatten_with_path(value)[0]
    if not leaves:
        raise TypeError("show_sharding was given an empty pytree: pass an array, or a dict/list of arrays.")
    single = len(leaves) == 1 and not leaves[0][0]
    for path, leaf in leaves:
        label = name if single else (name or "") + jax.tree_util.keystr(path)
        report(leaf, {"kind": "show_sharding", "name": label, **location})


def visualize_array_sharding(arr: Any, **kwargs: Any) -> None:
    """Stands in for ``jax.debug.visualize_array_sharding``: the page draws the grid."""
    location = user_location()
    report(arr, {"kind": "visualize", "name": argument_text(location["line"], "visualize_array_sharding"), **location})


def visualize_sharding(shape: Any, sharding: Any, **kwargs: Any) -> None:
    """Stands in for ``jax.debug.visualize_sharding``: a sharding over a shape, no data."""
    shape = tuple(int(d) for d in shape)
    location = user_location()
    source = {"kind": "visualize", "name": argument_text(location["line"], "visualize_sharding"), **location}
    send(describe_layout(shape, None, sharding), source, typeof=None)
