"""The one way tests run a program through the in-sandbox runner (no sandbox): a fork of a process
that imported JAX once, as the sandbox's zygote does.

Starting Python and importing JAX costs seconds on a loaded 2-core machine; a fork costs ~0.1 s.
``forking_runner(env)`` starts, once per pytest process and environment, a process that imports
JAX and the runner but starts no backend (forking after that deadlocks the child). Each run is a
fork of it::

    pytest process                      runner process (imported jax, jax.numpy, the runner)
      start(code, fds) ── SCM_RIGHTS ──▶  fork ─▶ child: the caller's fds on 1, 2 and 3, chdir,
                                                  ``before``, runner.execute(code, run), _exit
      wait() ◀──────── {"status"} ─────  waits for the child (kills it past its deadline)

The child is what the sandbox runs minus the sandbox: events on fd 3 (``events.open_channel``), the
program compiled as ``<playground>`` by ``runner.execute``, and ``os._exit`` with its status, as a
spare ends. Its stdout and stderr are Python's own streams over the caller's fds, as in
``python -m jaxplay.sandbox.engine.runner``.

JAX reads some settings from the environment when it is imported (``JAX_PLATFORMS``, ``JAX_*``
flags), so each distinct environment gets its own runner process, started with that environment;
``XLA_FLAGS`` would be read when the child starts its backend, but it gets its own too.
"""

from __future__ import annotations

import atexit
import json
import os
import socket
import subprocess
import sys
import tempfile
import textwrap
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any

from jaxplay import worker_protocol as wp
from jaxplay.sandbox.runtimes import launch

REPO = Path(__file__).resolve().parents[1]
STARTUP_TIMEOUT_S = 180.0
MAX_MESSAGE = 1 << 22

RUNNER_PROCESS = r"""
import fcntl, json, os, select, signal, socket, sys, traceback
import jax, jax.numpy  # imported once, as the zygote does; each program runs in a fork of this process
from jax._src import source_info_util
from jaxplay import worker_protocol as wp
from jaxplay.sandbox.output import events
from jaxplay.sandbox.engine import runner

# This process starts from `python -c`: its `<string>` frames are none of a run's (the zygote's own
# frames are in sandbox/, which the capture excludes), so IR source locations name only the program's.
source_info_util.register_exclusion("<string>")

control = socket.socket(fileno=int(sys.argv[1]))
control.send(json.dumps({"ready": jax.__version__}).encode())


def child(request, fds):
    control.close()
    targets = [1, 2, 3][: len(fds)]
    high = [fcntl.fcntl(fd, fcntl.F_DUPFD, 64) for fd in fds]  # out of the way of 1, 2 and 3
    for fd in fds:
        os.close(fd)
    for fd, target in zip(high, targets):
        os.dup2(fd, target)
        os.close(fd)
    if len(fds) < 3:
        try:
            os.close(3)
        except OSError:
            pass
    os.chdir(request["cwd"])
    if request["before"]:
        exec(compile(request["before"], "<before the run>", "exec"), {"__name__": "__before__"})
    if len(fds) == 3:
        events.open_channel(3)
    return runner.execute(request["code"], wp.from_wire(wp.SandboxRun, request["run"]))


while True:
    message, fds, _, _ = socket.recv_fds(control, 1 << 22, 3)
    if not message:
        break
    request = json.loads(message)
    sys.stdout.flush()
    sys.stderr.flush()
    pid = os.fork()
    if pid == 0:
        status = 70
        try:
            status = child(request, fds)
        except BaseException:
            traceback.print_exc()
        finally:
            for stream in (sys.stdout, sys.stderr, sys.__stdout__, sys.__stderr__):
                try:
                    stream.flush()
                except Exception:
                    pass
            os._exit(status)
    for fd in fds:
        os.close(fd)
    exited = os.pidfd_open(pid)
    timed_out = not select.select([exited], [], [], request["timeout"])[0]
    if timed_out:
        os.kill(pid, signal.SIGKILL)
    os.close(exited)
    _, wait_status = os.waitpid(pid, 0)
    control.send(json.dumps({"status": os.waitstatus_to_exitcode(wait_status), "timed_out": timed_out}).encode())
"""


def sandbox_run(options: dict[str, Any]) -> dict[str, Any]:
    """``options`` (the browser's, such as ``inspect``, with what a worker adds, such as ``device_peak``)
    as the wire form of the SandboxRun a spare's door carries; checked here, so a wrong key fails in the test."""
    added = {f.name for f in fields(wp.SandboxRun)}
    run = {"options": {k: v for k, v in options.items() if k not in added},
           **{k: v for k, v in options.items() if k in added}}
    wp.from_wire(wp.SandboxRun, run)
    return run


class RunnerProcessError(RuntimeError):
    """The runner process died, or did not answer in time: it is replaced at the next run."""


@dataclass
class RunResult:
    events: list[dict[str, Any]]
    stdout: str
    stderr: str
    status: int


class StartedRun:
    """A program running in a fork; ``wait`` returns its exit status (negative: killed by that signal)."""

    def __init__(self, runner: ForkingRunner, timeout: float) -> None:
        self.runner = runner
        self.timeout = timeout
        self.status: int | None = None

    def wait(self) -> int:
        if self.status is None:
            reply = self.runner.receive(self.timeout + 30)
            self.runner.busy = False
            if reply["timed_out"]:
                raise subprocess.TimeoutExpired("runner.execute (forked)", self.timeout)
            self.status = int(reply["status"])
        return self.status


