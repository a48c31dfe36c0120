"""Report every compilation through ``jax.jit`` and time every jitted call.

``install`` replaces ``jax.jit`` (so decorators, ``jax.jit(f)``,
``functools.partial(jax.jit, ...)``, ``from jax import jit`` and methods all
get it) with a function that returns a ``CapturedJit`` around JAX's own
jitted object. A call with concrete arguments:

1. runs the real jitted function inside a per-thread *call frame*, never
   blocking on its outputs (``jit_ready`` times dispatch-to-ready in a
   watcher thread, so asynchronous dispatch stays as the program made it);
2. the frame collects what happened during the call: phase durations from
   ``jax.monitoring`` (trace, lower, compile) and JAX's cache-miss
   explanation (``jax_explain_cache_misses``, whose log records are taken
   off the ``jax`` loggers instead of reaching stderr);
3. if JAX traced, lowered or compiled anything, this call compiled: the
   ``Traced``/``Lowered``/``Compiled`` objects are fetched from JAX's caches
   (``f.trace(*args).lower().compile()`` after the call costs ~0.2 ms and
   never re-traces) and queued for the renderer thread.

A call made while JAX is tracing (under ``grad``, ``vmap``, an outer ``jit``,
``scan`` ...) has tracer arguments: it is passed straight through, only
counted, and never reported with the plain function's IR, because what runs
is the enclosing computation (which is reported when *it* is jitted).

Each call's time, from dispatch to a ready result, is counted by
``jit_call_times``, which sends ``fn_timing`` and, at the end of the run, sets
each compilation's calls against its cost and the device's peak (``roofline``).

Threads: user threads run calls and own their frames (``threading.local``);
one daemon renderer thread (jit_render) turns queued compilations into ``compiled``
events (printing MLIR/HLO can take a while for big modules, so it stays off
the user's path); ``finish`` drains it, then sends the final ``fn_timing``.

With the run option ``passes`` (a page's request for XLA's passes of one
compilation) nothing is rendered: that compilation is handed to
``pass_pipeline``, which answers and ends the run.

Hooks for other captures: append ``hook(event, compiled)`` to
``COMPILED_HOOKS``. Each is called in the renderer thread with the event dict
before it is sent and the ``jax.stages.Compiled`` object, and may add fields
(e.g. input/output shardings, collectives). A hook that raises is recorded in
the event's ``capture_errors`` and the event is still sent.
"""

from __future__ import annotations

import contextlib
import functools
import logging
import os
import threading
import time
import types
from collections.abc import Callable, Iterator
from typing import Any

from jaxplay import worker_protocol as wp
from jaxplay.sandbox.caches import lowered_modules, lowering_key
from jaxplay.sandbox.capture import (
    jit_artifacts,
    jit_call_frames,
    jit_call_times,
    jit_functions,
    jit_libraries,
    jit_render,
    memory_view,
    oom_link,
    pass_pipeline,
    roofline,
)
from jaxplay.sandbox.capture.jit_functions import FunctionRecord

COMPILED_HOOKS: list[Callable[[dict[str, Any], Any], None]] = []

logger = logging.getLogger("jaxplay.sandbox.inspect")


class _State:
    def __init__(self) -> None:
        self.capturing = False
        self.original_jit: Callable[..., Any] | None = None
        self.records: dict[Any, FunctionRecord] = {}
        self.lock = threading.Lock()
        self.local = threading.local()
        self.listeners_registered = False
        # A ``passes`` request's compilation (pass_pipeline): when it comes, its pipeline is sent
        # and the run ends; until then nothing is rendered.
        self.passes_target: pass_pipeline.Target | None = None
        self.compiled_keys: list[str] = []


_state = _State()
_renderer = jit_render.Renderer(COMPILED_HOOKS)
_times = jit_call_times.CallTimes(_state)
_explain_filter = jit_call_frames.ExplainFilter(lambda: _state.capturing)


def _record_for(fun: Any) -> FunctionRecord:
    identity, name, line, module, transformed = jit_functions.source_of(fun)
    with _state.lock:
        record = _state.records.get(identity)
        if record is None:
            record = _state.records[identity] = FunctionRecord(len(_state.records) + 1, name, line, module, transformed)
        return record


