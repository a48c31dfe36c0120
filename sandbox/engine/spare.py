"""A spare: the three processes one run gets, made before the run's code arrives.

The zygote forks a spare while the previous run executes (at low priority).
The keeper and the init are here; the run's own process is in run_process.py::

    zygote ─ keeper   made the run's namespaces (user, mount, IPC, pid, net, UTS),
              │       fresh /tmp and /dev/shm, read-only /dev; waits; mirrors the
              │       run's exit; on SIGTERM kills the init (and so everything)
              └ init  pid 1 of the run's pid namespace, non-dumpable, a session of
                  │   its own; mounts /proc; waits on its door for the worker's
                  │   ``run``, mounts the session's compile cache, hands the run on,
                  │   drops its capabilities, reaps; after the run kills what is left
                  │   and saves new cache entries
                  ├ run   a session and process group of its own; drops every
                  │       capability before any thread exists, starts the JAX
                  │       backend and warms it, waits for code, runs it once
                  │       (``run_process``)
                  └ holder  shares the run's address space, runs nothing, so the
                            run's exit is quick (``address_space_holder``)

Sockets: ``door`` (worker <-> init: the run in; out, a watch on what of the host's
state the run opens (``host_state_reads``), then the run's ``ended``; the
zygote hands the worker's end over as soon as the spare is forked and never
reads it), ``control`` (zygote <-> init: the init's ``gone``, or EOF when either
side goes), and the init's own socket to the run.

Invariants, each relied on elsewhere:

- The program reaches the init and the run through the door alone: no process
  that forks spares (the zygote) ever holds it (``zygote_protocol``). The init
  forks nothing after it arrives, and the keeper never sees it.
- A spare holds no fd of any other spare or run: each fork closes the zygote's.
- The run's status is the kernel's: the init reports the run's process's exit
  to the worker (``ended``, on the door) and, once every process of the run is
  reaped, to the zygote (``gone``). The run holds neither socket.
- Nothing the run signals reaches the keeper or the zygote: the run and the init
  each lead a session (so a process group) of their own, and the keeper, the
  zygote and the sandbox's init are outside the run's pid namespace.
- Nothing a run leaves behind survives it: its files live on tmpfs mounts of its
  own mount namespace, its IPC objects in its IPC namespace, its processes in its
  pid namespace, which the kernel empties when the init exits. The sandbox's own
  pid 1 and the zygote are outside the run's pid namespace, so the run cannot see
  them, signal them or read their memory.
"""

from __future__ import annotations

import os
import resource
import select
import signal
import socket
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from jaxplay.sandbox.caches import mounts as cache_mounts
from jaxplay.sandbox.capture import host_state_reads
from jaxplay.sandbox.engine import zygote_protocol as zp
from jaxplay.sandbox.engine.run_process import restore_priority, run_main
from jaxplay.sandbox.isolation import namespaces as ns

TMP_SIZE_BYTES = 512 << 20
SHM_SIZE_BYTES = 64 << 20
EXIT_SPARE_FAILED = 71  # the spare could not be prepared: the run never started


@dataclass
class Spare:
    pid: int  # the keeper, the zygote's child
    control: socket.socket  # to the init: its ``gone``, or EOF when it has gone
    door: socket.socket | None  # the worker's end of the init's door, held here until the spare is taken
    warm: bool
    forked_at: float = field(default_factory=time.monotonic)

    def fds(self) -> list[int]:
        return [sock.fileno() for sock in (self.control, self.door) if sock is not None and sock.fileno() >= 0]


def _fork(role: str, main: Callable[[], int], before: Callable[[], None] = lambda: None) -> int:
    """Fork; the child runs ``before`` then ``main`` and exits with its status, never returning.

    A failure is one line on stderr (the worker's log) and exit status EXIT_SPARE_FAILED.
    """
    pid = os.fork()
    if pid == 0:
        status = EXIT_SPARE_FAILED
        try:
            before()
            status = main()
        except BaseException as exc:  # noqa: BLE001 - the reason goes to the worker's log
            print(f"spare {role}: {type(exc).__name__}: {exc}", file=sys.stderr, flush=True)
        finally:
            os._exit(status)
    return pid


