"""What a spare does before its code arrives: start the JAX backend and warm the common paths.

Runs in the spare's run process at low priority, while another run may be
executing beside it. Everything here is trusted code; the user's program
starts only after ``prepare`` has returned and the code has been handed over.
"""

from __future__ import annotations

import ast
import logging
import os
import sys
import threading
import time
import warnings
from pathlib import Path
from typing import Any

from jaxplay.sandbox.caches import mounts as cache_mounts

# Errors of the persistent compilation cache are JAX's to recover from (it compiles instead):
# a bad or unwritable entry must not alarm the person whose run it is.
CACHE_WARNINGS = r"Error (reading|writing) persistent compilation cache entry"


def _without_cache_chatter(record: logging.LogRecord) -> bool:
    """JAX reports each persistent-cache hit and miss when cache misses are explained (Inspect turns
    that on): the program's output is not the place for them."""
    return "persistent compilation cache" not in record.getMessage().lower()


def configure_compile_cache() -> None:
    import os

    if not os.path.isdir(cache_mounts.JAX_CACHE):
        return  # no sandbox (development mode): no compile caches

    logging.getLogger("jax._src.compilation_cache").setLevel(logging.ERROR)
    logging.getLogger("jax._src.compiler").addFilter(_without_cache_chatter)
    use_persistent_cache(cache_mounts.JAX_CACHE)
    warnings.filterwarnings("ignore", message=CACHE_WARNINGS)


def use_persistent_cache(path: str) -> None:
    """Every compilation cached at ``path``, under a key that does not depend on ``path``.

    The shared cache is filled on the host at its own path and read in runs at
    another. With XLA's extra caches on, JAX puts a folder under the cache path
    into the compile options, and so into every key: no run ever found the fill's
    entries. Turned off, the keys match (the executables themselves are cached).
    """
    import jax

    from jaxplay.sandbox.caches import lowered_modules

    read_only_entries_are_hits()
    lowered_modules.install()  # a lowering JAX did in an earlier run is loaded, not done again
    jax.config.update("jax_compilation_cache_dir", path)
    jax.config.update("jax_persistent_cache_enable_xla_caches", "none")
    jax.config.update("jax_persistent_cache_min_compile_time_secs", 0)
    jax.config.update("jax_persistent_cache_min_entry_size_bytes", -1)


def read_only_entries_are_hits() -> None:
    """JAX before 0.5 stamps an entry's ``-atime`` file on every read, even with eviction off, and
    counts a failed stamp as a failed read: in a run, where the shared cache's entries are read-only,
    every hit became a compile. Newer JAX stamps only when it evicts; older JAX here does the same."""
    try:
        from jax._src import lru_cache
    except ImportError:
        return
    if jax_version() >= (0, 5) or getattr(lru_cache.LRUCache.get, "read_only_hits", False):
        return
    stamped_get = lru_cache.LRUCache.get

    def get(self: lru_cache.LRUCache, key: str) -> bytes | None:
        if self.eviction_enabled or not key:
            return stamped_get(self, key)
        try:
            return (self.path / f"{key}{lru_cache._CACHE_SUFFIX}").read_bytes()
        except FileNotFoundError:
            return None

    get.read_only_hits = True  # type: ignore[attr-defined]
    lru_cache.LRUCache.get = get  # type: ignore[method-assign]


def jax_version() -> tuple[int, ...]:
    import jax

    return tuple(int(part) for part in jax.__version__.split(".")[:2] if part.isdigit())


def common_operations(stop: threading.Event | None = None) -> None:
    """The eager operations nearly every program starts with, each compiled once here; between
    operations, ``stop`` (once set) ends the warming."""
    import jax
    import jax.numpy as jnp

    # Few on purpose: each costs ~10-40 ms of CPU in every spare; the first (JAX's one-time set-up
    # of tracing, lowering and dispatch, ~0.5 s) is what every program would otherwise wait for.
    operations = [
        lambda: jnp.ones((8,), jnp.float32).sum(),
        lambda: jnp.ones((8,), jnp.float32) * 2.0,
        lambda: jnp.arange(16.0).reshape(4, 4) @ jnp.arange(16.0).reshape(4, 4),
        lambda: jax.random.normal(jax.random.key(0), (4,)),
    ]
    for operation in operations:
        if stop is not None and stop.is_set():
            return  # the run has come: what is not warm yet it compiles itself, at full priority
        jax.block_until_ready(operation())


# The program a spare runs once its common operations are warm: the page's default example, the
# program nearly every new visitor runs first. The worker reads it from its own checkout (trusted)
# and passes it here; the zygote takes it out of the environment before any run exists.
PROGRAM_VARIABLE = "JAXPLAY_WARM_PROGRAM"
PROGRAM_FILENAME = "<jaxplay-warm>"
_program: list[str] = []


def program_from_examples(examples: Path) -> str:
    """The default example as a spare runs it (sleeps made instant), or "" where there is none (an
    installed worker ships no examples: its spares warm the common operations only)."""
    try:
        return without_sleeps((examples / "default.py").read_text(encoding="utf-8"))
    except OSError:
        return ""


def without_sleeps(code: str) -> str:
    """``time.sleep(`` made a call of the same length that returns at once: every column stays, so
    the source locations (part of a jitted function's cache key) are those of the run."""
    return code.replace("time.sleep(", "bool".ljust(len("time.sleep")) + "(")