class CapturedJit:
    """JAX's jitted function, reporting its compilations and call times.

    Everything else (``lower``, ``trace``, ``eval_shape``, ``clear_cache``,
    ``__wrapped__`` ...) is JAX's own object's, reached through attribute
    lookup, so user code sees the jitted function it asked for.
    """

    def __init__(self, jitted: Any, fun: Any) -> None:
        self._jitted = jitted
        self._fun = fun
        self._record = _record_for(fun)
        self._names: tuple[list[str], str | None] | None = None
        for attribute in ("__module__", "__name__", "__qualname__", "__doc__"):
            try:
                object.__setattr__(self, attribute, getattr(jitted, attribute))
            except AttributeError:
                pass
        self.__wrapped__ = fun

    def __getattr__(self, name: str) -> Any:
        if name == "_jitted":  # not yet set (copy, unpickling): no recursion
            raise AttributeError(name)
        return getattr(self._jitted, name)

    def __get__(self, instance: Any, owner: Any = None) -> Any:
        return self if instance is None else types.MethodType(self, instance)

    def __repr__(self) -> str:
        return repr(self._jitted)

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        if not _state.capturing or getattr(_state.local, "paused", False):
            return self._jitted(*args, **kwargs)
        user_call = jit_libraries.current()  # eqx.filter_jit / nnx.jit: the user's function and arguments
        record = self._record if user_call is None else _record_for(user_call.fun)
        if not _trace_state_clean():
            record.traced_calls += 1
            return self._jitted(*args, **kwargs)
        frame = jit_call_frames.CallFrame(record)
        stack = jit_call_frames.stack()
        stack.append(frame)
        start = time.perf_counter()
        try:
            with _locations_in_cache_key():
                out = self._jitted(*args, **kwargs)
        except Exception as exc:
            if oom_link.is_out_of_memory(exc):
                self._ran_out_of_memory(record, user_call, frame, exc, args, kwargs)
            raise
        finally:
            stack.pop()
        elapsed_s = time.perf_counter() - start
        compiled_now = bool(frame.phases_ms) or frame.persistent_cache_hit or frame.lowered_module_cached
        key = None if compiled_now else record.key_of_call(args, kwargs)
        failure = oom_link.Failure(record.fn, record.line, "execute", {"key": key})
        _times.count_call(record, start, out, compiled_now, key, failure)
        if compiled_now:
            try:
                with _locations_in_cache_key():
                    failure.key["key"] = self._queue_compilation(record, user_call, frame, elapsed_s, args, kwargs)
            except Exception:  # capture must never fail the user's call
                logger.debug("could not capture a compilation of %s", record.fn, exc_info=True)
        return out

    def _ran_out_of_memory(self, record: FunctionRecord, user_call: jit_libraries.UserCall | None,
                           frame: jit_call_frames.CallFrame, exc: Exception, args: tuple, kwargs: dict) -> None:
        """The call raised an out-of-memory error: note which compilation (the error event links to it)."""
        compiled = "compile" in frame.phases_ms or frame.persistent_cache_hit
        failure = oom_link.Failure(record.fn, record.line, "compile" if frame.phases_ms and not compiled else "execute")
        try:
            if compiled:  # compiled, then could not allocate: its compiled event is still worth sending
                with _locations_in_cache_key():
                    failure.key["key"] = self._queue_compilation(record, user_call, frame, 0.0, args, kwargs)
            elif failure.phase == "execute":
                failure.key["key"] = record.key_of_call(args, kwargs)
        except Exception:  # the user's error is what matters
            logger.debug("could not link an out-of-memory error to %s", record.fn, exc_info=True)
        oom_link.call_raised(exc, failure)

    def _queue_compilation(self, record: FunctionRecord, user_call: jit_libraries.UserCall | None,
                           frame: jit_call_frames.CallFrame, elapsed_s: float, args: tuple, kwargs: dict) -> str:
        """Queue this call's compilation for its ``compiled`` event; return its key."""
        # Cache hits only: the user's call just traced, lowered and compiled these.
        traced = self._jitted.trace(*args, **kwargs)
        lowered = traced.lower()
        compiled = lowered.compile()
        jit_info = getattr(self._jitted, "_jit_info", None)
        if user_call is not None:
            names = jit_artifacts.positional_names(user_call.fun)
            arguments = user_call.arguments(jit_info)
            outputs = user_call.outputs_text(traced)
        else:
            if self._names is None:
                self._names = jit_artifacts.positional_names(self._fun)
            names = self._names
            arguments = jit_artifacts.describe_arguments(names, jit_info, args, kwargs)
            outputs = jit_artifacts.outputs_text(traced)
        with _state.lock:
            previous = record.compiles[-1] if record.compiles else None
            key = f"{record.fn_id}.{len(record.compiles) + 1}"
            record.compiles.append((key, arguments))
            record.keys_by_signature[roofline.call_signature(args, kwargs)] = key
            compile_index = len(record.compiles)
        phases = {name: round(frame.phases_ms.get(name, 0.0), 3) for name in ("trace", "lower", "compile")}
        phases["execute"] = round(max(0.0, elapsed_s * 1e3 - sum(phases.values())), 3)
        reason = None
        explanation = jit_call_frames.explanation_of(frame.explanations, getattr(self._jitted, "__name__", None))
        if user_call is not None and (previous is None or not user_call.jax_explains):
            # The library's wrapper is one function to JAX: its first compilation of each of the
            # user's functions would read as "seen another function defined on the same line".
            explanation = None
        if explanation is not None:
            reason = jit_artifacts.clean_cache_miss_reason(
                explanation, first_compile=previous is None, positional=names[0],
                transformed=record.fn if record.transformed else None,
            )
        elif previous is not None:
            reason = jit_artifacts.signature_difference(arguments, previous[1])
        event: dict[str, Any] = {
            "type": "compiled", "key": key, "fn_id": record.fn_id, "fn": record.fn, "line": record.line,
            "module": None if record.line is not None else record.module,
            "compile_index": compile_index, "previous_key": previous[0] if previous else None,
            "signature": jit_artifacts.signature_text(arguments), "arguments": arguments,
            "outputs": outputs,
            "phases_ms": phases, "persistent_cache_hit": frame.persistent_cache_hit,
            "lowered_module_cached": frame.lowered_module_cached,
            "cache_miss_reason": reason,
        }
        target = _state.passes_target
        if target is not None:
            _state.compiled_keys.append(key)
            if key == target.key and record.fn == target.fn:
                pass_pipeline.respond(target, lowered, compiled, {
                    "key": key, "fn": record.fn, "fn_id": record.fn_id, "line": record.line,
                    "signature": event["signature"]})
            return key
        _renderer.submit(event, traced, lowered, compiled)
        return key


