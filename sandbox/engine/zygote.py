"""The zygote: the one process per sandbox that pays for ``import jax``, and the mother of every run.

Runs inside the sandbox, started by the worker's ``WarmSandbox`` (its ``ZygoteLink``). It imports JAX but
never starts a backend (forking after that deadlocks the child). It keeps
one spare (``sandbox/engine/spare.py``: the run's own namespaces, a started and
warmed backend) and hands it the next run; while that run executes it
prepares the next spare. A program that configures JAX's backend itself gets
a spare made for it whose backend is not started. Tasks and ownership::

    zygote (pid 2 in the sandbox, never runs user code, non-dumpable)
      ├─ reads worker messages on the control socket (start, kill)
      ├─ waits for SIGCHLD through a wakeup pipe (single-threaded: fork-safe)
      ├─ owns the spare: one keeper process, replaced if it dies (the worker
      │  holds its door, and learns of a replacement from its ``spare``)
      └─ owns the running run's keeper: ``kill`` sends it SIGTERM, which
         ends the run's whole pid namespace. The run is over when its init
         reports every process of it gone (``gone``), or else when the keeper
         exits; the slow teardown of the three processes is not waited for.

What the zygote must never hold: the program or its options. Every spare it
forks inherits its whole heap, freed memory included, so whatever passed
through it would reach the next user's process. The zygote gives the worker
each spare's door as soon as it is forked and keeps no copy; the worker sends
the program through the door to that spare's init, and only names the run and
the spare to the zygote (``zygote_protocol``).

Nothing is cleaned up after a run: everything it could change lived in its
own namespaces, which the kernel tears down with its last process.
"""

from __future__ import annotations

import gc
import importlib
import os
import select
import signal
import socket
import sys
import time
from collections.abc import Callable
from typing import Any

from jaxplay.sandbox.engine import library_preload
from jaxplay.sandbox.engine import zygote_protocol as zp
from jaxplay.sandbox.engine.spare import Spare, fork_spare
from jaxplay.sandbox.isolation import namespaces, seccomp

SPARE_RETRY_S = (0.1, 0.5, 2.0, 5.0)
# A spare that lived this long was prepared: its death (killed from outside) is no failure to back off from.
SPARE_PREPARED_AFTER_S = 2.0


def preload() -> dict[str, str]:
    """Import what every run needs, stopping short of backend initialization."""
    import jax
    import jax.numpy  # noqa: F401
    import jaxlib

    from jaxplay.sandbox import capture  # noqa: F401
    from jaxplay.sandbox.engine import libraries, runner, warmup  # noqa: F401

    libraries.take_list_from_environment()
    warmup.take_program_from_environment()

    for name in capture.CAPTURE_MODULES:  # importing is ~20 ms a run otherwise; installing is per run
        importlib.import_module(name)
    preload_rich_display()
    library_preload.preload_libraries()
    preload_lowering()
    preload_plugin_search()
    preload_lowering_keys()
    return {"jax_version": jax.__version__, "jaxlib_version": jaxlib.__version__}


# MLIR contexts made ahead for a run's lowerings: JAX makes a fresh context for every module it lowers
# (~4 ms each, loading and registering every dialect: the default example lowers 22 modules). Each
# costs ~1.1 MB of the zygote's memory, shared by every fork until written.
IR_CONTEXTS_MADE_AHEAD = 32


def preload_lowering() -> None:
    """JAX makes its first MLIR context lazily, importing the MLIR dialects: ~150 ms of every run's
    first operation (half a small program's time). Making contexts here starts no backend, so each
    fork inherits them without the threads that would deadlock it (``contexts_made_ahead``)."""
    try:
        from jax._src.interpreters import mlir

        mlir.make_ir_context = contexts_made_ahead(mlir.make_ir_context, IR_CONTEXTS_MADE_AHEAD)
    except (ImportError, AttributeError):
        pass  # another JAX version: the run makes its own


def contexts_made_ahead(make: Callable[[], Any], count: int) -> Callable[[], Any]:
    """``make`` as JAX calls it, but the first ``count`` calls in each fork get a context made here.

    Each context is handed out once, never used before: a module lowered in it is the module a fresh
    context gives (the same text, locations and executable). Trusted code made them before any run
    existed, so they hold nothing of anyone's. Past ``count`` a run makes its own, as JAX does.
    """
    made = [make() for _ in range(count)]

    def make_ir_context() -> Any:
        try:
            return made.pop()
        except IndexError:
            return make()

    make_ir_context.__doc__ = make.__doc__
    return make_ir_context


def preload_lowering_keys() -> None:
    """What keying a lowered module needs (sandbox/caches/lowering_key.py), prepared once for every fork:
    without it each run's first lowerings would check JAX's lowering rules and paths again."""
    try:
        from jaxplay.sandbox.caches import lowered_modules, lowering_key

        lowered_modules.install()
        lowering_key.prepare()
    except (ImportError, AttributeError):
        pass  # another JAX version: a run that keys lowerings prepares what it needs itself


