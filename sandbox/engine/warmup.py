"""What a spare does before its code arrives: start the JAX backend and warm the common paths.

Runs in the spare's run process at low priority, while another run may be
executing beside it. Everything here is trusted code; the user's program
starts only after ``prepare`` has returned and the code has been handed over.
"""

from __future__ import annotations

import logging
import threading
import warnings

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


# A spare warms only once it has sat idle this long: in a burst, runs take spares the moment
# they are ready, and warming then would only take CPU from the runs.
IDLE_BEFORE_WARMING_S = 0.3
run_arrived = threading.Event()


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
    # Named so that the run's priority, restored when its code arrives, is not restored here: an
    # operation still warming then finishes at the spare's low priority instead of beside the run.
    _name_this_thread(WARM_THREAD_NAME)
    if run_arrived.wait(IDLE_BEFORE_WARMING_S):
        return
    from jaxplay.sandbox.caches import lowered_modules

    try:
        with lowered_modules.in_process_only():  # the session's cache holds what its runs lowered
            common_operations(stop=run_arrived)
    except Exception:  # noqa: BLE001 - warming is an optimization: the run compiles what it needs
        pass


WARM_THREAD_NAME = "jaxplay-warmup"  # the kernel keeps 15 bytes of a thread's name


def _name_this_thread(name: str) -> None:
    import ctypes

    try:
        ctypes.CDLL(None, use_errno=True).prctl(15, name.encode()[:15], 0, 0, 0)  # PR_SET_NAME
    except (OSError, AttributeError):
        pass


def reseed_numpy() -> None:
    """Fresh OS entropy for NumPy's global generator, as a new process would have.

    Python's ``random`` reseeds itself after fork; NumPy does not, so without this
    every run forked from one zygote would draw the same "random" numbers.
    """
    import numpy

    numpy.random.seed()
