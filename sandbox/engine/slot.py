"""One sandbox slot: a bubblewrap sandbox with a zygote in it, running one run at a time.

Tasks and ownership (all in the worker's event loop)::

    Slot
      ├─ the sandbox process tree (unshare/setpriv/bwrap -> zygote): owned here,
      │  killed by ``close()``; bwrap's --die-with-parent covers a worker crash
      ├─ _read_zygote task: every zygote message into ``_messages``
      └─ per run: an OutputRelay reading its three pipes, and the deadline

A run's child writes to pipes the slot created, so its output streams to the
worker as it is written, whatever the child does with Python's buffers.
"""

from __future__ import annotations

import asyncio
import logging
import os
import socket
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from jaxplay.browser_protocol import RunStatus
from jaxplay.sandbox.caches.compile_cache import CompileCaches
from jaxplay.sandbox.engine import jax_config, libraries
from jaxplay.sandbox.engine import zygote_protocol as zp
from jaxplay.sandbox.isolation import bwrap, gpu
from jaxplay.sandbox.isolation.cgroups import SlotCgroup
from jaxplay.sandbox.isolation.limits import format_bytes
from jaxplay.sandbox.isolation.numeric_settings import numerical_library_settings
from jaxplay.sandbox.output.relay import OutputRelay, SendEvent
from jaxplay.settings import Settings

log = logging.getLogger("jaxplay.sandbox")

START_TIMEOUT_S = 120.0
KILL_GRACE_S = 5.0
DRAIN_GRACE_S = 2.0
EXIT_GRACE_S = 2.0  # after a run said it ended: its process exits within this, or is killed


@dataclass
class RunResult:
    status: RunStatus
    elapsed_ms: float
    message: str | None = None
    out_of_memory: bool = False  # the cgroup's OOM killer ended it (counted in the worker's metrics)


class SlotDied(RuntimeError):
    pass


@dataclass(frozen=True)
class SlotRuntime:
    """A JAX runtime's interpreter and the paths its sandbox binds (sandbox/runtimes/store.py)."""
    interpreter: Path
    exposed: list[Path]