def out_of_memory_of(exc: BaseException) -> dict[str, Any] | None:
    """The jitted call an out-of-memory error came from, with its compilation's peak (oom_link)."""
    def settle() -> None:
        _times.wait_for_results()
        _renderer.drain()

    return oom_link.link_of(exc, settle) if _state.capturing else None


def _trace_state_clean() -> bool:
    """True when no transformation is tracing on this thread (bound at install)."""
    return True


def _locations_in_cache_key() -> contextlib.AbstractContextManager[Any]:
    """Source locations in the persistent cache's key for this call (bound at install).

    JAX's key strips locations by default, so after lines moved above a function a
    cache hit would hand back an executable whose HLO names the old lines, and
    Inspect's HLO would point at the wrong source. Only the functions Inspect
    shows pay for it (a recompile after such an edit); eager operations keep
    hitting whatever lines they came from.
    """
    return contextlib.nullcontext()


def wait_for_rendering() -> None:
    """Until every compilation queued so far has been rendered and sent (a profile's end needs them)."""
    _renderer.drain()


@contextlib.contextmanager
def capture_paused() -> Iterator[None]:
    """Calls on this thread pass straight through (timeit's timed loops)."""
    previous = getattr(_state.local, "paused", False)
    _state.local.paused = True
    try:
        yield
    finally:
        _state.local.paused = previous


def unwrap(fun: Any) -> Any:
    """JAX's own jitted object behind a ``CapturedJit`` (for timing loops)."""
    return fun._jitted if isinstance(fun, CapturedJit) else fun


