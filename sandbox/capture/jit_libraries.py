"""``eqx.filter_jit`` and ``nnx.jit`` seen from the user's side, for the jit capture.

Both end in ``jax.jit`` (which the capture wraps), but on a function of their
own and with the arguments rearranged: Equinox jits one internal
``fun_wrapped`` for every function, called with three dicts of array leaves
and static parts; NNX jits a ``JitFn`` around the user's function, called with
graph states instead of Modules. Reported as they are, every Equinox function
would be one entry named after the first, and NNX arguments would print as
pages of graph definitions.

So while one of their wrappers runs, ``UserCall`` records on the thread the
user's function and the arguments the user passed; ``CapturedJit`` files the
call under that function and describes those arguments. The wrappers are
patched where the libraries look them up at call time (``equinox._jit._call``,
``__call__`` of NNX's jit wrapper classes): at ``install`` when the zygote
already imported the library, else right after the program imports it.
``uninstall`` restores them.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import importlib.abc
import linecache
import sys
import threading
from collections.abc import Callable, Iterator
from typing import Any

from jaxplay.sandbox.capture import jax_compat, jit_artifacts
from jaxplay.sandbox.output import events

USER_FILENAME = "<playground>"

EQUINOX_JIT = "equinox._jit"
NNX_COMPILATION = "flax.nnx.transforms.compilation"
# Each wrapper class, and where the user's outputs are among its jitted function's:
# JitFn returns (args, kwargs, out), SimpleJitFn returns (out, updates).
NNX_WRAPPER_CLASSES = {"JitWrapped": 2, "SimpleJitWrapped": 0}
# A model shows its arrays by path; past this many, the rest are counted.
MAX_FIELDS_SHOWN = 8

Describe = Callable[[tuple[list[str], str | None], Any, tuple, dict], list[dict[str, str]]]


@dataclasses.dataclass(frozen=True)
class UserCall:
    """One call of a library's jitted function, as the user made it."""

    fun: Any
    args: tuple[Any, ...]
    kwargs: dict[str, Any]
    describe: Describe
    # Which element of the jitted function's outputs is the user's (the rest is the library's bookkeeping).
    output_index: int
    # JAX's cache-miss explanation names the library's arguments, not the user's: use ours instead.
    jax_explains: bool
    # The outputs are wrapped in the library's own containers (NNX graph states): list their arrays.
    outputs_as_leaves: bool = False

    def arguments(self, jit_info: Any) -> list[dict[str, str]]:
        return self.describe(jit_artifacts.positional_names(self.fun), jit_info, self.args, self.kwargs)

    def outputs_text(self, traced: Any) -> str | None:
        try:
            avals = jax_compat.out_avals(traced)[self.output_index]
            if not self.outputs_as_leaves:
                return jit_artifacts.avals_text(avals)
            import jax

            texts = [aval.str_short(short_dtypes=True) for aval in jax.tree.leaves(avals)]
            return texts[0] if len(texts) == 1 else jit_artifacts.short(f"({', '.join(texts)})", jit_artifacts.MAX_TYPE_TEXT_CHARS)
        except Exception:
            return None


_local = threading.local()
_restore: list[tuple[Any, str, Any]] = []


def current() -> UserCall | None:
    """The innermost library call on this thread, if any."""
    stack = getattr(_local, "calls", None)
    return stack[-1] if stack else None


@contextlib.contextmanager
def calling(call: UserCall) -> Iterator[None]:
    stack = getattr(_local, "calls", None)
    if stack is None:
        stack = _local.calls = []
    stack.append(call)
    try:
        yield
    finally:
        stack.pop()


# --- Equinox ------------------------------------------------------------------


def describe_equinox(names: tuple[list[str], str | None], jit_info: Any, args: tuple, kwargs: dict) -> list[dict[str, str]]:
    """Arrays are traced and everything else is static, per argument, as filter_jit decides."""
    import equinox
    import jax

    def one(name: str, value: Any) -> dict[str, str]:
        arrays = equinox.filter(value, equinox.is_array)
        with_paths = jax.tree_util.tree_flatten_with_path(arrays)[0]
        if not with_paths:
            return {"name": name, "static": jit_artifacts.short(repr(value), jit_artifacts.MAX_STATIC_REPR_CHARS)}
        if not isinstance(value, equinox.Module):
            return {"name": name, "type": jit_artifacts.tree_type_text(arrays)}
        fields = [(jax.tree_util.keystr(path).lstrip("."), jit_artifacts.aval_text(leaf)) for path, leaf in with_paths]
        return {"name": name, "type": object_text(value, fields)}

    return _describe_each(names, args, kwargs, one)


def _patch_equinox(module: Any) -> None:
    original = module._call

    @functools.wraps(original)
    def _call(jit_wrapper: Any, is_lower: bool, args: tuple, kwargs: dict) -> Any:
        if is_lower:
            return original(jit_wrapper, is_lower, args, kwargs)
        call = UserCall(jit_wrapper.__wrapped__, tuple(args), dict(kwargs), describe_equinox,
                        output_index=1, jax_explains=False)
        with calling(call):
            return original(jit_wrapper, is_lower, args, kwargs)

    _replace(module, "_call", _call)


# --- Flax NNX -----------------------------------------------------------------


def describe_nnx(names: tuple[list[str], str | None], jit_info: Any, args: tuple, kwargs: dict) -> list[dict[str, str]]:
    """As ``jax.jit`` would, but a Module (any graph node) shows its variables by path."""
    described = jit_artifacts.describe_arguments(names, jit_info, args, kwargs)
    values = list(args) + list(kwargs.values())
    for entry, value in zip(described, values, strict=False):
        if "type" in entry:
            text = nnx_node_text(value)
            if text is not None:
                entry["type"] = text
    return described


