"""The worker's link to a warm sandbox's zygote: the sandbox's processes, its control socket, the spare it offers.

``WarmSandbox`` (warm_sandbox.py) is a ``ZygoteLink`` that runs programs: this part starts and
closes the sandbox and carries the zygote's words; the run's part hands a run over and awaits its end.

Tasks and ownership (all in the worker's event loop)::

    ZygoteLink
      ├─ the sandbox process tree (unshare/setpriv/bwrap -> zygote): owned here,
      │  killed by ``close()``; bwrap's --die-with-parent covers a worker crash
      ├─ its cgroups: a group of its own each start, removed on ``close()``
      │  (later, once its processes have left)
      ├─ _log_stderr task: the sandbox's stderr, into the worker's log at DEBUG
      └─ _read_zygote task: every zygote message into ``_messages``, but a
         ``spare``: its door is held here (``_spare``) for the next run

Invariants kept here: everything a run's environment holds is built from an
allow-list, never the worker's (``zygote_environment``); the zygote's end makes
the sandbox not ``alive`` at once (``on_died``), so no run is handed to it; an
offered spare is taken once, and one whose init has gone is passed over
(``_take_spare``); the control socket is unwatched before it is closed.
"""

from __future__ import annotations

import asyncio
import itertools
import logging
import os
import select
import socket
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from jaxplay.browser_protocol import RunStatus
from jaxplay.sandbox.caches.compile_cache import GALLERY, CompileCaches
from jaxplay.sandbox.engine import libraries, warmup
from jaxplay.sandbox.engine import zygote_protocol as zp
from jaxplay.sandbox.isolation import bwrap, cgroups, gpu
from jaxplay.sandbox.isolation.cgroups import SandboxCgroup, no_cgroup_cpu_fairness
from jaxplay.sandbox.isolation.numeric_settings import numerical_library_settings
from jaxplay.settings import Settings

log = logging.getLogger("jaxplay.sandbox")

START_TIMEOUT_S = 120.0
CGROUP_REMOVE_TRIES = 20  # 0.5 s apart
_GROUP_NUMBERS = itertools.count()  # each start's cgroups are its own


class SandboxDied(RuntimeError):
    pass


class NotStarted(Exception):
    """The run ended (its deadline, or a cancel) before a process was ready for it."""

    def __init__(self, status: RunStatus) -> None:
        super().__init__(status)
        self.status = status


@dataclass(frozen=True)
class SandboxRuntime:
    """A JAX runtime's interpreter and the paths its sandbox binds (sandbox/runtimes/store.py)."""
    interpreter: Path
    exposed: list[Path]


