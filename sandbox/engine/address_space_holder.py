"""A holder of the run's address space, so that the run's process exits at once and its status is known.

The worker reports a run done with the status the kernel gives the run's
init when it reaps the run's process: the program's own word about itself
is never taken. A process with a started JAX backend takes 10-250 ms to exit
(freeing a few hundred MiB of pages, longer on a busy host), and every run
would wait for that. So the run's process first starts a holder: a process
that shares its address space (``CLONE_VM``) and sleeps in ``pause`` with
every signal blocked. The run's exit then only drops a reference to its
memory: it is reaped within a millisecond or so, and the pages are freed when
the init kills the holder, after the status has gone out, while the rest of
the run tears down (the sandbox's next run still waits for that).

What the holder is, for whoever changes this:

- a child of the run's init (``CLONE_PARENT``), so the program's own
  ``os.wait`` never sees it, and the init reaps it with everything else;
- in the run's namespaces, seccomp filter and cgroup: the program can see it
  (one more process) and kill it, which only makes its own exit slow again;
- running no code: blocked in the ``pause`` system call, entered through
  libc's plain ``syscall`` (no cancellation point, no thread-local state), with
  every signal blocked, until SIGKILL;
- holding copies of the fds the run's process had when it was made, once its
  preparation was done: no fd of the worker's (the process points its stderr,
  the worker's log, at /dev/null first) and none of the run's pipes (they come
  later).

On architectures without a ``pause`` system call the run simply exits the slow way.
"""

from __future__ import annotations

import ctypes
import os
import signal

CLONE_VM = 0x00000100
CLONE_PARENT = 0x00008000
SYS_PAUSE = {"x86_64": 34}
STACK_BYTES = 64 << 10
PR_SET_NAME = 15
HOLDER_NAME = b"jaxplay-holder"

_stack: ctypes.Array[ctypes.c_char] | None = None  # the holder's stack: kept for the process's life


def start_holder() -> int | None:
    """In the run's process, before its run arrives: start the holder; its pid, or None."""
    global _stack
    number = SYS_PAUSE.get(os.uname().machine)
    if number is None:
        return None
    libc = ctypes.CDLL(None, use_errno=True)
    libc.clone.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int, ctypes.c_void_p]
    libc.clone.restype = ctypes.c_int
    _stack = ctypes.create_string_buffer(STACK_BYTES)
    top = (ctypes.addressof(_stack) + STACK_BYTES - 64) & ~0xF
    with open("/proc/self/comm", "rb") as comm:
        own_name = comm.read().strip()
    blocked = signal.pthread_sigmask(signal.SIG_BLOCK, signal.valid_signals())
    libc.prctl(PR_SET_NAME, HOLDER_NAME, 0, 0, 0)  # what ``ps`` calls it (the name is copied at clone)
    try:
        pid = libc.clone(ctypes.cast(libc.syscall, ctypes.c_void_p), top, CLONE_VM | CLONE_PARENT | signal.SIGCHLD,
                         ctypes.c_void_p(number))
    finally:
        libc.prctl(PR_SET_NAME, own_name, 0, 0, 0)
        signal.pthread_sigmask(signal.SIG_SETMASK, blocked)
    return pid if pid > 0 else None
