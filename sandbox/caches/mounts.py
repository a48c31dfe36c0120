"""The compile caches as a run sees them: one directory, JAX's persistent cache, made of three layers.

Inside the sandbox (paths fixed; the worker binds the host folders, see
``sandbox/caches/compile_cache.py``)::

    /var/cache/jaxplay/shared     read-only: filled by trusted code at worker start
    /var/cache/jaxplay/sessions   every session's saved entries (the init alone sees it)
    /var/cache/jaxplay/jax        what JAX uses: an overlay of
                                    upper  a tmpfs of this run's own (size-capped)
                                    lower  this session's saved entries, then shared

At the start of a run the init (still privileged in the run's user
namespace) mounts the overlay and covers ``sessions`` with an empty
read-only tmpfs, before the code is handed over: the program can read its
own session's entries and the shared ones, and write only its tmpfs. After
the run, the init (the program's processes all killed) copies the new
entries into the session's folder, within a size budget. So nothing a
program writes reaches another session, and nothing reaches the host disk
except through that copy.
"""

from __future__ import annotations

import os
import re
import stat

from jaxplay.sandbox.isolation import namespaces as ns

ROOT = "/var/cache/jaxplay"
SHARED = f"{ROOT}/shared"
SESSIONS = f"{ROOT}/sessions"
JAX_CACHE = f"{ROOT}/jax"
RUN_LAYER = f"{ROOT}/run"
ENTRIES = "entries"
RUN_LAYER_BYTES = 256 << 20
SAVE_BUDGET_BYTES = 64 << 20  # what one run may add to its session (the worker caps the total)
SESSION_NAME = re.compile(r"[0-9a-f]{32}")
ENTRY_NAME = re.compile(r"[A-Za-z0-9_.\-]{1,200}")


class SessionCache:
    """A session's saved entries, held open so the init can save to them after the run."""

    def __init__(self, entries_fd: int, upper: str) -> None:
        self.entries_fd = entries_fd
        self.upper = upper

    def has_new_entries(self) -> bool:
        try:
            return bool(os.listdir(self.upper))
        except OSError:
            return True  # unknown: assume so

    def save(self) -> None:
        budget = SAVE_BUDGET_BYTES
        for name in sorted(os.listdir(self.upper)):
            path = os.path.join(self.upper, name)
            info = os.lstat(path)
            if not stat.S_ISREG(info.st_mode) or not ENTRY_NAME.fullmatch(name) or info.st_size > budget:
                continue  # whiteouts, folders, links and oversized files stay behind
            budget -= info.st_size
            _copy_into(path, self.entries_fd, name)
        os.close(self.entries_fd)


def _copy_into(path: str, dir_fd: int, name: str) -> None:
    partial = f".{name}.partial"
    with open(path, "rb") as source:
        fd = os.open(partial, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, 0o600, dir_fd=dir_fd)
        with os.fdopen(fd, "wb") as target:
            while chunk := source.read(1 << 20):
                target.write(chunk)
    os.replace(partial, name, src_dir_fd=dir_fd, dst_dir_fd=dir_fd)


def mount_for_run(session: str | None) -> SessionCache | None:
    """In the run's init, before the code is handed over. None when the run has no session cache."""
    if not os.path.isdir(SESSIONS):
        return None  # a sandbox without compile caches (development mode)
    ns.mount_tmpfs(RUN_LAYER, RUN_LAYER_BYTES, mode="0700")
    upper, work = f"{RUN_LAYER}/upper", f"{RUN_LAYER}/work"
    os.mkdir(upper)
    os.mkdir(work)
    saved: SessionCache | None = None
    lowers = [SHARED]
    if session and SESSION_NAME.fullmatch(session):
        entries = os.path.join(SESSIONS, session, ENTRIES)
        os.makedirs(entries, mode=0o700, exist_ok=True)
        saved = SessionCache(os.open(entries, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW), upper)
        lowers.insert(0, entries)
    try:
        ns.mount_overlay(JAX_CACHE, ":".join(lowers), upper, work)
    except OSError:
        ns.bind(upper, JAX_CACHE, read_only=False)  # no overlay here: a private cache for this run only
        saved = _forget(saved)
    ns.mount_tmpfs(SESSIONS, 4096, mode="0")
    ns.remount_read_only(SESSIONS)
    return saved


def _forget(saved: SessionCache | None) -> None:
    if saved is not None:
        os.close(saved.entries_fd)
    return None


def mount_for_spare() -> None:
    """In the keeper: until a run's overlay arrives, JAX reads the shared cache (read-only)."""
    if os.path.isdir(SHARED) and os.path.isdir(JAX_CACHE):
        ns.bind(SHARED, JAX_CACHE, read_only=True)