def _capturing_jit(original: Callable[..., Any]) -> Callable[..., Any]:
    """``jax.jit`` that accepts exactly what this JAX's own accepts: a call without the function
    (``@jax.jit(static_argnames="n")``) is JAX's to answer, with the decorator it makes (JAX 0.7 and
    newer) or the TypeError it raises (older JAX), and never one this wrapper made up."""
    @functools.wraps(original)
    def jit(*args: Any, **kwargs: Any) -> Any:
        fun = args[0] if args else kwargs.get("fun")  # ``fun=`` is a keyword only where JAX allows it
        made = original(*args, **kwargs)
        if fun is None:  # JAX's decorator factory: capture what it makes of the function it is given
            return _capturing_decorator(made)
        return CapturedJit(made, fun)

    return jit


def _capturing_decorator(make: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(make)
    def decorate(fun: Any, /) -> Any:
        return CapturedJit(make(fun), fun)

    return decorate


def _sandbox_directory() -> str:
    return os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def leave_our_frames_out_of_locations() -> None:
    """The frames of this sandbox's own code (the runner, the spare, the captures, the playground helpers)
    and of Python's runpy are not the program's: JAX leaves them out of the source locations it writes
    into IR, as it does its own. A module's locations (and so the key of a lowered module,
    sandbox/caches/lowering_key.py) are then what they would be in plain Python, wherever the program
    was started from."""
    try:
        from jax._src import source_info_util
    except ImportError:
        return
    for path in (_sandbox_directory() + os.sep, "<frozen runpy>"):
        if path not in source_info_util._exclude_paths:
            source_info_util.register_exclusion(path)


def install(run: wp.SandboxRun) -> None:
    if not run.options.inspect:
        return
    import jax

    global _trace_state_clean, _locations_in_cache_key
    from jax._src import config as jax_config
    from jax._src.core import trace_state_clean

    _trace_state_clean = trace_state_clean
    _locations_in_cache_key = functools.partial(jax_config.compilation_cache_include_metadata_in_key, True)
    _renderer.limit_bytes = run.artifact_limit_bytes or jit_artifacts.DEFAULT_ARTIFACT_LIMIT_BYTES
    _times.start(run.device_peak)
    _state.passes_target = pass_pipeline.Target.of(run.options.passes)
    _state.compiled_keys = []
    if _times.roofline.hook not in COMPILED_HOOKS:
        COMPILED_HOOKS.append(_times.roofline.hook)
    for hook in (memory_view.add_memory_view, oom_link.note_peak):  # in this order: the second reads the first
        if hook not in COMPILED_HOOKS:
            COMPILED_HOOKS.append(hook)
    oom_link.clear()
    leave_our_frames_out_of_locations()
    if not _state.listeners_registered:
        jax.monitoring.register_event_duration_secs_listener(jit_call_frames.on_duration)
        jax.monitoring.register_event_listener(jit_call_frames.on_event)
        lowered_modules.HIT_LISTENERS.append(jit_call_frames.on_lowered_module_cached)
        lowering_key.SHOWN.append(jit_call_frames.capturing_a_call)
        for name in jit_call_frames.EXPLAIN_LOGGERS:
            logging.getLogger(name).addFilter(_explain_filter)
        _state.listeners_registered = True
    jax.config.update("jax_explain_cache_misses", True)
    jit_libraries.install()
    _state.original_jit = jax.jit
    jax.jit = _capturing_jit(jax.jit)
    _times.last_timing_emit = time.monotonic()
    _state.capturing = True


def finish() -> None:
    if not _state.capturing:
        return
    _times.wait_for_results()
    _renderer.drain()
    if _state.passes_target is not None:
        pass_pipeline.not_found(_state.passes_target, _state.compiled_keys)
        _state.passes_target = None
    _times.emit_fn_timing(final=True)
    _times.emit_roofline()
    uninstall()


def uninstall() -> None:
    """Put ``jax.jit`` back and forget this run (tests run several in one process)."""
    import jax

    jit_libraries.uninstall()
    if _state.original_jit is not None:
        jax.jit = _state.original_jit
        jax.config.update("jax_explain_cache_misses", False)
    _state.capturing = False
    _state.original_jit = None
    _state.records = {}
    oom_link.clear()
