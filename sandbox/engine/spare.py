"""A spare: the three processes one run gets, made before the run's code arrives.

The zygote forks a spare while the previous run executes (at low priority)::

    zygote ─ keeper   made the run's namespaces (user, mount, IPC, pid, net, UTS),
              │       fresh /tmp and /dev/shm, read-only /dev; waits; mirrors the
              │       run's exit; on SIGTERM kills the init (and so everything)
              └ init  pid 1 of the run's pid namespace, non-dumpable; mounts /proc;
                  │   at the start mounts the session's compile cache, hands the
                  │   code on, drops its capabilities, reaps; after the run
                  │   kills what is left and saves new cache entries
                  └ run   drops every capability before any thread exists, starts
                          the JAX backend and warms it, waits for code, runs it once

Nothing a run leaves behind survives it: its files live on tmpfs mounts of its
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
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from jaxplay.sandbox.caches import mounts as cache_mounts
from jaxplay.sandbox.engine import warmup
from jaxplay.sandbox.engine import zygote_protocol as zp
from jaxplay.sandbox.isolation import namespaces as ns
from jaxplay.sandbox.isolation import seccomp

TMP_SIZE_BYTES = 512 << 20
SHM_SIZE_BYTES = 64 << 20
EXIT_SPARE_FAILED = 71  # the spare could not be prepared: the run never started
SPARE_NICE = 19
SPARE_OOM_SCORE_ADJ = 500  # a spare dies after the run when memory runs out, not before it
RUN_OOM_SCORE_ADJ = 1000


@dataclass
class Spare:
    pid: int  # the keeper, the zygote's child
    control: socket.socket  # to the init: the start message and its fds
    warm: bool


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

    ``isolated`` is False only without a sandbox (development mode): then no namespaces are made.
    """
    zygote_end, init_end = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)

    def leave_the_zygote() -> None:
        signal.set_wakeup_fd(-1)
        signal.signal(signal.SIGCHLD, signal.SIG_DFL)
        for fd in (*zygote_fds, zygote_end.fileno()):
            os.close(fd)

    pid = _fork("keeper", lambda: keeper_main(init_end, warm, isolated), leave_the_zygote)
    init_end.close()
    return Spare(pid, zygote_end, warm)


def keeper_main(init_end: socket.socket, warm: bool, isolated: bool) -> int:
    os.setsid()
    ns.set_dumpable(True)  # the zygote is not; a non-dumpable process may not write its own id maps
    if isolated:
        ns.unshare_run_namespaces(os.getuid(), os.getgid())
        fresh_writable_places()
    init_pid = _fork("init", lambda: init_main(init_end, warm, isolated))
    init_end.close()
    # The zygote's kill: the init is pid 1 of the run's namespace, so killing it ends every process
    # there; without a sandbox, the process group is the best there is.
    signal.signal(signal.SIGTERM, lambda *_: _kill(init_pid) if isolated else _kill_group())
    _, status = os.waitpid(init_pid, 0)
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


def init_main(zygote_end: socket.socket, warm: bool, isolated: bool) -> int:
    ns.set_parent_death_signal(signal.SIGKILL)
    if isolated:
        ns.mount_proc()
        ns.set_dumpable(False)
    init_end, run_end = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    run_pid = _fork("run", lambda: run_main(run_end, warm, isolated),
                    lambda: (zygote_end.close(), init_end.close()) and None)
    run_end.close()
    wake_r, wake_w = os.pipe()
    os.set_blocking(wake_w, False)
    signal.signal(signal.SIGCHLD, lambda *_: None)
    signal.set_wakeup_fd(wake_w)
    session: cache_mounts.SessionCache | None = None
    while True:  # until the start message comes, or the run process dies while it is prepared
        readable, _, _ = select.select([zygote_end, wake_r], [], [])
        if wake_r in readable:
            os.read(wake_r, 512)
            status = _reap(run_pid)
            if status is not None:
                return status
        if zygote_end in readable:
            message, fds = zp.receive(zygote_end)
            if message is None:
                return 0  # the zygote has gone, or dropped this spare
            if isolated:
                session = cache_mounts.mount_for_run(message.get("options", {}).get("compile_cache"))
            _restore_priority(run_pid)  # a run waiting for its spare must not wait at the spare's priority
            zp.send(init_end, message, fds)
            for fd in fds:
                os.close(fd)
            init_end.close()
            break
    if isolated:
        ns.drop_all_capabilities()
    while True:
        os.read(wake_r, 512) if select.select([wake_r], [], [], 1.0)[0] else None
        status = _reap(run_pid)
        if status is not None:
            break
    if isolated:
        _end_every_process()  # what the run left behind, before the cache is read
    if session is not None:
        session.save()
    if isolated:
        # Nothing of the run is left: the zygote may report it over now, while this process, the
        # keeper and the namespaces tear down (~20 ms of unmapping a zygote-sized address space).
        _report_gone(zygote_end, status)
    zygote_end.close()
    return status


