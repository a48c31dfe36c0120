"""Lowered modules kept between runs: a run that traces what an earlier run traced loads the module.

JAX keys its persistent compilation cache on the lowered MLIR module, so even
a run whose every executable is cached lowers each program first (about 3 ms a
module here, most of a warm re-run's time). ``install`` puts a cache in front
of JAX's lowering (``pxla._cached_lowering_to_hlo``): its key is everything the
lowering reads (``lowering_key``: the traced program with its source locations
and effects, shardings, backend, versions, configuration, flags); a hit parses
the module JAX wrote last time (MLIR bytecode, with its locations) instead of
lowering. Tracing still happens in every run, as in plain Python, so trace-time
prints, warnings and errors are the program's own.

An entry also holds the bytes JAX hashes into the persistent cache's key for
that module (``cache_key._hash_computation``: the module re-serialized,
without locations unless a program's IR is shown), recorded the first time:
a hit then skips that serialization too.

Entries are files ``<module>-<key>-lowered`` in JAX's persistent cache folder,
beside its executables, so they live where the executables live and obey the
same rules (``sandbox/caches/mounts.py``, docs/security.md): a run writes its
own layer, its init saves the layer into the browser session's folder, the
session's later runs read them, and the shared folder is written only by the
trusted fill. An entry is code its session wrote, like an executable: a bad
one makes JAX lower as usual, a crafted one can only change that session's
own results, which are never served to another session.

Only modules that hold nothing but the module are kept: no host callbacks, no
kept-alive Python objects, no effects, no shape polymorphism; and no lowering
during which JAX warned (an unused donation), so every run warns as it would.
While a program's logging would show JAX's own "Compiling ..." line for each
lowering (``jax_log_compiles``, or JAX's loggers at DEBUG), JAX lowers, as in
plain Python; within a run, lowerings JAX's cache holds the same (equivalent
shardings) share one module, as there.
"""

from __future__ import annotations

import contextlib
import functools
import io
import logging
import os
import sys
import threading
import time
import warnings
import weakref
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

from jaxplay.sandbox.caches import installed_code, lowering_key
from jaxplay.sandbox.caches import lowered_entries as entries
from jaxplay.sandbox.caches.key_writer import Uncacheable

log = logging.getLogger("jaxplay.sandbox.lowering")

PENDING_LIMIT = 256  # modules not yet hashed (``jit(f).lower()`` alone): the oldest are forgotten


@dataclass
class Counts:
    """What the cache did in this process (the bench and the tests read them)."""
    hits: int = 0
    misses: int = 0
    refused: int = 0
    stored: int = 0
    bad_entries: int = 0
    key_s: float = 0.0  # CPU time spent keying lowerings
    load_s: float = 0.0  # and loading hits
    refusals: dict[str, int] = field(default_factory=dict)


@dataclass
class _Entry:
    """A module of this process with its entry: written (or rewritten) once JAX has hashed the module,
    as then the bytes it hashes are known."""
    module: Any
    path: str
    key: str
    layout: list[Any]
    module_bytes: bytes  # as lowered: nothing JAX does to the module later reaches the entry
    key_bytes: dict[bool, bytes] = field(default_factory=dict)
    # Other keys JAX gave this very module (its own cache can answer two of our keys with one module).
    also: list[tuple[str, str]] = field(default_factory=list)


class _State:
    def __init__(self) -> None:
        self.installed = False
        self.unavailable: str | None = None  # why this JAX falls back to lowering every time
        self.counts = Counts()
        self.lock = threading.Lock()
        self.entries: dict[int, _Entry] = {}  # by id(module): modules lowered or loaded, not yet hashed
        # Lowerings this process did or loaded, as JAX's own in-memory cache holds them: by the program
        # object and the rest of the arguments as JAX compares them (``_same_lowering``), whoever lowers it
        # (a call, then Inspect's ``lower()``), and only while the program lives (each module holds an MLIR
        # context: a jit in a loop would fill memory).
        self.in_process: dict[tuple[Any, ...], tuple[weakref.ref[Any], tuple[Any, ...]]] = {}


_state = _State()
# Called on this thread whenever a lowering was served from the cache (jit_capture marks the compilation).
HIT_LISTENERS: list[Callable[[], None]] = []


_thread = threading.local()


@contextlib.contextmanager
def in_process_only() -> Iterator[None]:
    """Lowerings on this thread serve this process but write no entry: a spare's warm-up writes
    nothing into the layer its run's session keeps."""
    _thread.in_process_only = True
    try:
        yield
    finally:
        _thread.in_process_only = False


def counts() -> Counts:
    return _state.counts


def unavailable() -> str | None:
    """None once installed; else why this JAX lowers every module as before."""
    return _state.unavailable if not _state.installed else None


