"""The compile caches as a run sees them: one directory, JAX's persistent cache, made of three layers.

Inside the sandbox (paths fixed; the worker binds the host folders, see
``sandbox/caches/compile_cache.py``)::

    /var/cache/jaxplay/shared     read-only: filled by trusted code at worker start
    /var/cache/jaxplay/sessions   every session's saved entries (the init alone sees it)
    /var/cache/jaxplay/run        this run's own tmpfs (made with the spare): the overlay's upper and work
    /var/cache/jaxplay/jax        what JAX uses: an overlay of
                                    upper  in ``run`` (size-capped)
                                    lower  this session's saved entries (only when the worker
                                           says the run may read them), then shared

At the start of a run the init (still privileged in the run's user
namespace) mounts the overlay, holds open the folders it will need after the
run, and covers ``sessions`` and ``run`` with empty read-only tmpfs mounts,
before the code is handed over: the program reaches its cache only through
the overlay, can read its own session's entries and the shared ones, and
writes only its tmpfs. After the run, the init (the program's processes all
killed) copies the new entries into the session's folder: regular files only
(opened without following links, checked once open), within a budget of
files and of what they cost the host. So nothing a program writes reaches
another session, and nothing reaches the host disk except through that copy.

What a session's saved entries are: code the session's own runs wrote, which
JAX loads and executes (its executables, and the lowered modules it compiles
or looks up instead of lowering, ``lowered_modules.py``). A run that reads them may compute what an earlier run
of its session planted; the worker decides beforehand whether a run reads
them (only when there are some) and reports it with the run's result, so
that such a result is never served to another session
(``server/runs/result_cache.py``).
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
# What one run may add to its session: files, and what they cost the host (the worker caps the total).
SAVE_BUDGET_FILES = 512
SAVE_BUDGET_BYTES = 64 << 20
BLOCK_BYTES = 4096  # a file costs the host an inode and at least a block, however small or sparse
SESSION_NAME = re.compile(r"[0-9a-f]{32}")
ENTRY_NAME = re.compile(r"[A-Za-z0-9_.\-]{1,200}")
DIRECTORY = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW


def host_cost(size: int) -> int:
    """What a copied entry of ``size`` bytes costs the host: its blocks (the copy is dense), at least one."""
    return max(BLOCK_BYTES, -(-size // BLOCK_BYTES) * BLOCK_BYTES)


class SessionCache:
    """Where a run's new entries go after it: held open by the init from before the code arrives."""

    def __init__(self, sessions_fd: int, name: str, upper_fd: int) -> None:
        self.sessions_fd = sessions_fd
        self.name = name
        self.upper_fd = upper_fd  # the overlay's upper folder, which the run itself can no longer reach

    def has_new_entries(self) -> bool:
        try:
            return bool(os.listdir(self.upper_fd))
        except OSError:
            return True  # unknown: assume so

    def save(self) -> int:
        """Copy the run's new entries into the session's folder; how many were left out for the budget."""
        files, spent, left_out = 0, 0, 0
        entries_fd: int | None = None
        try:
            for name in sorted(os.listdir(self.upper_fd)):
                if not ENTRY_NAME.fullmatch(name):
                    continue
                source = _open_regular(name, self.upper_fd)
                if source is None:
                    continue  # whiteouts, folders, links, pipes, devices stay behind
                with os.fdopen(source, "rb") as reader:
                    size = os.fstat(reader.fileno()).st_size
                    if files + 1 > SAVE_BUDGET_FILES or spent + host_cost(size) > SAVE_BUDGET_BYTES:
                        left_out += 1
                        continue
                    try:
                        if entries_fd is None:
                            entries_fd = _session_entries(self.sessions_fd, self.name)
                        _copy_into(reader, size, entries_fd, name)
                    except OSError:  # the host's disk is full, say: the run loses nothing but speed
                        left_out += 1
                        continue
                files, spent = files + 1, spent + host_cost(size)
        finally:
            for fd in (entries_fd, self.upper_fd, self.sessions_fd):
                if fd is not None:
                    os.close(fd)
        return left_out