def fork_spare(warm: bool, isolated: bool, zygote_fds: list[int]) -> Spare:
    """In the zygote: fork a keeper; it prepares the spare in the background.

    ``zygote_fds`` are every fd the zygote holds that a spare must not: its control socket
    and every other spare's and run's sockets. ``isolated`` is False only without a sandbox
    (development mode): then no namespaces are made.
    """
    zygote_end, init_end = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    worker_door, init_door = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)

    def leave_the_zygote() -> None:
        signal.set_wakeup_fd(-1)
        signal.signal(signal.SIGCHLD, signal.SIG_DFL)
        for fd in (*zygote_fds, zygote_end.fileno(), worker_door.fileno()):
            os.close(fd)

    try:
        pid = _fork("keeper", lambda: keeper_main(init_end, init_door, warm, isolated), leave_the_zygote)
    except OSError:
        _close_sockets(zygote_end, worker_door, init_end, init_door)
        raise
    init_end.close()
    init_door.close()
    return Spare(pid, zygote_end, worker_door, warm)


def keeper_main(init_end: socket.socket, door: socket.socket, warm: bool, isolated: bool) -> int:
    os.setsid()
    ns.set_dumpable(True)  # the zygote is not; a non-dumpable process may not write its own id maps
    if isolated:
        ns.unshare_run_namespaces(os.getuid(), os.getgid())
        fresh_writable_places()
    init_pid = _fork("init", lambda: init_main(init_end, door, warm, isolated))
    init_end.close()
    door.close()
    # The zygote's kill: the init is pid 1 of the run's namespace, so killing it ends every process
    # there; without a sandbox, the init ends the run's session itself (``_end_the_run_on_term``).
    ending: list[bool] = []

    def end_the_run(*_: object) -> None:
        ending.append(True)
        _kill(init_pid) if isolated else _signal(init_pid, signal.SIGTERM)

    signal.signal(signal.SIGTERM, end_the_run)
    _, status = os.waitpid(init_pid, 0)
    if isolated and os.WIFSIGNALED(status) and not ending:
        # Nothing in the run can kill its init (pid 1 of its namespace takes from inside only the signals
        # it handles): it was killed from outside (the host's OOM killer, an operator). The keeper dies of
        # the same signal, which the zygote reports as such, not as the program's end.
        if os.WTERMSIG(status) != signal.SIGKILL:
            signal.signal(os.WTERMSIG(status), signal.SIG_DFL)
        os.kill(os.getpid(), os.WTERMSIG(status))
    return _mirror(status)


def fresh_writable_places() -> None:
    """Fresh /tmp and /dev/shm for this run alone; /dev itself read-only.

    The project may live under /tmp (bound there by bwrap): keep those binds
    by holding them open across the new tmpfs and binding them back.
    """
    kept = _mounts_under("/tmp")
    held = {path: os.open(path, os.O_PATH) for path in kept}
    ns.mount_tmpfs("/tmp", TMP_SIZE_BYTES)
    # The folders leading to those binds (/tmp/checkout, its .venv, ...) get a tmpfs of their
    # own, made read-only once the binds are in place: nothing on sys.path may be writable.
    skeletons = sorted({"/tmp/" + path[len("/tmp/"):].split("/", 1)[0] for path in kept if path.count("/") > 2})
    for top in skeletons:
        os.mkdir(top)
        ns.mount_tmpfs(top, 1 << 20, mode="0755")
    for path, fd in held.items():
        if os.path.isdir(f"/proc/self/fd/{fd}"):
            os.makedirs(path, exist_ok=True)
        else:  # a single exposed file (a venv's python, a one-module distribution)
            os.makedirs(os.path.dirname(path), exist_ok=True)
            os.close(os.open(path, os.O_WRONLY | os.O_CREAT, 0o444))
        ns.bind(f"/proc/self/fd/{fd}", path, read_only=True)
        os.close(fd)
    for top in skeletons:
        ns.remount_read_only(top)
    ns.remount_read_only("/dev")
    ns.mount_tmpfs("/dev/shm", SHM_SIZE_BYTES)
    cache_mounts.mount_for_spare()
    os.chdir("/tmp")


