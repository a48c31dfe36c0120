"""A warm sandbox: a bubblewrap sandbox with a zygote in it, running one run at a time.

It sits on one of the worker's seats (``--slots``, sandbox/engine/runtime_pool.py); each
JAX runtime may have one on a seat. ``WarmSandbox`` is a ``ZygoteLink``
(sandbox/engine/zygote_link.py: the sandbox's processes, its zygote's words, the
offered spare's door); this module is the run's part.

Tasks and ownership (all in the worker's event loop)::

    WarmSandbox
      ├─ what its ZygoteLink owns: the sandbox process tree, the zygote's
      │  reader task and the offered spare's door (zygote_link.py)
      ├─ per run: an OutputRelay reading its three pipes, the spare's door (the
      │  init's ``ended``), and the deadline
      └─ _await_late_exit task (``_exit_wait``), after a run reported done before
         every process of it had gone: the seat's next run waits for it; killed
         by ``close()``

A run's child writes to pipes the sandbox created, so its output streams to the
worker as it is written, whatever the child does with Python's buffers.

A job's options become here what the run's process is given, a
``SandboxRun`` (jaxplay/worker_protocol.py): the sandbox adds its memory and
process limits, the artifact limit, the host's device peak (``HostPeak``,
sandbox/engine/peak_cache.py) and whether the session's cache may be read.

Invariants kept here: the program goes to the spare through its door (as a
memory file), never to the zygote (``zygote_protocol``); a run's status comes
from its init or the zygote, never from the run's own pipes
(``run_outcome``); and whether a run may load its session's saved
compile-cache entries is decided here before it starts and reported with its
result (``RunResult.read_session_cache``).
"""

from __future__ import annotations

import asyncio
import logging
import os
import socket
import time
from typing import Any

from jaxplay import worker_protocol as wp
from jaxplay.browser_protocol import RunStatus
from jaxplay.sandbox.caches.compile_cache import CompileCaches
from jaxplay.sandbox.engine import jax_config, run_outcome
from jaxplay.sandbox.engine import zygote_protocol as zp
from jaxplay.sandbox.engine.host_state_watch import HostStateWatch
from jaxplay.sandbox.engine.peak_cache import HostPeak
from jaxplay.sandbox.engine.run_outcome import RunResult
from jaxplay.sandbox.engine.zygote_link import NotStarted, SandboxDied, SandboxRuntime, ZygoteLink
from jaxplay.sandbox.output.relay import OutputRelay, SendEvent
from jaxplay.settings import Settings

log = logging.getLogger("jaxplay.sandbox")

KILL_GRACE_S = 5.0
DRAIN_GRACE_S = 2.0
LOST_TO_SANDBOX = "The sandbox ended unexpectedly; the run was lost."
EXIT_GRACE_S = KILL_GRACE_S  # after a run's process ended, its init kills the rest: gone within this


class NothingRan(Exception):
    """The run's program never reached a process that could run it: the spare it was handed to, or
    the whole sandbox, had died (killed from outside). Nothing of the run happened, so it may go again
    (the agent's ``execute``); the sandbox is not ``alive`` when it was the sandbox that died.
    ``tried_s``: how long the run's own time had run (from when its seat's last run was gone)."""

    def __init__(self, why: str, tried_s: float = 0.0) -> None:
        super().__init__(why)
        self.tried_s = tried_s