def _report_gone(zygote_end: socket.socket, status: int) -> None:
    try:
        zp.send(zygote_end, {"type": "gone", "status": status,
                             "max_rss_kb": resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss})
    except OSError:
        pass  # the zygote has gone: the keeper's exit is all there is to report


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
    """Reap every exited child; the run's exit status once the run itself has ended."""
    result = None
    while True:
        try:
            pid, status = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return result
        if pid == 0:
            return result
        if pid == run_pid:
            result = _mirror(status)


def _mirror(status: int) -> int:
    """Exit the way the child did: the same code, or the same signal as 128+N."""
    if os.WIFSIGNALED(status):
        return 128 + os.WTERMSIG(status)
    return os.waitstatus_to_exitcode(status)


def _kill_group() -> None:
    """Without a sandbox: the run's process group (its session leader is the keeper)."""
    try:
        os.killpg(os.getpgid(0), signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


def _kill(pid: int) -> None:
    try:
        os.kill(pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


def run_main(sock: socket.socket, warm: bool, isolated: bool) -> int:
    """The run's own process: unprivileged before anything else, then warmed, then the run."""
    ns.set_dumpable(True)  # the init is not; the run is an ordinary process (its own /proc is its own)
    if isolated:
        ns.drop_all_capabilities()
        seccomp.install()  # before any thread exists, so every later thread is filtered too
    _set_oom_score_adj(SPARE_OOM_SCORE_ADJ)
    os.nice(SPARE_NICE)  # preparing must not slow the run that executes beside it
    warmup.prepare(initialize_backend=warm)
    from jaxplay.sandbox import capture

    capture.prepare()
    message, fds = zp.receive(sock)
    sock.close()
    warmup.run_arrived.set()
    if message is None:
        return 0
    _restore_priority(os.getpid())
    _set_oom_score_adj(RUN_OOM_SCORE_ADJ)
    status = execute(message, fds)
    session = message.get("options", {}).get("compile_cache")
    if not message.get("probe") and not (session and cache_mounts.run_wrote_entries()):
        # Done before the teardown; a run whose new cache entries its init must save first
        # ends the slow way, so the session's next run (on any slot) finds them.
        from jaxplay.sandbox.output import events

        events.announce_end(status)
    return status


def execute(message: dict[str, Any], fds: list[int]) -> int:
    stdout_fd, stderr_fd, events_fd = fds
    os.dup2(stdout_fd, 1)
    os.dup2(stderr_fd, 2)
    os.close(stdout_fd)
    os.close(stderr_fd)
    os.environ.update(message.get("env", {}))
    from jaxplay.sandbox.engine import jax_config, runner
    from jaxplay.sandbox.isolation import limits
    from jaxplay.sandbox.output import events

    warmup.reseed_numpy()
    jax_config.apply_environment_at_first_import()
    options = message.get("options", {})
    limits.apply_in_child(options)
    events.open_channel(events_fd)
    runner.reopen_std_streams()
    if message.get("probe"):
        from jaxplay.sandbox.engine import probe

        probe.report(options)
        return 0
    return runner.execute(message["code"], options)


def _restore_priority(pid: int) -> None:
    """Back to normal priority, every thread: the backend's threads were made while niced.

    Raising priority back to nice 0 is allowed because the worker set RLIMIT_NICE
    for the sandbox; where it could not, the run keeps the spare's priority.
    """
    try:
        tids = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return
    for tid in tids:
        try:
            with open(f"/proc/{pid}/task/{tid}/comm") as comm:
                if comm.read().strip() == warmup.WARM_THREAD_NAME:
                    continue  # the spare's warming, which the run no longer needs
            os.setpriority(os.PRIO_PROCESS, int(tid), 0)
        except OSError:
            return


def _set_oom_score_adj(value: int) -> None:
    try:
        with open("/proc/self/oom_score_adj", "w") as f:
            f.write(str(value))
    except OSError:
        pass