def preload_plugin_search() -> None:
    """JAX looks for PJRT plugins when a backend first starts, reading every installed distribution's
    entry points: ~7 ms of each spare's ~13 ms backend start. Where none is installed, the search
    is done here, once: it finds nothing, loads nothing and starts no backend. Where one is (a GPU
    or TPU plugin), or plugins come from the environment, each spare searches as before: loading a
    plugin is its backend's business. A spare whose backend the program starts searches again
    (``warmup.forget_plugin_search``), as plain Python would at that moment."""
    if os.environ.get("PJRT_NAMES_AND_LIBRARY_PATHS"):
        return
    try:
        from importlib.metadata import entry_points

        from jax._src import xla_bridge

        if xla_bridge.jax_plugins is not None or list(entry_points(group="jax_plugins")):
            return
        if hasattr(xla_bridge, "_plugins_registered"):
            xla_bridge._discover_and_register_pjrt_plugins()
    except (ImportError, AttributeError):
        pass  # another JAX version: each spare searches


def preload_rich_display() -> None:
    """matplotlib (with its font cache) and treescope: a plotting run drops from ~600 ms to ~100 ms.

    Treescope sets itself up for each library it supports the first time it renders (for NumPy and
    JAX it walks their public APIs, importing ``numpy.f2py`` on the way): ~100 ms of every run that
    ends on a value. Done here on a NumPy array, it starts no backend."""
    try:
        from jaxplay.sandbox.capture import display_figures

        display_figures.prepare_environment()
        import matplotlib.pyplot  # noqa: F401
        import numpy
        import treescope

        treescope.render_to_html(numpy.arange(3.0), ignore_exceptions=True)
    except ImportError:
        pass  # optional: runs import them on demand


