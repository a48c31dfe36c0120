"""Any object a lowering reads, written into the key of a lowered module: ``KeyWriter``.

``lowering_key`` feeds it every argument of a call of JAX's lowering; each is
written by what it is:

- a traced program, equation by equation (``jaxpr``: what of it goes in is
  listed in lowering_key), with each equation's source location when the key
  holds locations (``location``: the user frames of its traceback, its name
  stack);
- shardings (their meshes with device ids), devices, arrays by their bytes,
  enums, dtypes, and any other object by its type and attributes;
- installed code by what it is and holds (``installed_code`` says what is
  installed): a primitive by its name and lowering rules, a function by its
  module, name, place under its install root, bytecode, defaults and closure.

Refused (``Uncacheable``): any primitive whose lowering rule (or anything its
rule closes over) is not installed code, such as a rule the program registered
itself (it may differ from run to run under the same name), or is not the rule
it had when the cache was installed (JAX's own rule of another primitive,
registered by the program); callables in parameters, except the derivative
rules of custom_jvp/custom_vjp, which lowering never calls; constants over
``MAX_CONSTANT_BYTES``; objects only described by an address.
"""

from __future__ import annotations

import enum
import functools
import hashlib
import sys
import types
from collections.abc import Iterable
from typing import Any

from jaxplay.sandbox.caches import installed_code

MAX_CONSTANT_BYTES = 1 << 20  # per lowering: beyond this hashing costs what lowering does
MAX_NODES = 500_000
# Parameters holding the derivative rules of these primitives: lowering inlines their program only.
DERIVATIVE_RULES = frozenset({"custom_jvp_call", "custom_vjp_call", "custom_vjp_call_jaxpr"})
BUILTIN_VALUES = (bool, int, float, complex, str, bytes, tuple, list, dict, frozenset, set)


class Uncacheable(Exception):
    """This lowering depends on something the key cannot hold: JAX lowers it as usual."""


# Descriptions of immutable objects met before (abstract values, shardings, meshes, equation contexts):
# the same few are met in every lowering. Each holds its object, so its id is not reused.
_described: dict[int, tuple[Any, str]] = {}
DESCRIBED_LIMIT = 8192


