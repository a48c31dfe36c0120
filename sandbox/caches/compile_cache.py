"""The worker's compile caches on the host: where they live, who may write them, how they stay small.

Layout under ``--compile-cache-dir`` (one per host, shared by its workers)::

    shared/<environment>/     filled by trusted code (``fill``), read-only in every sandbox
    sessions/<name>/entries/  one browser session's compiled executables

Both hold JAX's entries (``<module>-<hash>-cache``) and, beside them, the
modules JAX lowered (``<module>-<key>-lowered``, ``lowered_modules.py``).

``<environment>`` names the JAX and jaxlib versions, the backend and the
device count, so an upgrade starts a new shared cache instead of loading
stale executables (JAX's own cache key also covers versions and XLA flags).
``<name>`` is the server's derived name for a session, never the session id.

Safety: the sandbox binds ``shared/<environment>`` read-only, so untrusted
code can never write what another session loads. Each session's entries
are written only by the run's trusted init (``sandbox/caches/mounts.py``),
and only for a browser session the server issued a cookie to (a connection
without one keeps nothing). The worker bounds what they cost the host, in
allocated blocks (at least one per file, so many tiny or sparse files cost
what they take on disk) and in files: per session (oldest entries go first),
and over all sessions (least recently used sessions go first, checked after
every run, so that many cookies cannot outrun it); sessions idle for longer
than ``compile_cache_idle_s`` are dropped whole.

A session's entries are code its own runs wrote. ``session_has_entries``
tells the sandbox, before a run starts, whether the run may load any: its
result is then never served to another session.
"""

from __future__ import annotations

import asyncio
import hashlib
import logging
import os
import shutil
import sys
import time
from importlib import metadata
from pathlib import Path

import jaxplay
from jaxplay.sandbox.caches import mounts
from jaxplay.sandbox.isolation.bwrap import Bind
from jaxplay.sandbox.runtimes import launch
from jaxplay.settings import Settings

log = logging.getLogger("jaxplay.sandbox")

FILLED_STAMP = ".filled"
SWEEP_EVERY_S = 60.0
GALLERY = jaxplay.IMPORT_ROOT / "frontend" / "src" / "examples"  # a checkout's; an installed worker has none


# Bumped when the keys of entries change: a host's earlier fill is then left behind, not trusted.
# 2: keys no longer depend on the cache's path (sandbox/engine/warmup.py); 3: the functions Inspect
# shows are keyed with their source locations (sandbox/capture/jit_capture.py); 4: lowered modules are
# kept beside the executables (sandbox/caches/lowered_modules.py), and locations leave our frames out;
# 5: eager operations and JAX's own functions keyed without locations, nor the paths of installed code;
# 6: the installed functions a program's parameters hold (a PRNG implementation's) are named from their
# installed root too, so an install elsewhere (another checkout or image on the host) meets the same keys.
KEYS_VERSION = "6"
# The code that writes the lowered modules' keys and entries is part of the shared folder's name as well:
# an upgrade that changes a key without the bump above starts a fill of its own instead of missing (or,
# worse, hitting) entries an older version wrote under other rules.
KEY_WRITERS = tuple(Path(__file__).parent / name
                    for name in ("lowering_key.py", "key_writer.py", "installed_code.py", "lowered_modules.py",
                                 "lowered_entries.py"))


def environment_name(settings: Settings, backend: str) -> str:
    parts = [KEYS_VERSION, metadata.version("jax"), metadata.version("jaxlib"), backend, str(settings.cpu_devices),
             key_writers_digest()]
    return hashlib.sha256("|".join(parts).encode()).hexdigest()[:16]


def key_writers_digest() -> str:
    digest = hashlib.sha256()
    for path in KEY_WRITERS:
        digest.update(path.read_bytes())
    return digest.hexdigest()[:16]


