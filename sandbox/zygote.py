"""The zygote: the one process per sandbox that pays for ``import jax``.

Runs inside the sandbox, started by the worker's ``Slot``. It imports jax but
never initializes a backend (forking after that deadlocks the child), keeps
one child pre-forked, and hands that child each run. Tasks and ownership::

    zygote (pid 2 in the sandbox's pid namespace, never runs user code)
      ├─ reads worker messages on the control socket (start, kill)
      ├─ waits for SIGCHLD through a wakeup pipe (single-threaded: fork-safe)
      └─ owns the run's child: after it exits, SIGKILLs every other process
         in the namespace, empties /tmp, and pre-forks the next child, so no
         run sees anything another run left behind.

The zygote is marked non-dumpable so user code (same uid) cannot ptrace it
or write its memory through /proc.
"""

from __future__ import annotations

import ctypes
import importlib
import os
import select
import shutil
import signal
import socket
import sys
from typing import Any

from sandbox import library_preload
from sandbox import zygote_protocol as zp

PR_SET_DUMPABLE = 4


def set_dumpable(value: bool) -> None:
    ctypes.CDLL(None, use_errno=True).prctl(PR_SET_DUMPABLE, int(value), 0, 0, 0)


def preload() -> dict[str, str]:
    """Import what every run needs, stopping short of backend initialization."""
    import jax
    import jax.numpy  # noqa: F401
    import jaxlib

    from sandbox import capture, runner  # noqa: F401

    for name in capture.CAPTURE_MODULES:  # importing is ~20 ms a run otherwise; installing is per run
        importlib.import_module(name)
    preload_rich_display()
    library_preload.preload_libraries()
    return {"jax_version": jax.__version__, "jaxlib_version": jaxlib.__version__}


def preload_rich_display() -> None:
    """matplotlib (with its font cache) and treescope: a plotting run drops from ~600 ms to ~100 ms."""
    try:
        from sandbox.capture import display_figures

        display_figures.prepare_environment()
        import matplotlib.pyplot  # noqa: F401
        import treescope  # noqa: F401
    except ImportError:
        pass  # optional: runs import them on demand


def reseed_numpy() -> None:
    """Fresh OS entropy for NumPy's global generator, as a new process would have.

    Python's ``random`` reseeds itself after fork; NumPy does not, so without this
    every run forked from one zygote would draw the same "random" numbers.
    """
    import numpy

    numpy.random.seed()


def child_main(handoff: socket.socket) -> None:
    """In the pre-forked child: wait for the run, then become it."""
    os.setsid()
    set_dumpable(True)
    try:
        with open("/proc/self/oom_score_adj", "w") as f:
            f.write("1000")  # if memory runs out, the run dies, not the zygote
    except OSError:
        pass
    message, fds = zp.receive(handoff)
    handoff.close()
    if message is None:
        os._exit(0)
    stdout_fd, stderr_fd, events_fd = fds
    os.dup2(stdout_fd, 1)
    os.dup2(stderr_fd, 2)
    os.close(stdout_fd)
    os.close(stderr_fd)
    os.environ.update(message.get("env", {}))
    from sandbox import events, limits, runner

    reseed_numpy()

    limits.apply_in_child(message.get("options", {}))
    events.open_channel(events_fd)
    runner.reopen_std_streams()
    if message.get("probe"):
        from sandbox import probe

        probe.report()
        os._exit(0)
    status = runner.execute(message["code"], message.get("options", {}))
    os._exit(status)