def take_program_from_environment() -> None:
    """In the zygote: keep the worker's warm program and take it out of the environment runs will see."""
    _program[:] = [os.environ.pop(PROGRAM_VARIABLE, "")]


class _RunArrived(BaseException):
    """Raised inside the warm program when a run arrives: the program stops at its next line."""


def run_program(stop: threading.Event, program: str | None = None) -> None:
    """Run the warm program with its prints silenced, so every eager operation and JAX helper it uses
    is compiled (or loaded from the shared cache) and resident before a run needs it.

    A run that arrives stops it at the program's next line, its functions' lines included (a line does
    one operation at most). Only the program's own lines stop it: raising anywhere else could land
    in a finalizer, whose exception Python prints on what is by then the run's stderr."""
    if program is None:
        program = _program[0] if _program else ""
    if not program:
        return
    namespace: dict[str, object] = {"__name__": "__jaxplay_warm__", "print": lambda *_, **__: None}

    def stop_at_a_line(frame: Any, event: str, arg: object) -> Any:
        if event == "line" and stop.is_set():
            raise _RunArrived
        return stop_at_a_line

    def watch_the_programs_frames(frame: Any, event: str, arg: object) -> Any:
        return stop_at_a_line if frame.f_code.co_filename == PROGRAM_FILENAME else None

    sys.settrace(watch_the_programs_frames)
    try:
        for statement in ast.parse(program, PROGRAM_FILENAME).body:
            if stop.is_set():
                return
            exec(compile(ast.Module([statement], []), PROGRAM_FILENAME, "exec"), namespace)
    except _RunArrived:
        return
    finally:
        sys.settrace(None)
        # Its functions hold the namespace as their globals, a cycle that would keep its arrays alive
        # (``jax.live_arrays()``, ``gc.get_objects()``) until some collection in the run: gone now.
        namespace.clear()


# A spare warms only once it has sat idle this long: in a burst, runs take spares the moment
# they are ready, and warming then would only take CPU from the runs.
IDLE_BEFORE_WARMING_S = 0.3
# The warm program (~0.3 s of CPU) waits longer: a run 0.5 s after the last must not find it half done,
# while a person who reads the output and edits before pressing Run again finds it done.
IDLE_BEFORE_PROGRAM_S = 1.5
run_arrived = threading.Event()
# While warming, the interpreter hands the GIL over at this interval instead of Python's 5 ms: a run's
# code arriving (its thread waits in recvmsg) starts within it, not after the warming thread's slice.
WARMING_SWITCH_INTERVAL_S = 0.0002
_switching = threading.Lock()
_plain_switch_interval = sys.getswitchinterval()


# The longest a run waits for warming to stop: the warm program's current line (a few eager operations, or
# one jit's compile, tens of ms); only a host starved of CPU makes it longer, and then the run starts beside it.
WARMING_STOP_WAIT_S = 2.0


def end_warming(warming: threading.Thread | None) -> None:
    """In the run's thread, once its code has arrived (and the warming thread has the run's priority):
    warming stops at its next operation or line, and the program starts only once it has. Warming beside
    the program was visible in it: its compiles in the program's log (``jax_log_compiles``) and its
    ``jax.monitoring`` listeners, its thread in ``threading.enumerate()``. The GIL's switch interval is
    Python's again before the program starts."""
    with _switching:
        run_arrived.set()
    if warming is not None:
        warming.join(WARMING_STOP_WAIT_S)
    with _switching:
        sys.setswitchinterval(_plain_switch_interval)


def _switch_often_while_warming() -> bool:
    with _switching:
        if run_arrived.is_set():
            return False
        sys.setswitchinterval(WARMING_SWITCH_INTERVAL_S)
        return True


def prepare(initialize_backend: bool) -> threading.Thread | None:
    """Compile cache always; the backend and the warm operations unless the program configures
    them itself. The backend starts here; the operations warm in a thread, after a short idle
    wait, so a run that arrives first starts at once and a burst of runs is not slowed."""
    configure_compile_cache()
    if not initialize_backend:
        forget_plugin_search()
        return None
    import jax

    jax.devices()
    thread = threading.Thread(target=_warm_when_idle, name="jaxplay-warmup", daemon=True)
    thread.start()
    return thread


def forget_plugin_search() -> None:
    """The program starts this spare's backend itself, and may first point JAX at a plugin (its
    environment): the search the zygote did ahead of time is done again then, as plain Python does."""
    try:
        from jax._src import xla_bridge
    except ImportError:
        return
    if hasattr(xla_bridge, "_plugins_registered"):
        xla_bridge._plugins_registered = False


def _warm_when_idle() -> None:
    idle_since = time.monotonic()
    if run_arrived.wait(IDLE_BEFORE_WARMING_S) or not _switch_often_while_warming():
        return
    from jaxplay.sandbox.caches import lowered_modules

    try:
        with lowered_modules.in_process_only():  # the session's cache holds what its runs lowered
            common_operations(stop=run_arrived)
            if not run_arrived.wait(max(0.0, IDLE_BEFORE_PROGRAM_S - (time.monotonic() - idle_since))):
                run_program(stop=run_arrived)
    except Exception:  # noqa: BLE001 - warming is an optimization: the run compiles what it needs
        pass


def reseed_numpy() -> None:
    """Fresh OS entropy for NumPy's global generator, as a new process would have.

    Python's ``random`` reseeds itself after fork; NumPy does not, so without this
    every run forked from one zygote would draw the same "random" numbers.
    """
    import numpy

    numpy.random.seed()
