"""What the capture layer needs from JAX, on every JAX a worker offers (sandbox/runtimes/), oldest 0.4.13.

The capture is written against the current JAX; where an older one lacks an
API, these give the older way to the same answer, or ``None``. A view that
has to do with less says so once per run, with ``note`` (a one-line ``notice``
event naming the JAX it needs), never with a crash or a silent blank.
"""

from __future__ import annotations

from typing import Any

from jaxplay.sandbox.output import events

_noted: set[str] = set()


def jax_version() -> str:
    import jax

    return jax.__version__


def note(view: str, needs: str, what: str) -> None:
    """Say once per run that ``view`` shows less on this JAX: "<view>: <what> needs JAX >= <needs>"."""
    key = f"{view}:{what}"
    if key in _noted:
        return
    _noted.add(key)
    events.emit({"type": "notice", "level": "info", "view": view,
                 "message": f"{view}: {what} needs JAX >= {needs} (this run: JAX {jax_version()})."})


def typeof(value: Any) -> Any:
    """``jax.typeof`` (JAX >= 0.6): the abstract value of an array or tracer; TypeError for others."""
    import jax

    if hasattr(jax, "typeof"):
        return jax.typeof(value)
    from jax import api_util

    if isinstance(value, jax.core.Tracer):
        return value.aval
    try:
        return api_util.shaped_abstractify(value)
    except Exception as exc:  # noqa: BLE001 - older JAX raises its own types for non-arrays
        raise TypeError(str(exc)) from exc


def type_text(value: Any) -> str:
    """``str(jax.typeof(value))`` as current JAX prints it (``float32[8,4]``), also on older JAX."""
    import jax

    aval = typeof(value)
    if hasattr(jax, "typeof") or not hasattr(aval, "str_short"):
        return str(aval)
    return aval.str_short(short_dtypes=False)


def out_avals(traced: Any) -> Any:
    """The output pytree of abstract values of a ``Traced`` (``out_avals`` is newer than ``trace``)."""
    avals = getattr(traced, "out_avals", None)
    if avals is not None:
        return avals
    import jax

    flat = traced.jaxpr.out_avals
    tree = getattr(traced, "out_tree", None) or getattr(traced, "_out_tree", None)
    return jax.tree_util.tree_unflatten(tree, flat) if tree is not None else tuple(flat)


def compiled_out_info(compiled: Any) -> Any:
    """``Compiled.out_info`` (newer than 0.4.38): the outputs' shapes, dtypes and shardings as a pytree."""
    info = getattr(compiled, "out_info", None)
    if info is not None:
        return info
    import jax

    avals = compiled._executable.out_avals  # the older JAX's own record of the outputs
    shardings = jax.tree_util.tree_leaves(compiled.output_shardings)
    leaves = [jax.ShapeDtypeStruct(a.shape, a.dtype, sharding=s) for a, s in zip(avals, shardings, strict=True)]
    return jax.tree_util.tree_unflatten(compiled.out_tree, leaves)


def cache_loses_aliases() -> bool:
    """JAX before 0.6 (measured: 0.4.38; 0.6.2 keeps them) reloads executables from its persistent cache
    without their input/output aliases: ``memory_analysis()`` of a loaded one reads alias_size_in_bytes 0
    where the compile that made it read the donated bytes."""
    version = tuple(int(part) for part in jax_version().split(".")[:2] if part.isdigit())
    return version < (0, 6)


def donates(lowered: Any) -> bool:
    """Whether the compilation has a donated argument (``Lowered.args_info``)."""
    import jax

    try:
        return any(getattr(info, "donated", False) for info in jax.tree_util.tree_leaves(lowered.args_info))
    except Exception:  # noqa: BLE001 - no argument record: nothing to correct
        return False


def memory_analysis_as_compiled(lowered: Any) -> Any:
    """The memory analysis a real compile of ``lowered`` reports, on a JAX whose persistent cache loses
    aliases (None elsewhere): compiled once more with that cache off, so what XLA reports is its own."""
    if not cache_loses_aliases():
        return None
    from jaxplay.sandbox.capture import pass_pipeline

    with pass_pipeline.persistent_cache_off():
        # Options make JAX compile anew (compile() without them hands back the executable it has);
        # this one changes nothing without a dump folder.
        return lowered.compile(compiler_options={"xla_dump_hlo_module_re": "^$"}).memory_analysis()


def stablehlo_with_locations(lowered: Any) -> str | None:
    """The StableHLO text with its source locations (``as_text(debug_info=True)``), or None."""
    try:
        return lowered.as_text(debug_info=True)
    except TypeError:
        pass
    try:
        return lowered.compiler_ir("stablehlo").operation.get_asm(enable_debug_info=True)
    except Exception:  # noqa: BLE001 - no locations: the text still shows, unlinked
        note("Inspect", "0.4.30", "linking StableHLO lines to your source")
        return None
