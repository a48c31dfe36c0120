"""What is installed code, for the key of a lowered module (``lowering_key``, ``key_writer``).

A lowering may be cached only where everything it runs is the same from run to
run: installed code (read-only in a sandbox), never the program's. This module
answers that for files, functions (with what they close over) and JAX's lowering
rules, remembering each primitive's rules as installed before any run, and
names a traced function's file portably (the sandbox sees installed code at
other paths than the trusted fill does).
"""

from __future__ import annotations

import functools
import os
import sys
import types
from typing import Any

JAX_SOURCE = f"{os.sep}jax{os.sep}_src{os.sep}"
EAGER_SOURCE = f"{JAX_SOURCE}dispatch.py:"


@functools.cache
def installed_roots() -> tuple[str, ...]:
    """Where installed code lives: read-only in a sandbox, the same from run to run."""
    import jax

    roots = {sys.prefix, sys.base_prefix, sys.exec_prefix, sys.base_exec_prefix,
             os.path.dirname(os.path.dirname(jax.__file__))}
    return tuple(sorted(os.path.join(os.path.realpath(root), "") for root in roots))


@functools.lru_cache(maxsize=4096)
def installed_file(filename: str) -> bool:
    if filename.startswith("<frozen "):
        return True
    if filename.startswith("<") or not os.path.isabs(filename):  # the program's ``<playground>``, ``exec``'s text
        return False
    return os.path.realpath(filename).startswith(installed_roots())


rules_checked: dict[int, tuple[Any, bool]] = {}  # lowering rules, each held: whether it is installed code
# Each primitive's rules when the cache was installed, before any run (primitives held): a rule a program
# registers later for one of them lowers it otherwise than its key says, even JAX's own rule of another.
rules_at_install: dict[int, tuple[Any, tuple[Any, ...]]] = {}


def lowering_rules(prim: Any) -> list[Any]:
    from jax._src.interpreters import mlir

    entries = [mlir._lowerings.get(prim)]
    entries += [rules.get(prim) for rules in mlir._platform_specific_lowerings.values()]
    return [getattr(entry, "rule", entry) for entry in entries if entry is not None]


def remember_registered_rules() -> None:
    """Every primitive's lowering rules as JAX registered them: called when the cache is installed,
    before any program runs."""
    from jax._src.interpreters import mlir

    primitives = {*mlir._lowerings, *(p for table in mlir._platform_specific_lowerings.values() for p in table)}
    for prim in primitives:
        rules_at_install.setdefault(id(prim), (prim, tuple(lowering_rules(prim))))


def installed_callable(fn: Any, depth: int) -> bool:
    """Whether ``fn``, and every function it closes over or binds, is installed code."""
    if depth <= 0:
        return False
    if isinstance(fn, functools.partial):
        return installed_callable(fn.func, depth - 1) and all(
            installed_callable(arg, depth - 1) for arg in (*fn.args, *fn.keywords.values()) if callable(arg))
    if isinstance(fn, types.MethodType):
        return installed_callable(fn.__func__, depth - 1)
    code = getattr(fn, "__code__", None)
    if isinstance(code, types.CodeType):
        if not installed_file(code.co_filename):
            return False
        cells = [cell.cell_contents for cell in (fn.__closure__ or ()) if cell_filled(cell)]
        return all(installed_callable(inner, depth - 1) for inner in cells if callable(inner))
    if isinstance(fn, (types.BuiltinFunctionType, type)):
        return installed_file(getattr(sys.modules.get(getattr(fn, "__module__", "") or ""), "__file__", "") or
                               "<frozen builtin>")
    call = next((vars(cls)["__call__"] for cls in type(fn).__mro__ if "__call__" in vars(cls)), None)
    return call is not None and installed_callable(call, depth - 1)


def cell_filled(cell: Any) -> bool:
    """Whether a closure cell holds a value (a cell of a name not yet assigned raises on reading)."""
    try:
        cell.cell_contents  # noqa: B018 - an empty cell raises
    except ValueError:
        return False
    return True


def portable(func_src_info: str) -> str:
    """``f at file:line`` with an installed file named from its installed root: the sandbox sees the
    installed code at other paths than the trusted fill does, and lowering writes the function's file
    nowhere into the module (only JAX's warnings name it)."""
    name, at, place = func_src_info.rpartition(" at ")
    filename, _, line = place.rpartition(":")
    if not at or not installed_file(filename):
        return func_src_info
    return f"{name} at {portable_file(filename)}:{line}"


def portable_file(filename: str) -> str:
    """An installed file named from its installed root (``<installed>/jax/_src/...``), the same wherever
    the code is installed: a key naming the path itself would miss every entry written by an install
    elsewhere (the trusted fill of another checkout or image sharing the host's folder)."""
    if filename.startswith("<"):  # ``<frozen ...>``: no path
        return filename
    real = os.path.realpath(filename)
    root = max((r for r in installed_roots() if real.startswith(r)), key=len, default="")
    return f"<installed>/{real[len(root):]}"


def eager_operation(jaxpr: Any) -> bool:
    """Whether JAX made this program to run one primitive eagerly (``jnp.sin(x)`` outside any jit)."""
    return EAGER_SOURCE in _function_source(jaxpr)


def _function_source(program: Any) -> str:
    """``f at file:line`` of the traced function (a ClosedJaxpr before JAX 0.7 holds it in its Jaxpr)."""
    for holder in (program, getattr(program, "jaxpr", None)):
        debug_info = getattr(holder, "debug_info", None) or getattr(holder, "_debug_info", None)
        source = getattr(debug_info, "func_src_info", None)
        if source:
            return str(source)
    return ""


def jax_function(jaxpr: Any) -> bool:
    """Whether the traced function is one of JAX's own (``jnp.cos``, ``random.normal``'s helpers are jitted)."""
    filename = _function_source(jaxpr).rpartition(" at ")[2].rpartition(":")[0]
    return JAX_SOURCE in filename and installed_file(filename)


def rule_is_installed(rule: Any) -> bool:
    """Whether a lowering rule, and all it closes over, is installed code (each rule checked once, held)."""
    checked = rules_checked.get(id(rule))
    if checked is None or checked[0] is not rule:
        checked = rules_checked[id(rule)] = (rule, installed_callable(rule, 6))
    return checked[1]