class Slot:
    def __init__(self, index: int, settings: Settings, name: str, gpus: tuple[str, ...] = (),
                 caches: CompileCaches | None = None, runtime: SlotRuntime | None = None) -> None:
        self.index = index
        # Which Python (hence which JAX) the sandbox runs, and what it exposes; None: the worker's own.
        self.runtime = runtime
        self.gpus = gpus  # the GPUs this slot owns (/dev/nvidiaN): one run on them at a time
        self.caches = caches
        self.settings = settings
        self.name = f"{name}-{index}"
        self.process: asyncio.subprocess.Process | None = None
        self.control: socket.socket | None = None
        self.cgroup: SlotCgroup | None = None
        self.versions: dict[str, Any] = {}
        self._messages: asyncio.Queue[dict[str, Any] | None] = asyncio.Queue()
        self._reader: asyncio.Task[None] | None = None
        self._cancel_requested: dict[str, asyncio.Event] = {}
        self._exit_wait: asyncio.Task[None] | None = None  # a run reported done, its process not yet gone
        self.alive = False

    # --- lifecycle ---------------------------------------------------------

    async def start(self) -> None:
        parent_end, child_end = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        parent_end.setblocking(False)
        isolated = self.settings.sandbox != "none"
        interpreter = str(self.runtime.interpreter) if self.runtime else None
        inner = bwrap.zygote_command(child_end.fileno(), isolated, interpreter)
        env = self.zygote_environment()
        if isolated:
            self.cgroup = SlotCgroup.create(f"{os.getpid()}-{self.name}", self.memory_limit_bytes, self.settings.cgroups)
            procs = self.cgroup.procs_files() if self.cgroup and os.geteuid() == 0 else []
            devices = gpu.device_nodes(self.gpus)
            extra = self.caches.bwrap_binds() if self.caches else []
            command = bwrap.sandbox_command(inner, env, procs, devices, extra,
                                            self.runtime.exposed if self.runtime else None)
            launch_env = bwrap.LAUNCH_ENVIRONMENT
        else:
            command = inner
            launch_env = {**os.environ, **env}
        self.process = await asyncio.create_subprocess_exec(
            *command, pass_fds=(child_end.fileno(),), stdin=asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.DEVNULL, stderr=asyncio.subprocess.PIPE,
            env=launch_env, start_new_session=True,
        )
        child_end.close()
        self.control = parent_end
        self._messages = asyncio.Queue()
        self._reader = asyncio.create_task(self._read_zygote())
        asyncio.create_task(self._log_stderr(self.process))
        ready = await asyncio.wait_for(self._next_message(), START_TIMEOUT_S)
        if ready.get("type") != "ready":
            raise SlotDied(f"zygote sent {ready!r} instead of ready")
        self.versions = ready
        self.alive = True
        log.info("slot %s ready (zygote pid %s, sandbox %s)", self.name, self.process.pid, self.settings.sandbox)

    def zygote_environment(self) -> dict[str, str]:
        """Everything a run's environment holds, built here from an allow-list (never the worker's).

        It is the zygote's, so a spare starts its backend with the run's settings."""
        env = {"PATH": "/usr/bin:/bin", "HOME": "/tmp", "PYTHONPATH": str(bwrap.IMPORT_ROOT),
               "PYTHONDONTWRITEBYTECODE": "1", "LANG": "C.UTF-8",
               "PYTHONHASHSEED": "0",  # set and dict orders, hence output, repeat from run to run
               "XLA_FLAGS": f"--xla_force_host_platform_device_count={self.settings.cpu_devices}",
               "MPLBACKEND": "Agg", "MPLCONFIGDIR": "/tmp/.matplotlib", "TMPDIR": "/tmp"}
        env.update(gpu.gpu_environment(self.gpus, self.settings))
        env.update(numerical_library_settings(os.environ))  # a run computes what plain Python computes here
        env[libraries.LISTED_VARIABLE] = ",".join(libraries.listed_distributions())
        return env

    def fill_environment(self) -> dict[str, str]:
        """The shared compile cache's fill process: the runs' settings, so its entries match theirs."""
        env = self.zygote_environment()
        return {**env, "PYTHONPATH": str(bwrap.IMPORT_ROOT), "HOME": str(self.settings.compile_cache_dir)}

    async def close(self) -> None:
        self.alive = False
        if self._exit_wait is not None and self._exit_wait is not asyncio.current_task():
            self._exit_wait.cancel()
        self._exit_wait = None
        if self._reader:
            self._reader.cancel()
        if self.control:
            self.control.close()
            self.control = None
        if self.process and self.process.returncode is None:
            try:
                os.killpg(self.process.pid, 9)
            except ProcessLookupError:
                pass
            await self.process.wait()
        if self.cgroup:
            self.cgroup.remove()

    async def restart(self) -> None:
        await self.close()
        await self.start()

    @property
    def memory_limit_bytes(self) -> int:
        return self.settings.memory_limit_mb << 20

    async def _read_zygote(self) -> None:
        loop = asyncio.get_running_loop()
        assert self.control is not None
        try:
            while True:
                data = await loop.sock_recv(self.control, zp.MAX_PACKET)
                message = zp.decode(data)
                await self._messages.put(message)
                if message is None:
                    return
        except (OSError, asyncio.CancelledError):
            await self._messages.put(None)

    async def _next_message(self) -> dict[str, Any]:
        message = await self._messages.get()
        if message is None:
            self.alive = False
            raise SlotDied("the sandbox process ended unexpectedly")
        return message

    async def _log_stderr(self, process: asyncio.subprocess.Process) -> None:
        assert process.stderr is not None
        async for line in process.stderr:
            log.debug("slot %s: %s", self.name, line.decode(errors="replace").rstrip())

    # --- runs --------------------------------------------------------------

    def cancel(self, run_id: str) -> None:
        if run_id in self._cancel_requested:
            self._cancel_requested[run_id].set()

    async def run(self, run_id: str, code: str, timeout_s: float, options: dict[str, Any],
                  send: SendEvent, probe: bool = False) -> RunResult:
        """Execute one run; every event goes to ``send``; never raises for user faults."""
        await self._previous_run_gone()
        if self.control is None:
            raise SlotDied("the slot could not be restarted after its previous run")
        cancelled = self._cancel_requested[run_id] = asyncio.Event()
        pipes = [os.pipe() for _ in range(3)]
        run_options = {**options, "memory_limit_text": format_bytes(self.memory_limit_bytes),
                       "limit_processes": self.settings.sandbox != "none",
                       "cpu_devices": self.settings.cpu_devices,
                       "artifact_limit_bytes": self.settings.artifact_limit_bytes}
        if self.cgroup is None:
            run_options["memory_rlimit_bytes"] = self.memory_limit_bytes
        message = {"type": "start", "run_id": run_id, "code": code, "options": run_options,
                   "unstarted_backend": jax_config.needs_unstarted_backend(code), "probe": probe}
        oom_before = self.cgroup.oom_kills() if self.cgroup else 0
        relay = OutputRelay(send, self.settings.output_limit_bytes, allow_probe=probe)
        try:
            zp.send(self.control, message, [w for _, w in pipes])
        finally:
            for _, w in pipes:
                os.close(w)
        started_at = time.monotonic()
        relay.start(*(r for r, _ in pipes))
        try:
            exited, ended_by = await self._await_exit(run_id, started_at + timeout_s, cancelled, relay)
        except SlotDied:
            relay.close()
            return RunResult(RunStatus.CRASHED, _ms_since(started_at), "The sandbox ended unexpectedly; the run was lost.")
        finally:
            del self._cancel_requested[run_id]
        elapsed_ms = _ms_since(started_at)
        await relay.drained(DRAIN_GRACE_S)  # the zygote kills leftovers, so EOF comes promptly
        if exited.get("before_exit"):
            self._exit_wait = asyncio.create_task(self._await_late_exit(run_id, options.get("compile_cache")))
            return self._result(exited, None, elapsed_ms, timeout_s, False, relay)
        oom = self.cgroup is not None and self.cgroup.oom_kills() > oom_before
        if self.caches is not None:
            await asyncio.to_thread(self.caches.after_run, options.get("compile_cache"))
        return self._result(exited, ended_by, elapsed_ms, timeout_s, oom, relay)

    async def _await_exit(self, run_id: str, deadline: float, cancelled: asyncio.Event,
                          relay: OutputRelay | None) -> tuple[dict[str, Any], RunStatus | None]:
        """The run's exit (or, with ``before_exit``, its word on ``relay`` that it ended and every pipe
        closed). Past the deadline or on cancel it is killed; a sandbox that cannot kill it is closed."""
        ended_by: RunStatus | None = None
        cancel_wait = asyncio.create_task(cancelled.wait())
        pipes_closed = asyncio.create_task(relay.closed()) if relay is not None else None
        try:
            while True:
                next_message = asyncio.create_task(self._next_message())
                budget = deadline - time.monotonic() if ended_by is None else KILL_GRACE_S
                waiting = {next_message} if ended_by is not None else {next_message, cancel_wait}
                if ended_by is None and pipes_closed is not None and not pipes_closed.done():
                    waiting.add(pipes_closed)
                done, _ = await asyncio.wait(waiting, timeout=max(budget, 0), return_when=asyncio.FIRST_COMPLETED)
                if next_message in done:
                    message = next_message.result()
                    if message.get("type") == "exited" and message.get("run_id") == run_id:
                        return message, ended_by
                    continue
                next_message.cancel()
                if pipes_closed in done and relay is not None and ended_by is None:
                    if relay.ended_returncode is not None:
                        return {"type": "exited", "run_id": run_id, "returncode": relay.ended_returncode,
                                "signal": None, "before_exit": True}, None
                    continue  # the pipes closed without a word: the exit tells
                if ended_by is not None:  # killed, yet no exit within the grace: the sandbox is stuck
                    await self.close()
                    raise SlotDied("the sandbox did not end the run")
                ended_by = RunStatus.CANCELLED if cancel_wait in done else RunStatus.TIMEOUT
                zp.send(self.control, {"type": "kill", "run_id": run_id})  # type: ignore[arg-type]
        finally:
            cancel_wait.cancel()
            if pipes_closed is not None:
                pipes_closed.cancel()

    async def _await_late_exit(self, run_id: str, session: str | None) -> None:
        """After a run was reported done: its process exits (or is killed), then its cache is tended.

        A program that said it ended and yet runs on is killed after EXIT_GRACE_S; a
        sandbox that cannot end it is restarted, so the next run gets a sound slot.
        """
        try:
            await self._await_exit(run_id, time.monotonic() + EXIT_GRACE_S, asyncio.Event(), None)
            if self.caches is not None:
                await asyncio.to_thread(self.caches.after_run, session)
        except (SlotDied, OSError) as exc:
            log.warning("slot %s: %s after run %s; restarting it", self.name, exc, run_id)
            try:
                await self.restart()
            except Exception:
                log.exception("slot %s could not be restarted", self.name)
                await self.close()

    async def _previous_run_gone(self) -> None:
        waiting, self._exit_wait = self._exit_wait, None
        if waiting is not None:
            await waiting

    def _result(self, exited: dict[str, Any], ended_by: RunStatus | None, elapsed_ms: float,
                      timeout_s: float, oom: bool, relay: OutputRelay) -> RunResult:
        if ended_by is RunStatus.TIMEOUT:
            return RunResult(ended_by, elapsed_ms, f"The run exceeded its time limit of {timeout_s:g} s and was stopped.")
        if ended_by is RunStatus.CANCELLED:
            return RunResult(ended_by, elapsed_ms, "Stopped at your request.")
        if exited.get("refused"):
            return RunResult(RunStatus.CRASHED, elapsed_ms, f"The worker refused the run: {exited['refused']}.")
        if oom:
            limit = format_bytes(self.memory_limit_bytes)
            message = (f"Out of memory: the run used more than its limit of {limit} and was stopped. "
                       "Use smaller arrays or fewer intermediate copies.")
            if relay.error_sent:
                return RunResult(RunStatus.ERROR, elapsed_ms, message, out_of_memory=True)
            relay.send({"type": "error", "ename": "MemoryError", "message": message, "line": None,
                              "traceback": ""})
            return RunResult(RunStatus.ERROR, elapsed_ms, message, out_of_memory=True)
        code, signal_number = exited.get("returncode"), exited.get("signal")
        if code == 0:
            return RunResult(RunStatus.OK, elapsed_ms)
        if code == 1 and relay.error_sent:
            return RunResult(RunStatus.ERROR, elapsed_ms)
        how = f"signal {signal_number}" if signal_number else f"exit code {code}"
        hint = " It was killed, most likely for running out of memory." if signal_number == 9 else ""
        return RunResult(RunStatus.CRASHED, elapsed_ms, f"The Python process ended abruptly ({how}).{hint}")


def _ms_since(start: float) -> float:
    return (time.monotonic() - start) * 1000
