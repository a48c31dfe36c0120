"""Notices when a program reads the clock or the OS's randomness, so its result is never cached.

The server answers a run from its result cache only when the recorded run
sent no ``nondeterministic`` event (docs/sharing.md explains the rule). This
module sends one such event per source, the first time the program uses it::

    {"type": "nondeterministic", "kind": "time" | "randomness", "source": "time.perf_counter", "line": 3}

``line`` is the program's line that led to the read (1-based), or null.

What counts, and how it is seen:

- the clock: ``time.time``/``monotonic``/``perf_counter``/... (and their
  ``_ns`` forms), ``time.sleep``, ``time.localtime``/``gmtime``/``ctime``/
  ``asctime``/``strftime`` without an explicit time, ``uuid.uuid1``,
  ``os.times``: wrapped here; ``timeit``'s timer too, which its module bound
  (``default_timer`` and the ``timer=`` defaults) when it was first imported,
  possibly before this module wrapped ``time`` (the zygote's matplotlib
  imports ``timeit``); ``datetime``'s ``now()``/``today()``/``utcnow()`` are
  C methods that cannot be wrapped, so calls of those names are found in the
  source instead;
- OS randomness: ``os.urandom``/``getrandom``, ``random``'s module functions
  unless ``random.seed(x)`` was called with a value, ``random.Random()`` and
  ``SystemRandom``/``secrets`` (through ``random._urandom``), NumPy's legacy
  global functions (``np.random.rand``, ...) unless ``np.random.seed(x)``, and
  every NumPy generator seeded from the OS (``default_rng()``,
  ``RandomState()``, ``PCG64()``, ...: all draw their entropy through
  ``numpy.random.bit_generator.randbits``), and opening ``/dev/urandom``.

A read counts when it was made on the program's behalf: walking the stack out
from the read reaches a frame of the program (``<playground>``) before a frame
of a package in ``PLUMBING``. JAX's compile timers, logging timestamps, lock
timeouts and temporary file names therefore do not count; a library the
program calls that reads the clock (a progress bar, ``playground.timeit``)
does. ``jax.random`` with an explicit key is deterministic and never counts.
"""

from __future__ import annotations

import ast
import functools
import linecache
import os
import random
import sys
import time
import types
import uuid
from collections.abc import Callable
from typing import Any

from jaxplay import worker_protocol as wp
from jaxplay.sandbox.output import events

USER_FILENAME = "<playground>"
EVENT_TYPE = "nondeterministic"
# Top-level packages whose own reads of the clock or the OS's randomness never reach the program's output.
PLUMBING = frozenset({
    "jax", "jaxlib", "jaxplay", "logging", "threading", "queue", "asyncio", "concurrent", "selectors",
    "subprocess", "socket", "ssl", "importlib", "tempfile", "multiprocessing", "weakref",
    "equinox",  # eqx.filter_jit reads os.urandom on every call, only to tag its own errors
})
MAX_STACK_WALK = 200
CLOCK_FUNCTIONS = ("time", "time_ns", "monotonic", "monotonic_ns", "perf_counter", "perf_counter_ns",
                   "process_time", "process_time_ns", "thread_time", "thread_time_ns", "clock_gettime",
                   "clock_gettime_ns", "sleep")
# These read the clock only when no time is given: (name, index of the time argument).
CLOCK_WHEN_NO_TIME = (("localtime", 0), ("gmtime", 0), ("ctime", 0), ("asctime", 0), ("strftime", 1))
DATETIME_NOW_METHODS = frozenset({"now", "today", "utcnow"})
RANDOM_DEVICES = frozenset({"/dev/urandom", "/dev/random", "/proc/sys/kernel/random/uuid"})
RANDOM_STATE_CALLS = frozenset({"seed", "getstate", "setstate"})
NUMPY_STATE_CALLS = frozenset({"RandomState", "seed", "get_state", "set_state", "get_bit_generator",
                               "set_bit_generator"})

_reported: set[str] = set()
# Whether the global generators' state was set by a seed (then their draws are reproducible).
_seeded = {"random": False, "numpy": False}
_originals: list[tuple[Any, str, Any]] = []
_original_defaults: list[tuple[Any, tuple[Any, ...]]] = []
_audit_hook_added = False


def prepare() -> None:
    """Wrap the clocks and random sources, once per process: a spare does it before code arrives
    (~5 ms a run otherwise, wrapping ~100 functions in a freshly forked process)."""
    if _originals:
        return
    _wrap_clock()
    _wrap_python_random()
    _wrap_numpy_random()
    _add_audit_hook()