class KeyWriter:
    """One key: ``value`` feeds it any object, ``hexdigest`` ends it."""

    def __init__(self, locations: bool) -> None:
        self.parts: list[str] = []
        self.locations = locations
        self._nodes = MAX_NODES
        self._constant_bytes = MAX_CONSTANT_BYTES
        self._opaque_callables = False
        self._open: set[int] = set()
        from jax._src import core

        self._core = core
        # JAX 0.12 folded ClosedJaxpr (a program and its constants) into Jaxpr.
        self.jaxpr_types = tuple(t for t in (core.Jaxpr, getattr(core, "ClosedJaxpr", None)) if t is not None)

        self._immutable = _immutable_types()

    def hexdigest(self) -> str:
        text = "\x1e".join(self.parts).encode("utf-8", "surrogatepass")
        return hashlib.blake2b(text, digest_size=20).hexdigest()

    def put(self, *parts: object) -> None:
        self.parts.append("\x1f".join(map(str, parts)))

    # --- any value -------------------------------------------------------

    def value(self, x: Any) -> None:
        self._nodes -= 1
        if self._nodes < 0:
            raise Uncacheable("too large to key")
        kind = type(x)
        if x is None or kind in (bool, int, float, complex, str, bytes):
            self.put(kind.__name__, repr(x))
        elif kind in (tuple, list):
            self.put(kind.__name__, len(x))
            for item in x:
                self.value(item)
        elif kind is dict:
            self.put("dict", len(x))
            for key in sorted(x, key=repr):
                self.value(key)
                self.value(x[key])
        elif kind in (set, frozenset):
            self._unordered(x)
        else:
            self._object(x)

    def _unordered(self, items: Iterable[Any]) -> None:
        if not items:
            self.put("set")
            return
        digests = []
        for item in items:
            inner = KeyWriter(self.locations)
            inner._nodes, inner._opaque_callables = self._nodes, self._opaque_callables
            inner.value(item)
            self._nodes = inner._nodes
            digests.append(inner.hexdigest())
        self.put("set", *sorted(digests))

    def _object(self, x: Any) -> None:
        import numpy as np

        core = self._core
        if isinstance(x, enum.Enum):
            self.put("enum", type(x).__qualname__, x.name)
        elif isinstance(x, np.dtype):
            self.put("dtype", str(x))
        elif isinstance(x, (np.ndarray, np.generic)):
            self.array(x)
        elif isinstance(x, self.jaxpr_types):
            self.jaxpr(x)
        elif isinstance(x, core.Primitive):
            self.primitive(x)
        elif isinstance(x, self._immutable):
            self._immutable_object(x)
        elif id(x) in self._open:
            raise Uncacheable("a cycle")
        else:
            self._open.add(id(x))
            try:
                self._structure(x)
            finally:
                self._open.discard(id(x))

    def _immutable_object(self, x: Any) -> None:
        known = _described.get(id(x))
        if known is None or known[0] is not x:
            inner = KeyWriter(self.locations)
            inner._nodes = self._nodes
            inner._structure(x)
            self._nodes = inner._nodes
            if len(_described) >= DESCRIBED_LIMIT:
                _described.clear()
            known = _described[id(x)] = (x, "\x1d".join(inner.parts))
        self.parts.append(known[1])

    def _structure(self, x: Any) -> None:
        import jax
        import numpy as np
        from jax._src.lib import xla_client

        if isinstance(x, jax.Array):
            if not getattr(x, "is_fully_addressable", True) or x.nbytes > self._constant_bytes:
                raise Uncacheable("a large or distributed constant")
            self.array(np.asarray(x))
        elif isinstance(x, xla_client.Device):
            self.put("device", x.platform, x.id)
        elif isinstance(x, jax.sharding.Sharding):
            self.sharding(x)
        elif isinstance(x, BUILTIN_VALUES):  # a NamedTuple, a str enum, a tuple with attributes ...
            base = next(base for base in BUILTIN_VALUES if isinstance(x, base))
            self.put("subclass", type(x).__module__, type(x).__qualname__)
            self.value(base(x))
            self.attributes(x, described=True)
        elif isinstance(x, (types.FunctionType, types.MethodType, types.BuiltinFunctionType,
                            functools.partial, types.ModuleType, type)) or callable(x):
            if self._opaque_callables:
                self.put("callable")
            else:
                self.function(x)
        else:
            self.attributes(x)

    def function(self, fn: Any) -> None:
        """Installed code by what it is and holds (a PRNG implementation's functions, say); the program's
        own functions are refused: the same name may do something else in the next run."""
        if isinstance(fn, functools.partial):
            self.put("partial")
            self.value(fn.func)
            self.value(list(fn.args))
            self.value(dict(fn.keywords))
        elif isinstance(fn, types.MethodType):
            self.put("method")
            self.value(fn.__func__)
            self.value(fn.__self__)
        elif isinstance(fn, types.FunctionType):
            code = fn.__code__
            if not installed_code.installed_file(code.co_filename):
                raise Uncacheable(f"a callable parameter ({fn.__qualname__})")
            self.put("function", fn.__module__, fn.__qualname__, installed_code.portable_file(code.co_filename),
                     code.co_firstlineno,
                     hashlib.blake2b(code.co_code, digest_size=12).hexdigest())
            self.value(list(fn.__defaults__ or ()))
            self.value([cell.cell_contents for cell in (fn.__closure__ or ()) if installed_code.cell_filled(cell)])
        elif isinstance(fn, (types.BuiltinFunctionType, type, types.ModuleType)):
            module = fn.__name__ if isinstance(fn, types.ModuleType) else getattr(fn, "__module__", None)
            module_file = getattr(sys.modules.get(module or ""), "__file__", None) or "<frozen builtin>"
            if not installed_code.installed_file(module_file):
                raise Uncacheable(f"a callable parameter ({getattr(fn, '__qualname__', fn)})")
            self.put("builtin", module, getattr(fn, "__qualname__", getattr(fn, "__name__", "")))
        else:
            self.attributes(fn)  # an object with __call__: by its class and state

    def attributes(self, x: Any, described: bool = False) -> None:
        """An object by its type and attributes (dataclasses, slotted and plain objects alike);
        ``described``: its value is in the key already, so an object without attributes adds nothing."""
        kind = type(x)
        names: list[str] = []
        for cls in kind.__mro__:
            slots = cls.__dict__.get("__slots__", ())
            names += [slots] if isinstance(slots, str) else [s for s in slots if s not in ("__weakref__", "__dict__")]
        state = getattr(x, "__dict__", None)
        if state is not None:  # less what a cached property computed from the rest (present once asked for)
            names += sorted(name for name in state if not isinstance(getattr(kind, name, None),
                                                                     functools.cached_property))
        if not names and described:
            return
        if not names and state is not None:  # a sentinel (JAX's ``no_default``, say): all it holds is its type
            self.put("sentinel", kind.__module__, kind.__qualname__)
            return
        if not names:
            text = repr(x)
            if " at 0x" in text or "object at" in text:
                raise Uncacheable(f"{kind.__qualname__} is known only by its address")
            self.put("repr", kind.__module__, kind.__qualname__, text)
            return
        self.put("object", kind.__module__, kind.__qualname__, len(names))
        for name in names:
            self.put(name)
            self.value(getattr(x, name, "<unset>"))

    # --- arrays, shardings, primitives -----------------------------------

    def array(self, x: Any) -> None:
        import numpy as np

        x = np.asarray(x)
        if x.dtype == object:
            self.put("objects", x.shape)
            for item in x.flat:
                self.value(item)
            return
        self._constant_bytes -= x.nbytes
        if self._constant_bytes < 0:
            raise Uncacheable("large constants")
        self.put("array", x.dtype.str, x.shape, hashlib.blake2b(np.ascontiguousarray(x).tobytes(),
                                                                digest_size=20).hexdigest())

    def sharding(self, x: Any) -> None:
        """Its description, memory kind and devices in order (a mesh's order decides the HLO sharding)."""
        text = repr(x)
        if " at 0x" in text:
            raise Uncacheable("a sharding known only by its address")
        try:
            devices = tuple((d.platform, d.id) for d in x._device_assignment)
        except Exception:  # noqa: BLE001 - an abstract mesh has no devices
            devices = ()
        self.put("sharding", type(x).__qualname__, text, getattr(x, "memory_kind", None), devices)
        mesh = getattr(x, "mesh", None)
        if mesh is not None:
            try:
                ids = mesh.device_ids.tolist()
            except Exception:  # noqa: BLE001 - an abstract mesh has no devices
                ids = None
            self.put("mesh", repr(mesh), ids)

    def primitive(self, prim: Any) -> None:
        self.put("primitive", prim.name, type(prim).__module__, type(prim).__qualname__)
        rules = installed_code.lowering_rules(prim)
        if not rules:
            raise Uncacheable(f"{prim.name} has no lowering rule")
        at_install = installed_code.rules_at_install.get(id(prim))
        if at_install is not None and at_install[0] is prim and (
                len(rules) != len(at_install[1]) or any(a is not b for a, b in zip(rules, at_install[1], strict=True))):
            raise Uncacheable(f"the lowering rule of {prim.name} was registered by the program")
        for rule in rules:
            if not installed_code.rule_is_installed(rule):
                raise Uncacheable(f"the lowering rule of {prim.name} is the program's own")

    # --- the traced program ------------------------------------------------

    def jaxpr(self, program: Any) -> None:
        """A traced program: a Jaxpr, or a ClosedJaxpr (before JAX 0.12), with its constants."""
        core = self._core
        jaxpr = getattr(program, "jaxpr", program)
        numbers: dict[int, int] = {}

        def variables(group: Iterable[Any], defining: bool) -> None:
            for var in group:
                if isinstance(var, core.Literal):
                    self.put("literal")
                    self.value(var.val)
                    self.value(var.aval)
                elif type(var).__name__ == "DropVar":
                    self.put("drop")
                    self.value(var.aval)
                else:
                    number = numbers.setdefault(id(var), len(numbers))
                    self.put("var", number)
                    if defining:
                        self.value(var.aval)

        self.put("jaxpr", len(jaxpr.constvars), len(jaxpr.invars), len(jaxpr.eqns))
        variables(jaxpr.constvars, True)
        variables(jaxpr.invars, True)
        for eqn in jaxpr.eqns:
            self.primitive(eqn.primitive)
            opaque, self._opaque_callables = self._opaque_callables, eqn.primitive.name in DERIVATIVE_RULES
            try:
                self.value(dict(eqn.params))
            finally:
                self._opaque_callables = opaque
            variables(eqn.invars, False)
            variables(eqn.outvars, True)
            self.value(set(eqn.effects))
            self.value(getattr(eqn, "ctx", None))
            if self.locations:
                self.location(eqn.source_info)
        variables(jaxpr.outvars, False)
        self.value(set(jaxpr.effects))
        self.debug_info(getattr(jaxpr, "debug_info", None), len(jaxpr.invars), len(jaxpr.outvars))
        self.put("high", getattr(jaxpr, "is_high", False))
        self.value(list(getattr(program, "consts", ())))

    def debug_info(self, info: Any, inputs: int, outputs: int) -> None:
        """The names lowering gives the module's function, arguments and results."""
        if info is None:
            self.put("no debug info")
            return
        arg_names = info.safe_arg_names(inputs) if hasattr(info, "safe_arg_names") else info.arg_names
        result_paths = (info.safe_result_paths(outputs) if hasattr(info, "safe_result_paths")
                        else info.result_paths)
        source = installed_code.portable(getattr(info, "func_src_info", "") or "")
        self.put("debug_info", getattr(info, "traced_for", ""), source)
        self.value(tuple(arg_names or ()))
        self.value(tuple(result_paths or ()))

    def location(self, source_info: Any) -> None:
        """What JAX writes into the module for an equation: its name stack and the user frames of its
        traceback (all of them: more than JAX keeps only makes the key stricter)."""
        self.put("at", str(source_info.name_stack))
        for frame in _user_frames(source_info):
            self.put(*frame)