class CompileCaches:
    def __init__(self, settings: Settings, backend: str, sandbox_uid: int | None) -> None:
        self.root = settings.compile_cache_dir.expanduser().resolve()
        self.shared = self.root / "shared" / environment_name(settings, backend)
        self.sessions = self.root / "sessions"
        self.session_limit = settings.compile_cache_session_mb << 20
        self.session_files = settings.compile_cache_session_files
        self.total_limit = settings.compile_cache_total_mb << 20
        self.idle_s = settings.compile_cache_idle_s
        self.sandbox_uid = sandbox_uid
        self._last_sweep = 0.0
        # Each session's (last used, host cost), as this worker last measured it: the total is checked
        # after every run against it (a full scan every SWEEP_EVERY_S corrects it for other workers' saves).
        self._costs: dict[str, tuple[float, int]] = {}

    def prepare(self) -> None:
        """Make the folders: shared ones the worker's own, the sessions folder the sandbox user's."""
        self.shared.mkdir(parents=True, exist_ok=True)
        for path in (self.root, self.root / "shared", self.shared):
            path.chmod(0o755)
        self.sessions.mkdir(exist_ok=True)
        if self.sandbox_uid is not None:
            os.chown(self.sessions, self.sandbox_uid, self.sandbox_uid)
        self.sessions.chmod(0o700)

    def bwrap_binds(self) -> list[Bind]:
        return [("--ro-bind", str(self.shared), mounts.SHARED), ("--bind", str(self.sessions), mounts.SESSIONS),
                ("--dir", None, mounts.JAX_CACHE), ("--dir", None, mounts.RUN_LAYER)]

    def session_has_entries(self, session: str) -> bool:
        """Whether the session's earlier runs saved entries a run of it could load (and so execute)."""
        if not mounts.SESSION_NAME.fullmatch(session):
            return False
        try:
            with os.scandir(self.sessions / session / mounts.ENTRIES) as entries:
                return any(True for _ in entries)
        except OSError:
            return False

    # --- keeping sessions small ------------------------------------------------

    def after_run(self, session: str | None) -> None:
        now = time.monotonic()
        if now - self._last_sweep > SWEEP_EVERY_S:
            self._last_sweep = now
            self.drop_idle_sessions()
            self.cap_all_sessions()
        if session and mounts.SESSION_NAME.fullmatch(session):
            cost = self.cap_session(self.sessions / session / mounts.ENTRIES)
            self._costs[session] = (time.time(), 2 * mounts.BLOCK_BYTES + cost)
            self._evict_least_recently_used()

    def cap_session(self, entries: Path) -> int:
        """Oldest entries first, until the session fits its limits of host blocks and of files; its cost."""
        files = _entries(entries)
        total = sum(cost for _, cost, _ in files)
        count = len(files)
        for _, cost, path in sorted(files):
            if total <= self.session_limit and count <= self.session_files:
                break
            path.unlink(missing_ok=True)
            total -= cost
            count -= 1
        return total

    def drop_idle_sessions(self) -> None:
        cutoff = time.time() - self.idle_s
        for session in self._session_folders():
            try:
                if session.stat().st_mtime < cutoff and (session / mounts.ENTRIES).stat().st_mtime < cutoff:
                    shutil.rmtree(session, ignore_errors=True)
            except OSError:
                continue

    def cap_all_sessions(self) -> None:
        """Least recently used sessions first, until all of them together fit ``compile_cache_total_mb``
        (bounds the host however many sessions are made: a cookie costs a client nothing)."""
        self._costs = {}
        for session in self._session_folders():
            files = _entries(session / mounts.ENTRIES)
            last_used = max([mtime for mtime, _, _ in files], default=_mtime(session))
            self._costs[session.name] = (last_used, 2 * mounts.BLOCK_BYTES + sum(cost for _, cost, _ in files))
        self._evict_least_recently_used()

    def _evict_least_recently_used(self) -> None:
        total = sum(cost for _, cost in self._costs.values())
        for _, cost, name in sorted((used, cost, name) for name, (used, cost) in self._costs.items()):
            if total <= self.total_limit:
                break
            shutil.rmtree(self.sessions / name, ignore_errors=True)
            del self._costs[name]
            total -= cost

    def _session_folders(self) -> list[Path]:
        try:
            return [path for path in self.sessions.iterdir() if mounts.SESSION_NAME.fullmatch(path.name)]
        except OSError:
            return []

    # --- the shared cache --------------------------------------------------------

    def filled(self) -> bool:
        return (self.shared / FILLED_STAMP).exists()

    async def fill(self, env: dict[str, str], interpreter: str | None = None) -> None:
        """Compile the gallery and the common operations into the shared cache, once per environment.

        Trusted code only (this project's examples), in a process of its own with a
        clean environment, at the lowest priority: runs are served while it works.
        """
        if self.filled():
            return
        # ``interpreter``: a JAX runtime's Python (sandbox/runtimes/), which fills its own shared cache.
        if interpreter:  # maybe another Python version: it loads jaxplay alone
            command = launch.command(interpreter, "jaxplay.sandbox.engine.shared_cache_fill", jaxplay.IMPORT_ROOT,
                                     self.shared, GALLERY, flags=("-I",))
        else:
            command = [sys.executable, "-I", "-c", FILL_MAIN, str(jaxplay.IMPORT_ROOT), str(self.shared), str(GALLERY)]
        process = await asyncio.create_subprocess_exec(
            *command, env=env, stdin=asyncio.subprocess.DEVNULL, stdout=asyncio.subprocess.DEVNULL,
            stderr=asyncio.subprocess.PIPE, preexec_fn=lambda: os.nice(19))
        _, err = await process.communicate()
        if process.returncode != 0:
            log.warning("filling the shared compile cache failed (%s): %s", process.returncode,
                        err.decode(errors="replace")[-800:])
        else:
            log.info("shared compile cache ready: %s", self.shared)


def _entries(folder: Path) -> list[tuple[float, int, Path]]:
    """(modified, host cost, path) of each file: its allocated blocks, at least one (an inode and a block)."""
    found = []
    try:
        with os.scandir(folder) as entries:
            for entry in entries:
                try:
                    info = entry.stat(follow_symlinks=False)
                except OSError:
                    continue
                found.append((info.st_mtime, max(mounts.BLOCK_BYTES, info.st_blocks * 512), Path(entry.path)))
    except OSError:
        pass
    return found


def _mtime(path: Path) -> float:
    try:
        return path.stat().st_mtime
    except OSError:
        return 0.0


# The fill runs trusted code only, in a process of its own (sandbox/engine/shared_cache_fill.py).
FILL_MAIN = ("import sys; sys.path.insert(0, sys.argv[1]); "
             "from jaxplay.sandbox.engine.shared_cache_fill import fill_main; fill_main()")