def _mounts_under(root: str) -> list[str]:
    """Top-most mount points below ``root`` (nested ones come along with a recursive bind)."""
    points: list[str] = []
    with open("/proc/self/mountinfo") as f:
        for line in f:
            point = line.split()[4]
            if point.startswith(root + "/"):
                points.append(point)
    return [p for p in sorted(points) if not any(p.startswith(q + "/") for q in points if q != p)]


def init_main(zygote_end: socket.socket, door: socket.socket, warm: bool, isolated: bool) -> int:
    ns.set_parent_death_signal(signal.SIGKILL)
    os.setsid()  # the keeper's process group is the keeper's alone
    if isolated:
        ns.mount_proc()
        ns.set_dumpable(False)
        # As pid 1 of the run's namespace, the init gets from inside it only the signals it handles:
        # none but SIGCHLD (Python's SIGINT handler would let the run interrupt it).
        signal.signal(signal.SIGINT, signal.SIG_DFL)
    init_end, run_end = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    run_pid = _fork("run", lambda: run_main(run_end, warm, isolated),
                    lambda: _close_sockets(zygote_end, door, init_end))
    run_end.close()
    if not isolated:
        signal.signal(signal.SIGTERM, lambda *_: _end_the_run_on_term(run_pid))
    wake_r, wake_w = os.pipe()
    os.set_blocking(wake_w, False)
    signal.signal(signal.SIGCHLD, lambda *_: None)
    signal.set_wakeup_fd(wake_w)
    session: cache_mounts.SessionCache | None = None
    while True:  # until the worker's run comes, or the run process dies while it is prepared
        readable, _, _ = select.select([door, zygote_end, wake_r], [], [])
        if wake_r in readable:
            os.read(wake_r, 512)
            status = _reap(run_pid)
            if status is not None:
                return status
        if zygote_end in readable:
            return 0  # the zygote has gone, or dropped this spare (it never writes before the run)
        if door in readable:
            message, fds = zp.receive(door)
            if message is None:
                return 0  # the worker let this spare go (or closed the sandbox)
            if isolated:
                run = zp.run_of(message)
                session = cache_mounts.mount_for_run(run.options.compile_cache, run.compile_cache_read)
            restore_priority(run_pid)  # a run waiting for its spare must not wait at the spare's priority
            _offer_host_state_watch(door, run_pid)  # before the run's process has the code
            zp.send(init_end, message, fds)
            zp.close_all(fds)
            init_end.close()
            break
    if isolated:
        ns.drop_all_capabilities()
    signal.set_wakeup_fd(-1)
    signal.signal(signal.SIGCHLD, signal.SIG_DFL)  # from here a blocking wait: no handler, no wake-up pipe
    status = _await_run_exit(run_pid)
    if session is None or not session.has_new_entries():
        # The kernel's word on the run's process, final whatever the program said: the worker may
        # report the run done once its pipes are closed. A run whose new cache entries must be saved
        # first waits for ``gone``, so the session's next run (in any sandbox) finds them.
        _report(door, "ended", status)
    door.close()
    if isolated:
        _end_every_process()  # what the run left behind (the holder included), before the cache is read
    left_out = session.save() if session is not None else 0
    if isolated:
        # Nothing of the run is left: the zygote may report it over now, while this process, the
        # keeper and the namespaces tear down (~20 ms of unmapping a zygote-sized address space).
        _report(zygote_end, "gone", status, unsaved_entries=left_out)
    zygote_end.close()
    return status


