"""The user functions that ``jax.jit`` wraps, as Inspect names them: which function a call is
(its identity, name, line and module, ``source_of``) and what each has done (``FunctionRecord``: its
compilations and call times).

A function JAX made from another (``jax.grad(layer)``) is a function of its own, named for the
transformation (``grad(layer)``): what compiles is the derivative, not ``layer``. The transformation
is read from where the wrapper's code lives inside JAX, since JAX names what it returns after ``f``.
"""

from __future__ import annotations

import functools
import linecache
import os
import statistics
import types
from typing import Any

from jaxplay.sandbox.caches.installed_code import cell_filled
from jaxplay.sandbox.capture import roofline

USER_FILENAME = "<playground>"


class FunctionRecord:
    """One user function (one code object): its compilations and call times."""

    def __init__(self, fn_id: int, fn: str, line: int | None, module: str | None, transformed: bool = False) -> None:
        self.fn_id, self.fn, self.line, self.module = fn_id, fn, line, module
        self.transformed = transformed  # made by a JAX transformation (``grad(layer)``): JAX made the object
        self.compiles: list[tuple[str, list[dict[str, str]]]] = []  # (key, arguments)
        self.calls = 0
        self.total_s = 0.0
        self.samples: list[float] = []
        self.first_call_ms: float | None = None
        self.first_call_pending = False
        self.traced_calls = 0
        self.compile_calls = 0
        self.changed = False
        # Which compilation a call ran, for the roofline: by the call's argument signature once the
        # function has more than one compilation (one compilation: every call ran it).
        self.keys_by_signature: dict[Any, str] = {}
        self.samples_by_key: dict[str, list[float]] = {}

    def key_of_call(self, args: tuple, kwargs: dict) -> str | None:
        if len(self.compiles) == 1:
            return self.compiles[0][0]
        if not self.compiles:
            return None
        return self.keys_by_signature.get(roofline.call_signature(args, kwargs))

    def timing(self) -> dict[str, Any]:
        ms = [s * 1e3 for s in self.samples]
        return {
            "fn_id": self.fn_id, "fn": self.fn, "line": self.line, "calls": self.calls,
            "total_ms": round(self.total_s * 1e3, 4),
            "median_ms": round(statistics.median(ms), 4) if ms else None,
            "min_ms": round(min(ms), 4) if ms else None,
            "max_ms": round(max(ms), 4) if ms else None,
            "first_call_ms": None if self.first_call_ms is None else round(self.first_call_ms, 4),
            "traced_calls": self.traced_calls,
            "compile_calls": self.compile_calls,
            "sampled_calls": len(ms),
        }


def source_of(fun: Any) -> tuple[Any, str, int | None, str | None, bool]:
    """(identity, name, def line in user code, module, whether JAX transformed it) of a function.

    A function JAX transformed (``jax.grad(layer)``) is named for it, ``grad(layer)``, and is a
    function of its own: what compiles is the derivative, not ``layer``.
    """
    target = fun
    transforms: list[str] = []
    for _ in range(20):  # unwrap functools.partial and functools.wraps chains
        if isinstance(target, functools.partial):
            target = target.func
        elif getattr(target, "__wrapped__", None) is not None:
            transform = _jax_transformation(target)
            if transform is not None:
                transforms.append(transform)
            target = target.__wrapped__
        else:
            break
    name = (getattr(target, "__qualname__", None) if transforms else None) or getattr(fun, "__qualname__", None)
    name = name or getattr(target, "__qualname__", None) or getattr(target, "__name__", None) or type(target).__name__
    for transform in reversed(transforms):
        name = f"{transform}({name})"
    code = getattr(target, "__code__", None)
    line = None
    if isinstance(code, types.CodeType) and code.co_filename == USER_FILENAME:
        line = code.co_firstlineno
        # co_firstlineno is the first decorator's line; the def is what to jump to.
        while linecache.getline(USER_FILENAME, line).lstrip().startswith("@"):
            line += 1
    identity = code if isinstance(code, types.CodeType) else ("object", id(target))
    if transforms:
        identity = (tuple(transforms), identity)
    return identity, str(name), line, getattr(target, "__module__", None), bool(transforms)


# JAX's own wrappers that are no transformation: the public function's error-filtering shell.
_JAX_PLUMBING = frozenset({"api_boundary", "wraps"})


def _jax_transformation(wrapper: Any) -> str | None:
    """``grad`` for the function ``jax.grad(f)`` returned, ``jacfwd`` for ``jax.jacfwd(f)``'s; None for
    anything JAX did not make. JAX names the function it returns after ``f`` (``wraps``), so the
    transformation is read from where its code lives: ``grad.<locals>.grad_f``, inside JAX, either
    the wrapper itself or the function its error-filtering shell holds."""
    code = getattr(wrapper, "__code__", None)
    if not isinstance(code, types.CodeType) or not _is_jax_source(code.co_filename):
        return None
    held = [cell.cell_contents for cell in (getattr(wrapper, "__closure__", None) or ()) if cell_filled(cell)]
    for candidate in (wrapper, *held):
        inner = getattr(candidate, "__code__", None)
        if not isinstance(inner, types.CodeType) or not _is_jax_source(inner.co_filename):
            continue
        outer, nested, _ = getattr(inner, "co_qualname", inner.co_name).partition(".<locals>.")
        if nested and outer not in _JAX_PLUMBING and outer.isidentifier():
            return outer.lstrip("_")  # jax.shard_map's work is done in _shard_map: name the public one
    return None


def _is_jax_source(filename: str) -> bool:
    return f"{os.sep}jax{os.sep}" in filename