def install() -> bool:
    """Put the cache in front of JAX's lowering; False where this JAX lacks what it needs."""
    if _state.installed:
        return True
    try:
        from jax._src import cache_key
        from jax._src.interpreters import mlir, pxla
    except ImportError as exc:
        _state.unavailable = f"JAX has no {exc.name}"
        return False
    lower = getattr(pxla, "_cached_lowering_to_hlo", None)
    hash_computation = getattr(cache_key, "_hash_computation", None)
    if lower is None or hash_computation is None or not hasattr(mlir, "_lowerings"):
        _state.unavailable = "this JAX lowers through other functions"
        return False
    from jax._src import source_info_util

    # JAX writes the stack of the lowering's caller into the module (operations that lowering rules
    # trace, the module's own name): this wrapper is not the program's, so it is not in that stack; nor is
    # the key's, which reads that stack (lowering_key.key) while it is on it.
    for path in (__file__, lowering_key.__file__):
        if path not in source_info_util._exclude_paths:
            source_info_util.register_exclusion(path)
    installed_code.remember_registered_rules()
    pxla._cached_lowering_to_hlo = functools.partial(_lower, lower)
    cache_key._hash_computation = functools.partial(_hash, hash_computation)
    _state.installed = True
    return True


def _directory() -> str | None:
    import jax

    return jax.config.jax_compilation_cache_dir or None


def _lower(original: Callable[..., tuple[Any, ...]], *args: Any, **kwargs: Any) -> tuple[Any, ...]:
    """JAX's ``_cached_lowering_to_hlo``, whose arguments differ between versions (and whose names
    its C++ cache hides): the program comes first, the backend is the one client among them, the
    module's name is made of the strings (``jit_f``, or ``jit`` and ``f`` before JAX 0.6)."""
    directory = _directory()
    if directory is None or not args or _jax_logs_lowering():
        return original(*args, **kwargs)
    same = _same_lowering(args, kwargs)
    held = _held_in_process(args[0], same)
    if held is not None:
        return held
    started = time.thread_time()
    try:
        key, within = lowering_key.key(args, kwargs)
    except Uncacheable as why:
        _refused(str(why))
        return original(*args, **kwargs)
    except Exception as exc:  # noqa: BLE001 - an object the key cannot read: JAX lowers it, as always
        _refused(f"{type(exc).__name__} while keying")
        return original(*args, **kwargs)
    finally:
        _state.counts.key_s += time.thread_time() - started
    if same is None:  # arguments JAX's own equality cannot compare here: the key's text tells them apart
        same = (id(args[0]), within)
        held = _held_in_process(args[0], same)
        if held is not None:
            return held
    name = "_".join(arg for arg in args if isinstance(arg, str) and arg)
    path = os.path.join(directory, entries.entry_name(name, key))
    started = time.thread_time()
    result = _load(path, key)
    _state.counts.load_s += time.thread_time() - started
    if result is not None:
        _state.counts.hits += 1
        _keep_in_process(args[0], same, result)
        _tell_listeners()
        return result
    _state.counts.misses += 1
    with warnings.catch_warnings(record=True) as given:
        warnings.simplefilter("always")  # every warning, even one this run's filters hide: the next may not
        result = original(*args, **kwargs)
    _warn_again(given)
    _keep_in_process(args[0], same, result)
    layout = entries.layout(result)
    # A lowering that warned (an unused donation, say) is done again in every run, as it warns there too.
    if layout is not None and not given and not getattr(_thread, "in_process_only", False):
        from jax._src.interpreters import mlir

        _remember(_Entry(result[0], path, key, layout, mlir.module_to_bytecode(result[0])))
    return result


def _warn_again(given: list[warnings.WarningMessage]) -> None:
    """The lowering's warnings, through the program's own filters, as if JAX had just given them."""
    for warning in given:
        module = next((m for m in list(sys.modules.values())
                       if getattr(m, "__file__", None) == warning.filename), None)
        registry = vars(module).setdefault("__warningregistry__", {}) if module is not None else None
        warnings.warn_explicit(warning.message, warning.category, warning.filename, warning.lineno,
                               module=getattr(module, "__name__", None), registry=registry,
                               source=warning.source)


def _jax_logs_lowering() -> bool:
    """Whether JAX's lowering would log itself now ("Compiling jit(f) with global shapes ...": a WARNING
    under ``jax_log_compiles``, else DEBUG): then JAX lowers, as in plain Python, log line and all."""
    from jax._src import config
    from jax._src.interpreters import pxla

    return pxla.logger.isEnabledFor(logging.WARNING if config.log_compiles.value else logging.DEBUG)


def _same_lowering(args: tuple[Any, ...], kwargs: dict[str, Any]) -> tuple[Any, ...] | None:
    """The lowering as JAX's in-memory cache tells lowerings apart: the program object, the other arguments
    by their own equality (shardings JAX holds equivalent, ``P()`` and ``P(None,)`` of a replicated
    argument, are one lowering), the configuration in effect. None when they cannot be compared so."""
    try:
        same = (id(args[0]), args[1:], tuple(sorted(kwargs.items())), lowering_key.configuration(),
                os.environ.get("XLA_FLAGS", ""))
        hash(same)
    except Exception:  # noqa: BLE001 - unhashable, or a configuration known only by its address
        return None
    return same