class ForkingRunner:
    """A process that imported JAX and the runner, started by ``python`` (this venv's, or a runtime's)
    with ``env``; each run is a fork of it."""

    def __init__(self, env: dict[str, str], python: str = sys.executable) -> None:
        self.log = tempfile.TemporaryFile()
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        self.control = ours
        # A runtime's Python (maybe another version) loads jaxplay alone, as its sandbox does
        # (sandbox/runtimes/launch.py); LOAD_JAXPLAY takes jaxplay's folder off sys.argv.
        command = ([python, *launch.FLAGS, "-c", launch.LOAD_JAXPLAY + RUNNER_PROCESS, str(launch.JAXPLAY_DIR)]
                   if python != sys.executable else [python, "-c", RUNNER_PROCESS])
        self.process = subprocess.Popen(
            [*command, str(theirs.fileno())], pass_fds=(theirs.fileno(),), env=env,
            cwd=REPO, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=self.log,
        )
        theirs.close()
        self.busy = False
        self.receive(STARTUP_TIMEOUT_S)

    def receive(self, timeout: float) -> dict[str, Any]:
        self.control.settimeout(timeout)
        try:
            message = self.control.recv(MAX_MESSAGE)
        except TimeoutError:
            message = b""
        if not message:
            self.close()
            raise RunnerProcessError(f"the forking runner process did not answer; its log:\n{self.log_tail()}")
        return json.loads(message)

    def log_tail(self) -> str:
        self.log.seek(0)
        return self.log.read()[-4000:].decode(errors="replace")

    def alive(self) -> bool:
        return self.process.poll() is None and self.control.fileno() >= 0

    def start(self, code: str, stdout: int, stderr: int, events: int | None = None, *,
              options: dict[str, Any] | None = None, before: str = "", cwd: str | Path = REPO,
              timeout: float = 120) -> StartedRun:
        """Run ``code`` in a fork with ``stdout``, ``stderr`` and ``events`` (fds of the caller's) on its fds
        1, 2 and 3; ``before`` is Python run in the fork first (a preload, a cache to use)."""
        assert not self.busy, "one run at a time: wait() for the last one first"
        request = {"code": code, "run": sandbox_run(options or {}), "before": textwrap.dedent(before),
                   "cwd": str(cwd), "timeout": timeout}
        fds = [stdout, stderr] + ([events] if events is not None else [])
        try:
            socket.send_fds(self.control, [json.dumps(request).encode()], fds)
        except OSError as lost:
            self.close()
            raise RunnerProcessError(f"the forking runner process is gone ({lost}); its log:\n{self.log_tail()}") from lost
        self.busy = True
        return StartedRun(self, timeout)

    def run(self, code: str, workdir: Path, **kwargs: Any) -> RunResult:
        """Run ``code`` with its output and events in files under ``workdir``; wait for it."""
        workdir.mkdir(parents=True, exist_ok=True)
        paths = [workdir / name for name in ("stdout", "stderr", "events.jsonl")]
        files = [open(path, "w+b") for path in paths]
        try:
            status = self.start(code, *(f.fileno() for f in files), **kwargs).wait()
        finally:
            for f in files:
                f.close()
        stdout, stderr, events = (path.read_bytes() for path in paths)
        return RunResult([json.loads(line) for line in events.splitlines()], stdout.decode(), stderr.decode(), status)

    def close(self) -> None:
        self.control.close()
        try:
            self.process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()


_runners: dict[tuple[str, tuple[tuple[str, str], ...]], ForkingRunner] = {}


# Set by pytest to the test that runs now: no program's business, and it would make each test's
# environment differ from every other's.
PER_TEST_VARIABLES = frozenset({"PYTEST_CURRENT_TEST"})


def forking_runner(env: dict[str, str] | None = None, python: str = sys.executable) -> ForkingRunner:
    """This pytest process's runner process for ``python`` (a runtime's interpreter runs that runtime's
    JAX) and the environment ``os.environ`` updated with ``env``."""
    full = {k: v for k, v in {**os.environ, **(env or {})}.items() if k not in PER_TEST_VARIABLES}
    key = (python, tuple(sorted(full.items())))
    runner = _runners.get(key)
    if runner is None or not runner.alive():
        runner = _runners[key] = ForkingRunner(full, python)
    return runner


@atexit.register
def _close_runners() -> None:
    for runner in _runners.values():
        runner.close()
    _runners.clear()


def run_program(code: str, workdir: Path, env: dict[str, str] | None = None, python: str = sys.executable,
                **kwargs: Any) -> RunResult:
    """Run ``code`` through the real runner in a fork of ``python``'s runner process; its events, stdout,
    stderr and exit status."""
    return forking_runner(env, python).run(code, workdir, **kwargs)


def run_programs(programs: list[str], cwd: str | Path = REPO, env: dict[str, str] | None = None,
                 python: str = sys.executable) -> list[list[dict]]:
    """Each program's events, each run as ``run_program`` runs one (``python``: a runtime's interpreter)."""
    with tempfile.TemporaryDirectory() as workdir:
        return [run_program(code, Path(workdir) / str(index), env, python, cwd=cwd).events
                for index, code in enumerate(programs)]