class ZygoteLink:
    """A sandbox with a zygote in it, started and closed here, and what its zygote says and offers."""

    # Set only by the system-call recording's sandboxes (sandbox/syscall_recording.py): the
    # sandbox started under strace, its zygote told to install the recording filter.
    launch_prefix: tuple[str, ...] = ()
    zygote_flags: tuple[str, ...] = ()

    def __init__(self, index: int, settings: Settings, name: str, gpus: tuple[str, ...] = (),
                 caches: CompileCaches | None = None, runtime: SandboxRuntime | None = None) -> None:
        self.index = index
        # Which Python (hence which JAX) the sandbox runs, and what it exposes; None: the worker's own.
        self.runtime = runtime
        self.gpus = gpus  # the GPUs its seat owns (/dev/nvidiaN): one run on them at a time
        self.caches = caches
        self.settings = settings
        self.name = f"{name}-{index}"
        self.process: asyncio.subprocess.Process | None = None
        self.control: socket.socket | None = None
        self.cgroup: SandboxCgroup | None = None
        self.versions: dict[str, Any] = {}
        self._messages: asyncio.Queue[dict[str, Any] | None] = asyncio.Queue()
        self._reader: asyncio.Task[None] | None = None
        self._spare: tuple[int, socket.socket] | None = None  # the warm spare's pid and door, from ``spare``
        self._spare_offered = asyncio.Event()
        self.alive = False
        self.on_died: Callable[[], None] | None = None  # told when the sandbox ends by itself, between runs or in one
        self.ended_by_itself = False  # since its last start: its zygote's end was heard, not a close

    # --- lifecycle ---------------------------------------------------------

    async def start(self) -> None:
        parent_end, child_end = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        parent_end.setblocking(False)
        isolated = self.settings.sandbox != "none"
        interpreter = str(self.runtime.interpreter) if self.runtime else None
        inner = [*bwrap.zygote_command(child_end.fileno(), isolated, interpreter), *self.zygote_flags]
        env = self.zygote_environment()
        if isolated:
            # A group of its own each start: the last start's may still be emptying (removed below, later).
            name = cgroups.group_name(os.getpid(), self.name, next(_GROUP_NUMBERS))
            self.cgroup = SandboxCgroup.create(name, self.memory_limit_bytes, self.settings.cgroups)
            if self.cgroup is None:
                log.info("sandbox %s: CPU shared between sandboxes by %s", self.name, no_cgroup_cpu_fairness())
            procs = self.cgroup.procs_files() if self.cgroup and os.geteuid() == 0 else []
            devices = gpu.device_nodes(self.gpus)
            extra = self.caches.bwrap_binds() if self.caches else []
            command = [*self.launch_prefix, *bwrap.sandbox_command(inner, env, procs, devices, extra,
                                                                   self.runtime.exposed if self.runtime else None)]
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
        self._reader = asyncio.create_task(self._read_zygote(self._messages))
        asyncio.create_task(self._log_stderr(self.process))
        ready = await asyncio.wait_for(self._next_message(), START_TIMEOUT_S)
        if ready.get("type") != "ready":
            raise SandboxDied(f"zygote sent {ready!r} instead of ready")
        self.versions = ready
        self.alive = True
        self.ended_by_itself = False
        if self.cgroup is not None:  # started at a sandbox's full weight (a run may be waiting); now between runs
            self.cgroup.set_running(False)
        log.info("sandbox %s ready (zygote pid %s, sandbox %s)", self.name, self.process.pid, self.settings.sandbox)

    def zygote_environment(self) -> dict[str, str]:
        """Everything a run's environment holds, built here from an allow-list (never the worker's).

        It is the zygote's, so a spare starts its backend with the run's settings."""
        env = {"PATH": "/usr/bin:/bin", "HOME": "/tmp", "PYTHONPATH": str(bwrap.IMPORT_ROOT),
               "PYTHONDONTWRITEBYTECODE": "1", "LANG": "C.UTF-8",
               "PYTHONHASHSEED": "0",  # set and dict orders, hence output, repeat from run to run
               "XLA_FLAGS": f"--xla_force_host_platform_device_count={self.settings.cpu_devices}",
               "MPLBACKEND": "Agg", "MPLCONFIGDIR": "/tmp/.matplotlib", "TMPDIR": "/tmp"}
        if self.runtime is not None:
            del env["PYTHONPATH"]  # another Python: it loads jaxplay alone (sandbox/runtimes/launch.py)
        env.update(gpu.gpu_environment(self.gpus, self.settings))
        env.update(numerical_library_settings(os.environ))  # a run computes what plain Python computes here
        env[libraries.LISTED_VARIABLE] = ",".join(libraries.listed_distributions())
        env[warmup.PROGRAM_VARIABLE] = warmup.program_from_examples(GALLERY)
        return env

    def fill_environment(self) -> dict[str, str]:
        """The shared compile cache's fill process: the runs' settings, so its entries match theirs."""
        env = self.zygote_environment()
        del env[warmup.PROGRAM_VARIABLE]  # the fill runs every example itself
        return {**env, "PYTHONPATH": str(bwrap.IMPORT_ROOT), "HOME": str(self.settings.compile_cache_dir)}

    async def close(self) -> None:
        self.alive = False
        if self._reader:
            self._reader.cancel()
        if self._spare is not None:
            self._spare[1].close()
            self._spare = None
        if self.control:
            # Unwatched before it is closed: the cancelled reader runs its cleanup only later, when the fd
            # number may already be another socket's (a restarted sandbox's), which the loop would then
            # believe watched while epoll had dropped it (a start that waits forever for "ready").
            asyncio.get_running_loop().remove_reader(self.control.fileno())
            self.control.close()
            self.control = None
        if self.process and self.process.returncode is None:
            try:
                os.killpg(self.process.pid, 9)
            except ProcessLookupError:
                pass
            await self.process.wait()
        if self.cgroup:
            group, self.cgroup = self.cgroup, None
            if not group.remove():
                removal = asyncio.create_task(_remove_when_empty(group))
                _REMOVALS.add(removal)
                removal.add_done_callback(_REMOVALS.discard)

    async def restart(self) -> None:
        await self.close()
        await self.start()

    @property
    def memory_limit_bytes(self) -> int:
        return self.settings.memory_limit_mb << 20

    # --- the zygote's words and spares -------------------------------------

    async def _read_zygote(self, messages: asyncio.Queue[dict[str, Any] | None]) -> None:
        """Every zygote message into ``messages`` (a door that comes with one travels in it as ``door``),
        but a ``spare``: its door is kept for the next run, in place of any before it.

        The zygote's end (the sandbox died, killed from outside or out of memory) makes the sandbox not
        alive at once, so no run is handed to it: the seat's next run starts it again (RuntimePool)."""
        loop = asyncio.get_running_loop()
        assert self.control is not None
        control = self.control
        readable = asyncio.Event()
        loop.add_reader(control.fileno(), readable.set)
        try:
            while True:
                await readable.wait()
                readable.clear()
                while True:
                    try:
                        message, fds = zp.receive(control)
                    except BlockingIOError:
                        break
                    if message is not None and fds:
                        message["door"] = socket.socket(fileno=fds.pop(0))
                        zp.close_all(fds)
                    if message is not None and message.get("type") == "spare" and "door" in message:
                        self._offered(message["pid"], message["door"])
                        continue
                    messages.put_nowait(message)
                    if message is None:
                        self._died(messages)
                        return
        except (OSError, ValueError):
            messages.put_nowait(None)
            self._died(messages)
        except asyncio.CancelledError:  # closed: its queue may be a restarted sandbox's by now
            messages.put_nowait(None)
        finally:
            self._spare_offered.set()  # whoever waits for a spare learns that none will come
            if control.fileno() >= 0:
                loop.remove_reader(control.fileno())

    def _died(self, messages: asyncio.Queue[dict[str, Any] | None]) -> None:
        if messages is self._messages and self.alive:  # this start's zygote, not one closed before
            self.alive = False
            self.ended_by_itself = True
            log.warning("sandbox %s ended unexpectedly", self.name)
            if self.on_died is not None:
                self.on_died()

    @property
    def has_spare(self) -> bool:
        """A spare is offered and not yet taken (it may have died since: taking it finds out)."""
        return self._spare is not None

    def _offered(self, pid: int, door: socket.socket) -> None:
        if self._spare is not None:
            self._spare[1].close()  # the zygote replaced a spare that died
        self._spare = (pid, door)
        self._spare_offered.set()

    async def _take_spare(self, deadline: float, cancelled: asyncio.Event) -> tuple[int, socket.socket]:
        """The warm spare's pid and door, waiting (within the run's deadline) for the zygote to offer one."""
        while True:
            if self._spare is None:
                if self._reader is None or self._reader.done():
                    raise SandboxDied("the sandbox process ended unexpectedly")
                self._spare_offered.clear()
                offered, stop = asyncio.create_task(self._spare_offered.wait()), asyncio.create_task(cancelled.wait())
                done, _ = await asyncio.wait({offered, stop}, timeout=max(deadline - time.monotonic(), 0),
                                             return_when=asyncio.FIRST_COMPLETED)
                offered.cancel()
                stop.cancel()
                if offered not in done:
                    raise NotStarted(RunStatus.CANCELLED if stop in done else RunStatus.TIMEOUT)
                continue
            (pid, door), self._spare = self._spare, None
            if select.select([door], [], [], 0)[0]:
                door.close()  # its init has gone (it never writes before its run): the zygote offers another
                continue
            return pid, door

    async def _next_message(self) -> dict[str, Any]:
        message = await self._messages.get()
        if message is None:
            self.alive = False
            raise SandboxDied("the sandbox process ended unexpectedly")
        return message

    async def _log_stderr(self, process: asyncio.subprocess.Process) -> None:
        assert process.stderr is not None
        async for line in process.stderr:
            log.debug("sandbox %s: %s", self.name, line.decode(errors="replace").rstrip())

    def _tell_zygote(self, message: dict[str, Any]) -> None:
        assert self.control is not None
        try:
            zp.send(self.control, message)
        except OSError as exc:
            raise SandboxDied(f"the zygote cannot be reached ({exc})") from None


_REMOVALS: set[asyncio.Task[None]] = set()  # closed sandboxes' groups, waiting for their last processes


async def groups_removed(timeout_s: float) -> None:
    """Wait, at most ``timeout_s``, for the groups of closed sandboxes to go: a worker on its way out, which
    would otherwise leave them on the host until a later worker's start removes them."""
    if _REMOVALS:
        await asyncio.wait(set(_REMOVALS), timeout=timeout_s)


async def _remove_when_empty(group: SandboxCgroup) -> None:
    """A closed sandbox's processes leave their groups within moments of its init's death."""
    for _ in range(CGROUP_REMOVE_TRIES):
        await asyncio.sleep(0.5)
        if group.remove():
            return
    log.warning("cgroups %s still hold processes; the next worker start removes them once empty",
                ", ".join(str(p.parent) for p in group.procs_files()))