def _held_in_process(program: Any, same: tuple[Any, ...] | None) -> tuple[Any, ...] | None:
    held = _state.in_process.get(same) if same is not None else None
    return held[1] if held is not None and held[0]() is program else None


def _keep_in_process(program: Any, same: tuple[Any, ...], result: tuple[Any, ...]) -> None:
    _state.in_process[same] = (weakref.ref(program), result)
    weakref.finalize(program, _state.in_process.pop, same, None)  # runs before the id can be reused


def _remember(entry: _Entry) -> None:
    with _state.lock:
        known = _state.entries.get(id(entry.module))
        if known is not None and known.module is entry.module:
            known.also.append((entry.path, entry.key))
            return
        if len(_state.entries) >= PENDING_LIMIT:
            _state.entries.pop(next(iter(_state.entries)))
        _state.entries[id(entry.module)] = entry


def _tell_listeners() -> None:
    for listener in HIT_LISTENERS:
        try:
            listener()
        except Exception:  # noqa: BLE001 - a listener's failure is not the lowering's
            log.debug("a lowered-module listener failed", exc_info=True)


def _refused(why: str) -> None:
    counts = _state.counts
    counts.refused += 1
    reason = why.split(" (")[0]
    counts.refusals[reason] = counts.refusals.get(reason, 0) + 1
    log.debug("lowering not cached: %s", why)


# --- entries on disk (their format: lowered_entries.py) -------------------------

def _load(path: str, key: str) -> tuple[Any, ...] | None:
    """The result JAX's lowering would return, from the entry at ``path``; None without a usable one."""
    try:
        with open(path, "rb") as f:
            data = f.read(entries.MAX_ENTRY_BYTES + 1)
    except OSError:
        return None
    try:
        header, module_bytes, key_bytes = entries.parse(data, key)
        layout = header["result"]
        rest = entries.rebuild(layout)
        if rest is None:
            raise ValueError("an unknown result layout")
        from jax._src.interpreters import mlir
        from jax._src.lib.mlir import ir

        if not module_bytes.startswith(entries.MLIR_BYTECODE):
            raise ValueError("not MLIR bytecode")
        context = mlir.make_ir_context()
        module = ir.Module.parse(module_bytes, context=context)
        if not ir.StringAttr(module.operation.attributes["sym_name"]).value:
            raise ValueError("a module without a name")
    except Exception as exc:  # noqa: BLE001 - a bad entry costs a lowering, never the run
        _state.counts.bad_entries += 1
        log.debug("lowered module entry %s unusable: %s", os.path.basename(path), exc)
        return None
    _remember(_Entry(module, path, key, layout, module_bytes, key_bytes))
    return (module, *rest)


def _write(entry: _Entry) -> None:
    for path, key in [(entry.path, entry.key), *entry.also]:
        partial = f"{path}+{os.getpid()}"  # a name the session's save leaves behind (mounts.ENTRY_NAME)
        try:
            os.makedirs(os.path.dirname(path), exist_ok=True)  # JAX makes its folder at its first entry
            with open(partial, "wb") as f:
                f.write(entries.encode(key, entry.layout, entry.module_bytes, entry.key_bytes))
            os.replace(partial, path)
        except OSError as exc:  # a read-only or full cache: this run lowered, the next one will too
            log.debug("lowered module not kept: %s", exc)
            try:
                os.unlink(partial)
            except OSError:
                pass
            return
        _state.counts.stored += 1


# --- the persistent cache's key --------------------------------------------------

class _Recorder:
    """A hash object that keeps what it is fed."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.data = io.BytesIO()

    def update(self, data: bytes) -> None:
        self.data.write(data)
        self.inner.update(data)


def _hash(original: Callable[..., None], hash_obj: Any, module: Any, *args: Any, **kwargs: Any) -> None:
    """JAX's hashing of a module into its persistent cache's key: from the entry when it holds the bytes,
    else as JAX does it, and then the bytes go into the entry."""
    from jax._src import config

    with _state.lock:
        entry = _state.entries.pop(id(module), None)
    if entry is None or entry.module is not module:
        original(hash_obj, module, *args, **kwargs)
        return
    with_locations = bool(config.compilation_cache_include_metadata_in_key.value)
    known = entry.key_bytes.get(with_locations)
    if known is not None:
        hash_obj.update(known)
        return
    recorder = _Recorder(hash_obj)
    original(recorder, module, *args, **kwargs)
    entry.key_bytes[with_locations] = recorder.data.getvalue()
    started = time.perf_counter()
    _write(entry)
    log.debug("kept lowered module %s in %.1f ms", os.path.basename(entry.path), (time.perf_counter() - started) * 1e3)