def nnx_node_text(value: Any) -> str | None:
    """``Model(linear.kernel: Param f32[3,2], ...)``, or None for what is not an NNX graph node."""
    from flax import nnx
    from flax.nnx import graphlib

    if not graphlib.is_graph_node(value):
        return None
    fields = []
    for path, variable in nnx.to_flat_state(nnx.state(value)):
        leaf = variable.get_value() if hasattr(variable, "get_value") else getattr(variable, "value", variable)
        fields.append((".".join(str(p) for p in path), f"{type(variable).__name__} {jit_artifacts.aval_text(leaf)}"))
    return object_text(value, fields)


def object_text(value: Any, fields: list[tuple[str, str]]) -> str:
    """``MLP(layers[0].weight: f32[8,3], ...)``: a model by the paths of its arrays, on one line."""
    shown = [f"{path}: {kind}" for path, kind in fields[:MAX_FIELDS_SHOWN]]
    if len(fields) > MAX_FIELDS_SHOWN:  # an optimizer's state: the first few say what it is
        shown.append(f"… {len(fields) - MAX_FIELDS_SHOWN} more")
    return jit_artifacts.short(f"{type(value).__name__}({', '.join(shown)})", jit_artifacts.MAX_TYPE_TEXT_CHARS)


def _patch_nnx(module: Any) -> None:
    for class_name, output_index in NNX_WRAPPER_CLASSES.items():
        cls = getattr(module, class_name, None)
        if cls is None:
            continue
        _replace(cls, "__call__", _nnx_call(cls.__call__, output_index))


def _nnx_call(original: Callable[..., Any], output_index: int) -> Callable[..., Any]:
    @functools.wraps(original)
    def __call__(self: Any, *args: Any, **kwargs: Any) -> Any:
        fun = getattr(self, "fun", None) or getattr(self, "__wrapped__", None)
        if fun is None:
            return original(self, *args, **kwargs)
        partial = tuple(getattr(self, "partial_args", ()) or ())  # nnx.jit of a method binds self here
        call = UserCall(fun, (*partial, *args), dict(kwargs), describe_nnx, output_index, jax_explains=True,
                        outputs_as_leaves=getattr(self, "graph", True))
        with calling(call):
            return original(self, *args, **kwargs)

    return __call__


# --- patching -------------------------------------------------------------------

PATCHES: dict[str, Callable[[Any], None]] = {EQUINOX_JIT: _patch_equinox, NNX_COMPILATION: _patch_nnx}


class _PatchAfterImport(importlib.abc.MetaPathFinder):
    """Patches a library module right after the program imports it (when the zygote did not)."""

    def __init__(self, pending: dict[str, Callable[[Any], None]]) -> None:
        self.pending = pending

    def find_spec(self, name: str, path: Any, target: Any = None) -> Any:
        if name not in self.pending:
            return None
        patch = self.pending.pop(name)
        for finder in sys.meta_path:
            if finder is self or not hasattr(finder, "find_spec"):
                continue
            spec = finder.find_spec(name, path, target)
            if spec is not None and spec.loader is not None and hasattr(spec.loader, "exec_module"):
                spec.loader.exec_module = _then_patch(spec.loader.exec_module, patch)  # this spec's own loader
                return spec
        return None


def _then_patch(exec_module: Callable[[Any], None], patch: Callable[[Any], None]) -> Callable[[Any], None]:
    def exec_then_patch(module: Any) -> None:
        exec_module(module)
        _patch_safely(patch, module)

    return exec_then_patch


def _patch_safely(patch: Callable[[Any], None], module: Any) -> None:
    try:
        patch(module)
    except Exception as exc:  # a library version we do not know: its functions are still captured as jax.jit
        # A one-line note beside the output (an older library on an older JAX runtime), not the program's
        # stderr; only for a program that names the library (preloaded libraries are patched for every run).
        if module.__name__.partition(".")[0] not in "".join(linecache.getlines(USER_FILENAME)):
            return
        events.emit({"type": "notice", "level": "info", "view": "Inspect",
                     "message": f"Inspect cannot follow {module.__name__} on this version ({type(exc).__name__}: "
                                f"{exc}); its jitted functions are shown as JAX sees them."})


def _replace(owner: Any, name: str, value: Any) -> None:
    _restore.append((owner, name, owner.__dict__[name]))
    setattr(owner, name, value)


def install() -> None:
    uninstall()
    pending = {}
    for name, patch in PATCHES.items():
        module = sys.modules.get(name)
        if module is not None:
            _patch_safely(patch, module)
        else:
            pending[name] = patch
    if pending:
        sys.meta_path.insert(0, _PatchAfterImport(pending))


def uninstall() -> None:
    sys.meta_path[:] = [f for f in sys.meta_path if not isinstance(f, _PatchAfterImport)]
    while _restore:
        owner, name, value = _restore.pop()
        setattr(owner, name, value)
    _local.calls = []


def _describe_each(names: tuple[list[str], str | None], args: tuple, kwargs: dict,
                   one: Callable[[str, Any], dict[str, str]]) -> list[dict[str, str]]:
    positional, star = names
    described = []
    for index, value in enumerate(args):
        name = positional[index] if index < len(positional) else f"{star or 'args'}[{index - len(positional)}]"
        described.append(one(name, value))
    described += [one(name, value) for name, value in kwargs.items()]
    return described