def install(run: wp.SandboxRun) -> None:
    _reported.clear()
    _seeded.update(random=False, numpy=False)
    prepare()
    _report_datetime_calls_in_source()


def finish() -> None:
    """Nothing is pending: each source was reported when first used."""


# --- reporting ----------------------------------------------------------------

def program_line(frame: types.FrameType | None) -> int | None:
    """The program's line this call was made for, or None if it was made for JAX, the sandbox, ... ."""
    for _ in range(MAX_STACK_WALK):
        if frame is None:
            return None
        if frame.f_code.co_filename == USER_FILENAME:
            return frame.f_lineno
        module = frame.f_globals.get("__name__") or ""
        if module.partition(".")[0] in PLUMBING:
            return None
        frame = frame.f_back
    return None


def note(source: str, kind: str, frame: types.FrameType | None) -> None:
    """Report ``source`` once per run if ``frame``'s call was made on the program's behalf."""
    if source in _reported:
        return
    line = program_line(frame)
    if line is None:
        return
    _reported.add(source)
    events.emit({"type": EVENT_TYPE, "kind": kind, "source": source, "line": line})


def _replace(owner: Any, name: str, make: Callable[[Any], Any]) -> None:
    original = getattr(owner, name, None)
    if original is None:
        return
    _originals.append((owner, name, original))
    setattr(owner, name, make(original))


def uninstall() -> None:
    """Put every wrapped function back (for tests that install twice in one process)."""
    while _originals:
        owner, name, original = _originals.pop()
        setattr(owner, name, original)
    while _original_defaults:
        function, defaults = _original_defaults.pop()
        function.__defaults__ = defaults


def _replace_default(function: Any, original: Any, wrapped: Any) -> None:
    """A ``def f(timer=default_timer)`` keeps the object it was given at definition: swap that default."""
    defaults = getattr(function, "__defaults__", None)
    if not defaults or not any(d is original for d in defaults):
        return
    _original_defaults.append((function, defaults))
    function.__defaults__ = tuple(wrapped if d is original else d for d in defaults)


# --- the clock ----------------------------------------------------------------