def _offer_host_state_watch(door: socket.socket, run_pid: int) -> None:
    """Give the worker a kernel watch on the host's changing state and the run's own /proc files
    (``host_state_reads``): it reads what the run opened once the run is over."""
    try:
        fd, watched = host_state_reads.watch(run_pid)
    except OSError as exc:
        zp.send(door, {"type": "watching", "paths": None, "error": str(exc)})  # the run is never shared
        return
    try:
        zp.send(door, {"type": "watching", "paths": {str(wd): path for wd, path in watched.items()}}, [fd])
    finally:
        os.close(fd)


def _close_sockets(*sockets: socket.socket) -> None:
    for sock in sockets:
        sock.close()


def _end_the_run_on_term(run_pid: int) -> None:
    """Without a sandbox (development mode): the zygote's kill ends the run's session, then the init."""
    _signal(-run_pid, signal.SIGKILL)
    os._exit(128 + signal.SIGTERM)


def _report(to: socket.socket, kind: str, status: int, **extra: int) -> None:
    try:
        zp.send(to, {"type": kind, "status": status,
                     "max_rss_kb": resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss, **extra})
    except OSError:
        pass  # the zygote or the worker has gone: the keeper's exit is all there is to report


def _end_every_process() -> None:
    """As pid 1: kill every other process of the run's pid namespace and reap it. Orphans become
    this process's children, so no child left means no process left."""
    while True:
        _kill(-1)
        try:
            os.waitpid(-1, 0)
        except ChildProcessError:
            return


def _reap(run_pid: int) -> int | None:
    """Reap every other exited child; the run's exit status once the run itself has ended.

    The run's own zombie is left in place (``WNOWAIT``): reaping a process invalidates its /proc
    entries, which takes tens of ms for a run's process (hundreds on a busy host). The status is
    final all the same; ``_end_every_process`` reaps the run later, off the run's critical path.
    """
    while True:
        status = _exit_status(run_pid)
        if status is not None:
            return status
        try:
            pid, wait_status = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return None
        if pid == 0:
            return None
        if pid == run_pid:  # it ended between the two calls
            return _mirror(wait_status)


def _await_run_exit(run_pid: int) -> int:
    """Block until the run's process has exited, reaping any other child (an orphan of the run) that
    exits first; the run's own zombie is left for ``_end_every_process`` (see ``_reap``)."""
    while True:
        try:
            info = os.waitid(os.P_ALL, 0, os.WEXITED | os.WNOWAIT)
        except ChildProcessError:
            return EXIT_SPARE_FAILED  # cannot happen while the run's process is our child
        except InterruptedError:
            continue
        assert info is not None
        if info.si_pid == run_pid:
            return info.si_status if info.si_code == os.CLD_EXITED else 128 + info.si_status
        try:
            os.waitpid(info.si_pid, 0)
        except ChildProcessError:
            pass


def _exit_status(pid: int) -> int | None:
    """How ``pid`` ended, if it has (as ``_mirror`` gives it), leaving it to be reaped."""
    try:
        info = os.waitid(os.P_PID, pid, os.WEXITED | os.WNOHANG | os.WNOWAIT)
    except ChildProcessError:
        return None
    if info is None:
        return None
    return info.si_status if info.si_code == os.CLD_EXITED else 128 + info.si_status


def _mirror(status: int) -> int:
    """Exit the way the child did: the same code, or the same signal as 128+N."""
    if os.WIFSIGNALED(status):
        return 128 + os.WTERMSIG(status)
    return os.waitstatus_to_exitcode(status)


def _kill(pid: int) -> None:
    _signal(pid, signal.SIGKILL)


def _signal(pid: int, number: int) -> None:
    try:
        os.kill(pid, number)
    except (ProcessLookupError, PermissionError):
        pass
