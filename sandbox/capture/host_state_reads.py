"""Which of the host's slowly changing state a run opened, as the kernel saw it (inotify).

The result cache shares a run with other people only once a second,
independent run printed the same (server/runs/result_verification.py). That
catches whatever differs between two runs, but some of the host's state
changes slowly: ``/proc/loadavg`` moves every 5 s, the pressure files every
2 s, so two runs a moment apart may read the same figures and agree. A run
that opened any of these files is therefore never shared, however it opened
them: ``open()``, ``ctypes``, NumPy's ``fromfile``, or a ``cat`` it started.
The hooks in ``determinism.py`` see only Python's own names; the kernel sees
every open.

Who does what::

    the run's init (sandbox/engine/spare.py), as the run is handed over:
        watch(run_pid) -> an inotify fd with one one-shot watch per file
        sends the fd to the worker on the door (``watching``)
    the worker (sandbox/engine/slot.py), once the run's pipes are closed:
        opened(fd, watched) -> the files opened meanwhile

The run cannot reach the fd: the init is not dumpable, and the worker is
outside the sandbox. Each watch is ``IN_ONESHOT``, so the kernel queues at
most one event per file whatever the run does. A file a new process of the
run opens about itself (``/proc/<child>/stat``) is not watched: it changes at
once, so the second run differs anyway.
"""

from __future__ import annotations

import ctypes
import os
import struct

# Host-wide files whose content is the host's load, memory or randomness, not the run's. Not
# /proc/stat: glibc reads it to count processors where /sys is not mounted (every run does); its
# counters change every clock tick, so a second run differs anyway.
HOST_FILES = (
    "/proc/loadavg", "/proc/uptime", "/proc/schedstat", "/proc/vmstat", "/proc/meminfo",
    "/proc/interrupts", "/proc/softirqs", "/proc/diskstats", "/proc/zoneinfo", "/proc/buddyinfo",
    "/proc/pressure/cpu", "/proc/pressure/io", "/proc/pressure/memory", "/proc/pressure/irq",
    "/proc/sys/fs/file-nr", "/proc/sys/fs/inode-nr", "/proc/sys/fs/dentry-state",
    "/proc/sys/kernel/random/entropy_avail", "/proc/sys/kernel/random/uuid",
)
# The run's own process: its start time, CPU time, context switches, memory.
PROCESS_FILES = ("stat", "status", "sched", "schedstat", "statm", "io")
IN_OPEN = 0x00000020
IN_ONESHOT = 0x80000000
IN_Q_OVERFLOW = 0x00004000
IN_NONBLOCK = os.O_NONBLOCK
IN_CLOEXEC = os.O_CLOEXEC
EVENT_HEADER = struct.Struct("iIII")  # wd, mask, cookie, len
OVERFLOW = "(more files than could be counted)"

_libc = ctypes.CDLL(None, use_errno=True)
_libc.inotify_add_watch.argtypes = [ctypes.c_int, ctypes.c_char_p, ctypes.c_uint32]


def watched_paths(run_pid: int) -> list[str]:
    return [*HOST_FILES, *(f"/proc/{run_pid}/{name}" for name in PROCESS_FILES)]


def watch(run_pid: int) -> tuple[int, dict[int, str]]:
    """An inotify fd watching every file of ``watched_paths`` that exists here, and which path each
    watch is. Raises OSError when the kernel refuses an instance (the run is then never shared)."""
    fd = _libc.inotify_init1(IN_NONBLOCK | IN_CLOEXEC)
    if fd < 0:
        errno = ctypes.get_errno()
        raise OSError(errno, f"inotify_init1: {os.strerror(errno)}")
    watched: dict[int, str] = {}
    for path in watched_paths(run_pid):
        wd = _libc.inotify_add_watch(fd, path.encode(), IN_OPEN | IN_ONESHOT)
        if wd >= 0:
            watched[wd] = path
        elif ctypes.get_errno() not in (2, 13):  # ENOENT, EACCES: a file this kernel does not offer to us
            errno = ctypes.get_errno()
            os.close(fd)
            raise OSError(errno, f"inotify_add_watch {path}: {os.strerror(errno)}")
    return fd, watched


def opened(fd: int, watched: dict[int, str]) -> list[str]:
    """The watched files opened since ``watch``, in the order first opened (reads what is queued)."""
    found: list[str] = []
    while True:
        try:
            data = os.read(fd, 64 << 10)
        except BlockingIOError:
            return found
        if not data:
            return found
        offset = 0
        while offset + EVENT_HEADER.size <= len(data):
            wd, mask, _, name_length = EVENT_HEADER.unpack_from(data, offset)
            offset += EVENT_HEADER.size + name_length
            path = OVERFLOW if mask & IN_Q_OVERFLOW else watched.get(wd)
            if path is not None and mask & (IN_OPEN | IN_Q_OVERFLOW) and path not in found:
                found.append(path)