def _open_regular(name: str, dir_fd: int) -> int | None:
    """``name`` opened for reading if it is a regular file itself (a link is not followed, a pipe
    never blocks), else None. The check is on the open file, so nothing can swap it in between."""
    try:
        fd = os.open(name, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_NOCTTY, dir_fd=dir_fd)
    except OSError:
        return None
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        os.close(fd)
        return None
    return fd


def _session_entries(sessions_fd: int, name: str) -> int:
    """The session's folder of entries, made now if this is its first saved entry."""
    session_fd = _made_and_opened(name, sessions_fd)
    try:
        return _made_and_opened(ENTRIES, session_fd)
    finally:
        os.close(session_fd)


def _made_and_opened(name: str, dir_fd: int) -> int:
    try:
        os.mkdir(name, 0o700, dir_fd=dir_fd)
    except FileExistsError:
        pass
    return os.open(name, DIRECTORY, dir_fd=dir_fd)


def _copy_into(reader, size: int, dir_fd: int, name: str) -> None:  # noqa: ANN001 - a binary file
    partial = f".{name}.partial"
    fd = os.open(partial, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, 0o600, dir_fd=dir_fd)
    with os.fdopen(fd, "wb") as target:
        left = size
        while left > 0 and (chunk := reader.read(min(1 << 20, left))):
            target.write(chunk)
            left -= len(chunk)
    os.replace(partial, name, src_dir_fd=dir_fd, dst_dir_fd=dir_fd)


UPPER, WORK = f"{RUN_LAYER}/upper", f"{RUN_LAYER}/work"


def mount_for_spare() -> None:
    """In the keeper, while the spare is prepared: until a run's overlay arrives, JAX reads the shared
    cache (read-only); the run's own layer is made now, so that the run's start only mounts the overlay."""
    if os.path.isdir(SHARED) and os.path.isdir(JAX_CACHE):
        ns.bind(SHARED, JAX_CACHE, read_only=True)
    if os.path.isdir(SESSIONS):
        ns.mount_tmpfs(RUN_LAYER, RUN_LAYER_BYTES, mode="0700")
        os.mkdir(UPPER)
        os.mkdir(WORK)


def mount_for_run(session: str | None, read_session: bool) -> SessionCache | None:
    """In the run's init, before the code is handed over. ``read_session``: the worker's word that the
    run may load its session's saved entries. None when the run keeps nothing (no session, or no cache)."""
    if not os.path.isdir(SESSIONS):
        return None  # a sandbox without compile caches (development mode)
    upper, work = UPPER, WORK
    lowers = [SHARED]
    saved: SessionCache | None = None
    if session and SESSION_NAME.fullmatch(session):
        saved = SessionCache(os.open(SESSIONS, DIRECTORY), session, os.open(upper, DIRECTORY))
        entries = os.path.join(SESSIONS, session, ENTRIES)
        if read_session and os.path.isdir(entries):
            lowers.insert(0, entries)
    try:
        ns.mount_overlay(JAX_CACHE, ":".join(lowers), upper, work)
    except OSError:
        ns.bind(upper, JAX_CACHE, read_only=False)  # no overlay here: a private cache for this run only
        saved = _forget(saved)
    # From here the run reaches its cache only through JAX_CACHE: it can neither see other sessions nor
    # swap the upper folder (for a link to a host file, say) before the init copies from it.
    for hidden in (SESSIONS, RUN_LAYER):
        ns.mount_tmpfs(hidden, 4096, mode="0", read_only=True)
    return saved


def _forget(saved: SessionCache | None) -> None:
    if saved is not None:
        os.close(saved.upper_fd)
        os.close(saved.sessions_fd)
    return None