@functools.cache
def _frames_of_source_info() -> bool:
    """JAX before 0.5 takes a SourceInfo where later JAX takes its traceback."""
    import inspect

    from jax._src import source_info_util

    return "source_info" in inspect.signature(source_info_util.user_frames).parameters


def _user_frames(source_info: Any) -> Iterable[Any]:
    from jax._src import source_info_util

    return source_info_util.user_frames(source_info if _frames_of_source_info() else source_info.traceback)


@functools.cache
def _immutable_types() -> tuple[type, ...]:
    import jax
    from jax._src import core, mesh
    from jax._src.interpreters import mlir

    found = [core.AbstractValue, jax.sharding.Sharding, jax.sharding.PartitionSpec, mlir.LoweringParameters]
    found += [getattr(mesh, name) for name in ("Mesh", "AbstractMesh") if hasattr(mesh, name)]
    found += [core.JaxprEqnContext] if hasattr(core, "JaxprEqnContext") else []
    try:
        from jax._src.sharding_impls import UnspecifiedValue

        found.append(UnspecifiedValue)
    except ImportError:
        pass
    return tuple(found)


def prepare() -> None:
    """Read once, before any run exists (in the zygote, whose forks inherit it): JAX's signatures and types
    the writer asks about. Starts no backend."""
    _frames_of_source_info()
    _immutable_types()