class Zygote:
    def __init__(self, control: socket.socket, versions: dict[str, str], isolated: bool) -> None:
        self.isolated = isolated  # in a bwrap sandbox: each run gets namespaces of its own
        self.control = control
        self.versions = versions
        self.spare: Spare | None = None
        self.running: tuple[str, Spare] | None = None
        self.spare_failures = 0
        self.next_spare_at: float | None = None  # when to try again to fork a warm spare (none now)
        self.wake_r, self.wake_w = os.pipe()
        os.set_blocking(self.wake_w, False)
        signal.signal(signal.SIGCHLD, lambda *_: None)
        signal.set_wakeup_fd(self.wake_w)

    def fork_spare(self, warm: bool) -> Spare:
        # Every object the zygote holds now lives as long as the spare: out of its garbage collector's
        # sight, a run's full collection no longer walks the whole of JAX (~60 ms each), nor writes to
        # (and so copies) every page the fork shares with the zygote.
        gc.freeze()
        # A new spare must hold none of these: least of all the running run's socket to its init.
        own_fds = [self.wake_r, self.wake_w, self.control.fileno()]
        for spare in (self.spare, self.running[1] if self.running else None):
            own_fds += spare.fds() if spare is not None else []
        return fork_spare(warm, self.isolated, own_fds)

    def running_init(self) -> socket.socket | None:
        """The socket to the running run's init, while it is open (until the init's word or its end)."""
        if self.running is None or self.running[1].control.fileno() < 0:
            return None
        return self.running[1].control

    def serve(self) -> None:
        spare = self.fork_spare(warm=True)
        zp.send(self.control, {"type": "ready", "pid": os.getpid(), **self.versions})
        self.offer(spare)
        while True:
            running_init = self.running_init()
            watched = [self.control, self.wake_r] + ([running_init] if running_init else [])
            wait = None if self.next_spare_at is None else max(0.0, self.next_spare_at - time.monotonic())
            readable, _, _ = select.select(watched, [], [], wait)
            # The worker's word first: a ``start`` always comes before that spare's keeper can exit.
            if self.control in readable:
                message, fds = zp.receive(self.control)
                if message is None:
                    return  # the worker has gone: bwrap's init then ends the sandbox
                self.handle(message, fds)
            if running_init is not None and running_init in readable and running_init.fileno() >= 0:
                self.hear_from_running_init(running_init)
            if self.wake_r in readable:
                os.read(self.wake_r, 4096)
                self.reap()
            if self.next_spare_at is not None and time.monotonic() >= self.next_spare_at:
                self.prepare_next_spare()

    def prepare_next_spare(self) -> None:
        """Fork the next warm spare and offer it; when the sandbox cannot fork now (its processes all
        taken, say by a run's fork bomb), try again later, never blocking the worker's messages."""
        self.next_spare_at = None
        try:
            spare = self.fork_spare(warm=True)
        except OSError:
            self.retry_spare_later()
            return
        self.offer(spare)

    def retry_spare_later(self) -> None:
        delay = SPARE_RETRY_S[min(self.spare_failures, len(SPARE_RETRY_S) - 1)]
        self.spare_failures += 1
        self.next_spare_at = time.monotonic() + (delay if self.spare_failures > 1 else 0)

    def offer(self, spare: Spare) -> None:
        """Make ``spare`` the next run's, and give the worker its door (the zygote keeps no copy)."""
        self.spare = spare
        door, spare.door = spare.door, None
        assert door is not None
        try:
            zp.send(self.control, {"type": "spare", "pid": spare.pid}, [door.fileno()])
        finally:
            door.close()

    def handle(self, message: dict[str, Any], fds: list[int]) -> None:
        zp.close_all(fds)  # the worker sends none here
        kind, run_id = message.get("type"), message.get("run_id")
        if kind == "start" and type(run_id) is str:
            refusal = self.start(run_id, message.get("spare"), bool(message.get("unstarted_backend")))
            if refusal:
                zp.send(self.control, {"type": "exited", "run_id": run_id, "returncode": None, "signal": None,
                                       "max_rss_kb": 0, "refused": refusal})
        elif kind == "kill" and self.running and self.running[0] == run_id:
            _signal(self.running[1].pid, signal.SIGTERM)

    def start(self, run_id: str, spare_pid: Any, unstarted_backend: bool) -> str | None:
        """The worker has sent (or, for an unstarted backend, is about to send) ``run_id`` through a
        spare's door: that spare is now the running one. The run itself never comes this way.
        Returns why the start is refused, if it is."""
        if self.running is not None:
            return "a run is already in progress"
        if unstarted_backend:
            try:
                spare = self.fork_spare(warm=False)
            except OSError as exc:
                return f"the sandbox could not start a process for it ({exc.strerror})"
            door, spare.door = spare.door, None
            assert door is not None
            self.running = (run_id, spare)
            try:
                zp.send(self.control, {"type": "started", "run_id": run_id, "pid": spare.pid}, [door.fileno()])
            finally:
                door.close()
            return None
        if self.spare is None or self.spare.pid != spare_pid:
            return "its prepared process had just died; run it again"
        self.running, self.spare = (run_id, self.spare), None
        self.spare_failures = 0
        self.prepare_next_spare()  # beside the run, at low priority
        return None

    def reap(self) -> None:
        while True:
            try:
                pid, status, usage = os.wait4(-1, os.WNOHANG)
            except ChildProcessError:
                return
            if pid == 0:
                return
            if self.running and pid == self.running[1].pid:
                code = os.waitstatus_to_exitcode(status) if os.WIFEXITED(status) else None
                killed_by = os.WTERMSIG(status) if os.WIFSIGNALED(status) else None
                # The keeper mirrors the run's end as its exit code: a keeper that died of a signal was killed
                # from outside the run, or its init was (spare.keeper_main), not by the program.
                self.report_exit(code, killed_by, usage.ru_maxrss, killed_from_outside=killed_by is not None)
            elif self.spare and pid == self.spare.pid:
                self.replace_dead_spare()

    def hear_from_running_init(self, init: socket.socket) -> None:
        """The run's init says every process of the run is gone (before its own slow exit)."""
        message, fds = zp.receive(init)
        zp.close_all(fds)
        if message is None or message.get("type") != "gone" or type(message.get("status")) is not int:
            init.close()  # gone without a word: the keeper's exit reports the run
            return
        left_out = message.get("unsaved_entries")
        self.report_exit(message["status"], None, int(message.get("max_rss_kb") or 0),
                         left_out if type(left_out) is int else 0)

    def report_exit(self, code: int | None, killed_by: int | None, max_rss_kb: int, unsaved_entries: int = 0,
                    killed_from_outside: bool = False) -> None:
        assert self.running is not None
        (run_id, spare), self.running = self.running, None
        spare.control.close()  # closing twice is harmless
        if code is not None and code > 128:  # the keeper and the init mirror a signal as 128+N
            code, killed_by = None, code - 128
        zp.send(self.control, {"type": "exited", "run_id": run_id, "returncode": code, "signal": killed_by,
                               "max_rss_kb": max_rss_kb, "unsaved_entries": unsaved_entries,
                               **({"killed_from_outside": True} if killed_from_outside else {})})

    def replace_dead_spare(self) -> None:
        """The spare died before its run came (killed from outside, or it could not be prepared)."""
        assert self.spare is not None
        if time.monotonic() - self.spare.forked_at >= SPARE_PREPARED_AFTER_S:
            self.spare_failures = 0
        self.spare.control.close()
        self.spare = None
        self.retry_spare_later()  # at once the first time, then backing off


def _signal(pid: int, number: int) -> None:
    try:
        os.kill(pid, number)
    except ProcessLookupError:
        pass


def main() -> None:
    control = socket.socket(fileno=int(sys.argv[1]))
    isolated = "--isolated" in sys.argv[2:]
    seccomp.recording = "--record-syscalls" in sys.argv[2:]  # only ever given by scripts/record-syscalls
    seccomp.prepare()
    namespaces.set_dumpable(False)
    versions = preload()
    Zygote(control, versions, isolated).serve()


if __name__ == "__main__":
    main()