class WarmSandbox(ZygoteLink):
    """Runs one run at a time in the sandbox its ``ZygoteLink`` started, each through a spare's door."""

    def __init__(self, index: int, settings: Settings, name: str, gpus: tuple[str, ...] = (),
                 caches: CompileCaches | None = None, runtime: SandboxRuntime | None = None,
                 peak: HostPeak | None = None) -> None:
        super().__init__(index, settings, name, gpus, caches, runtime)
        self.peak = peak or HostPeak()  # the worker's, shared by its sandboxes; its runs' roofs
        self._cancel_requested: dict[str, asyncio.Event] = {}
        self._exit_wait: asyncio.Task[None] | None = None  # a run reported done, its process not yet gone

    async def close(self) -> None:
        if self._exit_wait is not None and self._exit_wait is not asyncio.current_task():
            self._exit_wait.cancel()
        self._exit_wait = None
        await super().close()

    # --- runs --------------------------------------------------------------

    def cancel(self, run_id: str) -> None:
        if run_id in self._cancel_requested:
            self._cancel_requested[run_id].set()

    async def run(self, run_id: str, code: str, timeout_s: float, options: wp.JobOptions, send: SendEvent,
                  probe: bool = False, calibrate: bool = False) -> RunResult:
        """Execute one run (or, with ``probe``, the worker's device probe); every event goes to ``send``;
        never raises for user faults.

        The run may load its session's saved compile-cache entries only when there are some (decided
        here, before it starts, so no entry saved meanwhile can slip in unreported)."""
        session = options.compile_cache
        reads_session = bool(self.caches is not None and session and self.caches.session_has_entries(session))
        cgroup = self.cgroup
        if cgroup is not None:  # the sandbox's full CPU weight for the run, an eighth of a process between runs
            cgroup.set_running(True)
        try:
            result = await self._execute(run_id, code, timeout_s,
                                         self.lower(options, reads_session, probe, calibrate), send)
        finally:
            if cgroup is not None:
                cgroup.set_running(False)
        result.read_session_cache = reads_session
        return result

    def lower(self, options: wp.JobOptions, reads_session: bool, probe: bool = False,
              calibrate: bool = False) -> wp.SandboxRun:
        """A job's options, and what this sandbox adds, as its run's process is given them."""
        return wp.SandboxRun(options=options, compile_cache_read=reads_session,
                             memory_limit_bytes=self.memory_limit_bytes, memory_rlimit=self.cgroup is None,
                             limit_processes=self.settings.sandbox != "none",
                             artifact_limit_bytes=self.settings.artifact_limit_bytes, device_peak=self.peak.peak,
                             probe=probe, calibrate=calibrate)

    async def _execute(self, run_id: str, code: str, timeout_s: float, run: wp.SandboxRun,
                       send: SendEvent) -> RunResult:
        # Registered before the wait for the seat's previous run: a cancel (the user's, a drain's) that comes
        # meanwhile is kept, and the run then never starts (it was lost, and the run ran to its end).
        cancelled = self._cancel_requested[run_id] = asyncio.Event()
        try:
            await self._previous_run_gone()
            if self.control is None or not self.alive:  # it ended (or was closed) while the last run ended
                raise NothingRan("the sandbox ended after its previous run")
        except BaseException:
            del self._cancel_requested[run_id]
            raise
        pipes = [os.pipe() for _ in range(3)]
        oom_before = self.cgroup.oom_kills() if self.cgroup else 0
        relay = OutputRelay(send, self.settings.output_limit_bytes, allow_probe=run.probe)
        started_at = time.monotonic()
        relay.start(*(r for r, _ in pipes))
        door: socket.socket | None = None
        watch: HostStateWatch | None = None
        try:
            try:
                # XLA reads its flags once, when the backend starts: a run that sets some gets a spare
                # whose backend starts after they are in its environment.
                unstarted = bool(run.options.flags.xla) or jax_config.needs_unstarted_backend(code)
                door, refused = await self._hand_over(run_id, code, zp.run_message(run), [w for _, w in pipes],
                                                      started_at + timeout_s, cancelled, unstarted)
            finally:
                for _, w in pipes:
                    os.close(w)
            if door is not None:
                watch = await HostStateWatch.receive(door, started_at + timeout_s)
            if refused is not None:
                exited, ended_by = refused, None
            else:
                exited, ended_by = await self._await_exit(run_id, started_at + timeout_s, cancelled, relay, door)
            if watch is None and ended_by is None and not cancelled.is_set():
                # The init sends its watch before the run's process has the code: without one (and with no
                # deadline or cancel passed) the spare died before the program reached it.
                relay.close()
                raise NothingRan(exited.get("refused") or "its prepared process had died", _ms_since(started_at) / 1000)
        except SandboxDied as died:
            relay.close()
            HostStateWatch.close(watch)
            if watch is None:  # see below: the program never ran
                self.alive = False
                if not cancelled.is_set():
                    raise NothingRan(str(died), _ms_since(started_at) / 1000) from None
                return run_outcome.outcome({}, RunStatus.CANCELLED, _ms_since(started_at), timeout_s, False, relay,
                                           self.memory_limit_bytes, oom_counted=False)
            return RunResult(RunStatus.CRASHED, _ms_since(started_at), LOST_TO_SANDBOX)
        except NotStarted as never:
            relay.close()
            HostStateWatch.close(watch)
            return run_outcome.outcome({}, never.status, _ms_since(started_at), timeout_s, False, relay,
                                       self.memory_limit_bytes, oom_counted=False)  # nothing ran
        finally:
            del self._cancel_requested[run_id]
            if door is not None:
                door.close()
        elapsed_ms = _ms_since(started_at)
        await relay.drained(DRAIN_GRACE_S)  # the zygote kills leftovers, so EOF comes promptly
        # Its output has all been read: what the run opened of the host's state is final for what it showed.
        for event in HostStateWatch.events(watch) if not run.probe else HostStateWatch.close(watch):
            relay.send(event)
        oom = self.cgroup is not None and self.cgroup.oom_kills() > oom_before
        oom_counted = self.cgroup is not None and self.cgroup.memory_dir is not None
        if exited.get("before_exit"):
            self._exit_wait = asyncio.create_task(self._await_late_exit(run_id, run.options.compile_cache))
            return run_outcome.outcome(exited, None, elapsed_ms, timeout_s, oom, relay, self.memory_limit_bytes,
                                       oom_counted)
        if self.caches is not None:
            await asyncio.to_thread(self.caches.after_run, run.options.compile_cache)
        if exited.get("unsaved_entries"):
            relay.send(run_outcome.unsaved_notice(exited["unsaved_entries"]))
        return run_outcome.outcome(exited, ended_by, elapsed_ms, timeout_s, oom, relay, self.memory_limit_bytes,
                                       oom_counted)

    async def _hand_over(self, run_id: str, code: str, run: dict[str, Any], pipes: list[int], deadline: float,
                         cancelled: asyncio.Event, unstarted: bool
                         ) -> tuple[socket.socket | None, dict[str, Any] | None]:
        """Send ``run`` (the code as a file beside the pipes) through a spare's door and name the run
        and the spare to the zygote: the program never passes through the zygote, which forks every
        later spare (zygote_protocol). Returns the door, which brings the init's ``ended``, or the
        zygote's ``exited`` when it refused the start. A spare that died just now takes nothing:
        its exit comes as the run's."""
        if cancelled.is_set():  # while it waited for the seat's previous run to be gone
            raise NotStarted(RunStatus.CANCELLED)
        if unstarted:  # a spare made now, for a program that configures JAX or a run with XLA flags
            self._tell_zygote({"type": "start", "run_id": run_id, "unstarted_backend": True})
            while True:
                message = await self._next_message()
                if message.get("run_id") == run_id and message.get("type") in ("started", "exited"):
                    break
                _close_door(message)  # a late word on an earlier run
            if message["type"] == "exited":
                return None, message
            door = message.get("door")
            if not isinstance(door, socket.socket):
                await self.close()
                raise SandboxDied("the zygote started a run without a door to it")
        else:
            pid, door = await self._take_spare(deadline, cancelled)
            # Before the run goes through the door: the zygote must know the spare is taken before its
            # keeper can exit.
            self._tell_zygote({"type": "start", "run_id": run_id, "spare": pid})
        code_fd = zp.code_file(code)
        try:
            zp.send(door, run, [*pipes, code_fd])
        except OSError:
            pass  # the spare died just now: its exit comes as the run's
        finally:
            os.close(code_fd)
        door.setblocking(False)
        return door, None

    async def _await_exit(self, run_id: str, deadline: float, cancelled: asyncio.Event, relay: OutputRelay | None,
                          door: socket.socket | None = None) -> tuple[dict[str, Any], RunStatus | None]:
        """The run's exit: the zygote's ``exited`` once every process of it is gone, or (with
        ``before_exit``) its init's ``ended`` on ``door``, the kernel's status of the run's process, once
        every pipe on ``relay`` is closed too. Past the deadline or on cancel it is killed; a sandbox
        that cannot kill it is closed."""
        ended_by: RunStatus | None = None
        cancel_wait = asyncio.create_task(cancelled.wait())
        pipes_closed = asyncio.create_task(relay.closed()) if relay is not None else None
        ended = _next_word(door) if door is not None else None
        next_message: asyncio.Task[dict[str, Any]] | None = None
        try:
            while True:
                if ended_by is None and pipes_closed is not None and pipes_closed.done() and ended is not None \
                        and ended.done() and run_outcome.status_of(ended.result()) is not None:
                    return {"type": "exited", "run_id": run_id, **run_outcome.status_of(ended.result()),  # type: ignore[dict-item]
                            "before_exit": True}, None
                next_message = asyncio.create_task(self._next_message())
                budget = deadline - time.monotonic() if ended_by is None else KILL_GRACE_S
                waiting = {next_message} if ended_by is not None else {next_message, cancel_wait}
                for word in (pipes_closed, ended):
                    if ended_by is None and word is not None and not word.done():
                        waiting.add(word)
                done, _ = await asyncio.wait(waiting, timeout=max(budget, 0), return_when=asyncio.FIRST_COMPLETED)
                if next_message in done:
                    message = next_message.result()
                    if message.get("type") == "exited" and message.get("run_id") == run_id:
                        return message, ended_by
                    continue
                next_message.cancel()
                if pipes_closed in done or ended in done:
                    continue  # both together end the run; either alone, the exit tells
                if ended_by is not None:  # killed, yet no exit within the grace: the sandbox is stuck
                    await self.close()
                    raise SandboxDied("the sandbox did not end the run")
                ended_by = RunStatus.CANCELLED if cancel_wait in done else RunStatus.TIMEOUT
                zp.send(self.control, {"type": "kill", "run_id": run_id})  # type: ignore[arg-type]
        finally:
            for task in (cancel_wait, pipes_closed, ended, next_message):  # none left to fail unheard
                if task is not None:
                    task.cancel()
            if door is not None and door.fileno() >= 0:
                asyncio.get_running_loop().remove_reader(door.fileno())

    async def _await_late_exit(self, run_id: str, session: str | None) -> None:
        """After a run was reported done: every process of it is gone (or killed), then its cache is tended.

        Its init has reaped the run's process and kills what is left at once; a sandbox that has not
        done so within EXIT_GRACE_S is restarted, so the next run gets a sound sandbox.
        """
        try:
            await self._await_exit(run_id, time.monotonic() + EXIT_GRACE_S, asyncio.Event(), None)
            if self.caches is not None:
                await asyncio.to_thread(self.caches.after_run, session)
        except (SandboxDied, OSError) as exc:
            if self.ended_by_itself:  # killed from outside: its pool starts a new one (two would run at once)
                await self.close()
                return
            log.warning("sandbox %s: %s after run %s; restarting it", self.name, exc, run_id)
            try:
                await self.restart()
            except Exception:
                log.exception("sandbox %s could not be restarted", self.name)
                await self.close()

    async def _previous_run_gone(self) -> None:
        waiting, self._exit_wait = self._exit_wait, None
        if waiting is not None:
            await waiting


def _next_word(sock: socket.socket) -> asyncio.Future[dict[str, Any] | None]:
    """The next message on a non-blocking socket (None at its end). The caller removes the reader
    if it stops waiting before the word comes."""
    loop = asyncio.get_running_loop()
    word: asyncio.Future[dict[str, Any] | None] = loop.create_future()

    def readable() -> None:
        try:
            message, fds = zp.receive(sock)
        except BlockingIOError:
            return
        except OSError:
            message, fds = None, []
        zp.close_all(fds)
        loop.remove_reader(sock.fileno())
        if not word.done():
            word.set_result(message)

    loop.add_reader(sock.fileno(), readable)
    return word


def _close_door(message: dict[str, Any]) -> None:
    door = message.get("door")
    if isinstance(door, socket.socket):
        door.close()


def _ms_since(start: float) -> float:
    return (time.monotonic() - start) * 1000