def _clock_wrapper(source: str, original: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(original)
    def read_clock(*args: Any, **kwargs: Any) -> Any:
        if source not in _reported:
            note(source, "time", sys._getframe(1))
        return original(*args, **kwargs)
    return read_clock


def _clock_wrapper_when_no_time(source: str, original: Callable[..., Any], index: int) -> Callable[..., Any]:
    @functools.wraps(original)
    def maybe_read_clock(*args: Any, **kwargs: Any) -> Any:
        if source not in _reported and (len(args) <= index or args[index] is None):
            note(source, "time", sys._getframe(1))
        return original(*args, **kwargs)
    return maybe_read_clock


def _wrap_clock() -> None:
    for name in CLOCK_FUNCTIONS:
        _replace(time, name, lambda f, n=name: _clock_wrapper(f"time.{n}", f))
    for name, index in CLOCK_WHEN_NO_TIME:
        _replace(time, name, lambda f, n=name, i=index: _clock_wrapper_when_no_time(f"time.{n}", f, i))
    _replace(uuid, "uuid1", lambda f: _clock_wrapper("uuid.uuid1", f))
    _replace(os, "times", lambda f: _clock_wrapper("os.times", f))
    _wrap_timeit()


def _wrap_timeit() -> None:
    """``timeit`` bound ``time.perf_counter`` at its import; a program timing itself must still count."""
    timeit = sys.modules.get("timeit")
    if timeit is None:
        return  # imported later, it binds the wrapped time.perf_counter
    bound = timeit.default_timer
    _replace(timeit, "default_timer", lambda f: _clock_wrapper("timeit", f))
    for function in (timeit.Timer.__init__, timeit.timeit, timeit.repeat):
        _replace_default(function, bound, timeit.default_timer)


def _report_datetime_calls_in_source() -> None:
    """``datetime.now()`` and friends read the clock in C: look for calls of those names in the program."""
    entry = linecache.cache.get(USER_FILENAME)
    if not entry:
        return
    try:
        tree = ast.parse("".join(entry[2]))
    except (SyntaxError, ValueError):
        return
    for node in ast.walk(tree):
        if (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
                and node.func.attr in DATETIME_NOW_METHODS):
            source = f"{ast.unparse(node.func)}()"
            if source not in _reported:
                _reported.add(source)
                events.emit({"type": EVENT_TYPE, "kind": "time", "source": source, "line": node.lineno})


# --- OS randomness --------------------------------------------------------------

def _entropy_wrapper(source: str, original: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(original)
    def read_entropy(*args: Any, **kwargs: Any) -> Any:
        if source not in _reported:
            note(source, "randomness", sys._getframe(1))
        return original(*args, **kwargs)
    return read_entropy


def _draw_wrapper(source: str, generator: str, original: Callable[..., Any]) -> Callable[..., Any]:
    """A draw from a global generator: OS-seeded unless the program seeded it with a value."""
    @functools.wraps(original)
    def draw(*args: Any, **kwargs: Any) -> Any:
        if not _seeded[generator] and source not in _reported:
            note(source, "randomness", sys._getframe(1))
        return original(*args, **kwargs)
    return draw


def _seed_wrapper(source: str, generator: str, original: Callable[..., Any],
                  seed_index: int | None) -> Callable[..., Any]:
    """``seed(x)`` / ``set_state(s)`` make the global generator reproducible; ``seed()`` seeds it from the OS."""
    @functools.wraps(original)
    def set_seed(*args: Any, **kwargs: Any) -> Any:
        if seed_index is None:
            _seeded[generator] = True
        else:
            value = args[seed_index] if len(args) > seed_index else kwargs.get("seed", kwargs.get("a"))
            _seeded[generator] = value is not None
            if value is None:
                note(source, "randomness", sys._getframe(1))
        return original(*args, **kwargs)
    return set_seed


def _wrap_python_random() -> None:
    _replace(os, "urandom", lambda f: _entropy_wrapper("os.urandom", f))
    _replace(os, "getrandom", lambda f: _entropy_wrapper("os.getrandom", f))
    # SystemRandom and secrets read the OS through this module global.
    _replace(random, "_urandom", lambda f: _entropy_wrapper("random.SystemRandom", f))
    shared = random._inst  # type: ignore[attr-defined]
    for name in dir(random):
        value = getattr(random, name)
        if getattr(value, "__self__", None) is not shared or name.startswith("_"):
            continue
        if name == "seed":
            _replace(random, name, lambda f: _seed_wrapper("random.seed()", "random", f, 0))
        elif name == "setstate":
            _replace(random, name, lambda f: _seed_wrapper("random.setstate", "random", f, None))
        elif name not in RANDOM_STATE_CALLS:
            _replace(random, name, lambda f, n=name: _draw_wrapper(f"random.{n}", "random", f))

    original_seed = random.Random.seed

    @functools.wraps(original_seed)
    def instance_seed(self: random.Random, a: Any = None, *args: Any, **kwargs: Any) -> Any:
        if a is None and "random.Random()" not in _reported:
            note("random.Random()", "randomness", sys._getframe(1))
        return original_seed(self, a, *args, **kwargs)

    _originals.append((random.Random, "seed", original_seed))
    random.Random.seed = instance_seed  # type: ignore[method-assign]


def _wrap_numpy_random() -> None:
    try:
        import numpy.random
        from numpy.random import bit_generator, mtrand
    except ImportError:
        return
    # Every NumPy generator seeded from the OS draws its entropy through this module global.
    _replace(bit_generator, "randbits", lambda f: _entropy_wrapper("numpy.random (seeded from the OS)", f))
    for name in mtrand.__all__:
        if name in ("RandomState", "get_state", "get_bit_generator"):
            continue
        for owner in (numpy.random, mtrand):
            if name == "seed":
                _replace(owner, name, lambda f: _seed_wrapper("numpy.random.seed()", "numpy", f, 0))
            elif name in ("set_state", "set_bit_generator"):
                _replace(owner, name, lambda f, n=name: _seed_wrapper(f"numpy.random.{n}", "numpy", f, None))
            elif name not in NUMPY_STATE_CALLS:
                _replace(owner, name, lambda f, n=name: _draw_wrapper(f"numpy.random.{n}", "numpy", f))


def _add_audit_hook() -> None:
    # Audit hooks cannot be removed, so the hook is added once per process and reads module state.
    global _audit_hook_added
    if _audit_hook_added:
        return
    _audit_hook_added = True

    def on_audit(event: str, args: tuple[Any, ...]) -> None:
        if event != "open" or not args:
            return
        path = args[0]
        if isinstance(path, str | bytes) and os.fsdecode(path) in RANDOM_DEVICES:
            note(f"open({os.fsdecode(path)!r})", "randomness", sys._getframe(1))

    sys.addaudithook(on_audit)