class Zygote:
    def __init__(self, control: socket.socket, versions: dict[str, str], isolated: bool) -> None:
        # isolated: we are in a pid namespace and a private /tmp of our own, so
        # "every process" and "all of /tmp" mean the sandbox's, not the host's.
        self.isolated = isolated
        self.control = control
        self.versions = versions
        self.ready: tuple[int, socket.socket] | None = None
        self.running: tuple[str, int] | None = None
        wake_r, self.wake_w = os.pipe()
        self.wake_r = wake_r
        os.set_blocking(self.wake_w, False)
        signal.signal(signal.SIGCHLD, lambda *_: None)
        signal.set_wakeup_fd(self.wake_w)

    def prefork(self) -> None:
        parent_end, child_end = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        pid = os.fork()
        if pid == 0:
            try:
                signal.set_wakeup_fd(-1)
                signal.signal(signal.SIGCHLD, signal.SIG_DFL)
                for fd in (self.wake_r, self.wake_w, self.control.fileno(), parent_end.fileno()):
                    os.close(fd)
                child_main(child_end)
            finally:
                os._exit(70)
        child_end.close()
        self.ready = (pid, parent_end)

    def serve(self) -> None:
        self.prefork()
        zp.send(self.control, {"type": "ready", "pid": os.getpid(), **self.versions})
        while True:
            readable, _, _ = select.select([self.control, self.wake_r], [], [])
            if self.wake_r in readable:
                os.read(self.wake_r, 4096)
                self.reap()
            if self.control in readable:
                message, fds = zp.receive(self.control)
                if message is None:
                    return  # the worker has gone: bwrap's init then ends the namespace
                self.handle(message, fds)

    def handle(self, message: dict[str, Any], fds: list[int]) -> None:
        kind = message.get("type")
        if kind == "start" and self.ready is not None and self.running is None:
            pid, handoff = self.ready
            self.ready = None
            zp.send(handoff, message, fds)
            handoff.close()
            for fd in fds:
                os.close(fd)
            self.running = (message["run_id"], pid)
            zp.send(self.control, {"type": "started", "run_id": message["run_id"], "pid": pid})
        elif kind == "start":
            for fd in fds:
                os.close(fd)
            zp.send(self.control, {"type": "exited", "run_id": message.get("run_id"), "returncode": None,
                                   "signal": None, "max_rss_kb": 0, "refused": "a run is already in progress"})
        elif kind == "kill" and self.running and self.running[0] == message.get("run_id"):
            self.kill_run(self.running[1])

    def reap(self) -> None:
        while True:
            try:
                pid, status, usage = os.wait4(-1, os.WNOHANG)
            except ChildProcessError:
                return
            if pid == 0:
                return
            if self.running and pid == self.running[1]:
                run_id = self.running[0]
                self.running = None
                zp.send(self.control, {
                    "type": "exited",
                    "run_id": run_id,
                    "returncode": os.waitstatus_to_exitcode(status) if os.WIFEXITED(status) else None,
                    "signal": os.WTERMSIG(status) if os.WIFSIGNALED(status) else None,
                    "max_rss_kb": usage.ru_maxrss,
                })
                self.clean_up(pid)
            elif self.ready and pid == self.ready[0]:
                self.ready = None  # the idle child died (killed from outside): fork another
                self.prefork()

    def kill_run(self, pid: int) -> None:
        if self.isolated:
            kill_everything()
        else:  # unsandboxed development mode: only the run's own process group
            try:
                os.killpg(pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass

    def clean_up(self, pid: int) -> None:
        self.kill_run(pid)
        while self.isolated:  # reap what the kill left
            try:
                os.waitpid(-1, 0)
            except ChildProcessError:
                break
        if self.isolated:
            empty_tmp()
        self.prefork()
        zp.send(self.control, {"type": "cleaned"})


def kill_everything() -> None:
    """SIGKILL every process in the sandbox but the zygote and bwrap's init."""
    try:
        os.kill(-1, signal.SIGKILL)
    except ProcessLookupError:
        pass


def mount_points_under(root: str) -> set[str]:
    """Top-level entries of ``root`` that hold a mount (the project, when it lives under /tmp)."""
    kept = set()
    with open("/proc/self/mountinfo") as f:
        for line in f:
            point = line.split()[4]
            if point.startswith(root + "/"):
                kept.add(point[len(root) + 1:].split("/", 1)[0])
    return kept


def empty_tmp(root: str = "/tmp") -> None:
    kept = mount_points_under(root)
    for name in os.listdir(root):
        if name in kept:
            continue
        path = os.path.join(root, name)
        if os.path.isdir(path) and not os.path.islink(path):
            shutil.rmtree(path, ignore_errors=True)
        else:
            try:
                os.unlink(path)
            except OSError:
                pass


def main() -> None:
    control = socket.socket(fileno=int(sys.argv[1]))
    isolated = "--isolated" in sys.argv[2:]
    set_dumpable(False)
    versions = preload()
    Zygote(control, versions, isolated).serve()


if __name__ == "__main__":
    main()
