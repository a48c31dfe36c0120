"""The worker agent: dials the server, advertises its devices, runs jobs in warm sandboxes.

Tasks and ownership::

    WorkerAgent.serve_forever
      ├─ starts the sandboxes of its own JAX (one per seat) and probes the
      │  devices once; checks the other JAX runtimes it offers (agent_runtimes.py),
      │  whose sandboxes start at first use; a sweep stops runtimes left idle. The
      │  default runtime (what a run that names none gets: the newest offered,
      │  ``--default-runtime``) is warm on every seat and never stopped; when it
      │  is not the worker's own JAX, that one is a runtime like the others
      └─ per connection: the receive loop (jobs, cancels), one writer task that
         sends every outgoing frame in order, and one task per job in flight.
         A lost connection kills the runs in flight (the server has already
         failed them) and the agent dials again with backoff.

A first SIGTERM (or Ctrl+C) drains it (sandbox/agent_drain.py): no new run,
the runs in hand finish within ``--shutdown-grace-s``, then it leaves.

A job takes a seat (``--slots`` of them; on a GPU host each owns its GPUs),
then its runtime's sandbox on that seat (sandbox/engine/runtime_pool.py); its
way from arrival to ``finished`` is in sandbox/agent_jobs.py.

A refused token is final: the agent prints the server's reason and exits 2.
"""

from __future__ import annotations

import asyncio
import logging
import os
import resource
import socket
from typing import Any

import websockets

from jaxplay import worker_protocol as wp
from jaxplay.sandbox import agent_runtimes
from jaxplay.sandbox.agent_drain import WorkerDrain
from jaxplay.sandbox.agent_jobs import JobsOnSeats
from jaxplay.sandbox.caches.compile_cache import CompileCaches
from jaxplay.sandbox.engine import zygote_link
from jaxplay.sandbox.engine.peak_cache import HostPeak, PeakCache, checked
from jaxplay.sandbox.engine.peak_keeping import PeakKeeper
from jaxplay.sandbox.engine.runtime_pool import RuntimePool, SandboxFactory, Seats
from jaxplay.sandbox.engine.warm_sandbox import WarmSandbox
from jaxplay.sandbox.engine.zygote_link import SandboxRuntime
from jaxplay.sandbox.isolation import bwrap, cgroups, gpu
from jaxplay.settings import Settings

log = logging.getLogger("jaxplay.worker")

RECONNECT_DELAYS_S = (0.2, 0.5, 1, 2, 5)
# How long a stopping worker waits for its closed sandboxes' cgroups to empty and go (they do within moments).
GROUPS_REMOVED_WAIT_S = 3.0


class TokenRefused(SystemExit):
    def __init__(self, message: str) -> None:
        super().__init__(2)
        self.message = message


class WorkerCannotStart(SystemExit):
    """A host the worker must not serve from as configured (e.g. GPUs JAX cannot use)."""

    def __init__(self, message: str) -> None:
        super().__init__(3)
        self.message = message


def allow_priority_restore() -> None:
    """Let sandboxed runs raise their priority back to nice 0 (never above): a spare prepares
    at nice 19 and its run returns to normal priority (RLIMIT_NICE 20 means a floor of nice 0)."""
    try:
        soft, hard = resource.getrlimit(resource.RLIMIT_NICE)
        target = 20 if os.geteuid() == 0 else min(20, hard)
        resource.setrlimit(resource.RLIMIT_NICE, (target, max(target, hard)))
    except (ValueError, OSError):
        pass


class WorkerAgent(JobsOnSeats):
    def __init__(self, settings: Settings, server_url: str, token: str, name: str | None = None) -> None:
        self.settings = settings
        self.server_url = server_url
        self.token = token
        self.name = name or socket.gethostname()
        self.sandboxes: list[WarmSandbox] = []  # those of its own JAX, one per seat
        self.seats = Seats(0)
        self.seat_devices: list[tuple[str, ...]] = []
        self.running: dict[str, WarmSandbox | None] = {}  # None while the run's sandbox starts
        self.cancelled_early: set[str] = set()
        self.pools: dict[str, RuntimePool] = {}  # JAX version -> its sandboxes
        self.default_runtime = ""
        self.runtime_entries: list[wp.WorkerRuntime] = []
        self.description: dict[str, Any] = {}
        # Measured once per host (sandbox/engine/calibration.py); every sandbox gives it to its runs.
        self.peak = HostPeak()  # kept by sandbox/engine/peak_keeping.py: measured when idle, the best, re-checked
        self.peaks: PeakKeeper | None = None
        # Since this process started; reported to the server in every ``slots`` message.
        self.oom_kills = 0
        self.crashes = 0
        self.outbox: asyncio.Queue[str] | None = None
        self.connection: Any = None  # the open websocket, while there is one
        self.jobs: set[asyncio.Task[None]] = set()  # one per job in hand, from its arrival to its finished
        self.drain: WorkerDrain | None = None
        self.caches: CompileCaches | None = None
        self._fill: asyncio.Task[None] | None = None
        self._runtime_fills: list[asyncio.Task[None]] = []

    async def start_sandboxes(self) -> None:
        """Start the worker's own JAX on every seat and probe the devices; a host this worker must not
        serve from as configured raises ``WorkerCannotStart`` naming the cause (its sandboxes closed)."""
        if self.settings.cgroups != "off" and (removed := await asyncio.to_thread(cgroups.remove_abandoned_groups)):
            log.info("worker %s: removed %d empty cgroups of workers that are gone", self.name, removed)
        try:
            devices = self.seat_devices = gpu.slot_devices(self.settings)
        except ValueError as exc:  # a setting that cannot work here: say which
            raise WorkerCannotStart(str(exc)) from exc
        own = await self.start_own_runtime(devices)
        if devices[0] and self.description.get("backend") == "cpu":
            # --allow-cpu-fallback on an accelerator host: CPU runs on --slots sandboxes, not one per GPU node.
            await own.close()
            devices = self.seat_devices = [() for _ in range(max(1, self.settings.slots))]
            own = await self.start_own_runtime(devices)
        backend = "gpu" if devices[0] else "cpu"
        peaks = self.peaks = PeakKeeper(PeakCache(self.settings.compile_cache_dir), self.description, self.calibrate,
                                        lambda: len(self.running))
        self.peak.peak = await peaks.initial()
        own.name = self.description["jax_version"]
        others, listed = await agent_runtimes.start_offered(
            self.settings, own.name, lambda name, runtime: self.runtime_sandboxes(backend, name, runtime),
            self.probe)
        self.pools = {own.name: own, **others}
        for pool in others.values():
            self.fill_on_first_use(pool)
        default = agent_runtimes.default_of(self.settings.default_runtime, own.name, self.pools)
        self.default_runtime = await agent_runtimes.warm_default(self.pools, own, default, len(devices), self.name)
        entries = [agent_runtimes.entry(own.name, self.description, False), *listed]
        self.runtime_entries = agent_runtimes.marked_default(entries, self.default_runtime)
        asyncio.create_task(agent_runtimes.sweep_idle(self.pools, max(1.0, min(30.0, self.settings.runtime_idle_s / 4))))
        self.seats = Seats(len(devices))
        asyncio.create_task(peaks.forever(self.peak_changed))
        if self.caches is not None:
            self._fill = asyncio.create_task(self.caches.fill(self.sandboxes[0].fill_environment()))
        log.info("worker %s: %s x%s (%s), %d slot(s)", self.name, self.description["backend"],
                 self.description["device_count"], self.description["device_kind"], len(self.sandboxes))

    async def start_own_runtime(self, devices: list[tuple[str, ...]]) -> RuntimePool:
        """The worker's own JAX, started on every seat and probed; refused with the cause when it cannot be."""
        self.caches = self.compile_caches("gpu" if devices[0] else "cpu")
        own = RuntimePool("", lambda seat: WarmSandbox(seat, self.settings, self.name, devices[seat], self.caches,
                                                       peak=self.peak),
                          stays_warm=True, idle_s=self.settings.runtime_idle_s)
        try:
            await own.start(list(range(len(devices))))
            self.sandboxes = [own.sandboxes[seat] for seat in range(len(devices))]
            self.description = await self.probe(self.sandboxes[0])
        except (bwrap.SandboxUnavailable, RuntimeError) as exc:
            await own.close()
            raise WorkerCannotStart(str(exc)) from exc
        refusal = gpu.fallback_refusal(self.description, devices[0], self.settings.allow_cpu_fallback)
        if refusal:
            await own.close()
            raise WorkerCannotStart(refusal)
        return own

    def runtime_sandboxes(self, backend: str, version: str, runtime: SandboxRuntime) -> SandboxFactory:
        """Sandboxes of another JAX runtime: their own compile caches (entries of one JAX never serve another)."""
        caches = self.compile_caches(f"{backend}-jax-{version}")
        return lambda seat: WarmSandbox(seat, self.settings, f"{self.name}-jax{version}", self.seat_devices[seat],
                                        caches, runtime, self.peak)

    def fill_on_first_use(self, pool: RuntimePool) -> None:
        """A runtime's shared compile cache is filled (by its own Python) when it is first used, not at start."""
        def fill(sandbox: WarmSandbox) -> None:
            if sandbox.caches is not None and pool.runtime is not None:
                self._runtime_fills.append(asyncio.create_task(
                    sandbox.caches.fill(sandbox.fill_environment(), str(pool.runtime.interpreter))))
        pool.on_first_start = fill

    def compile_caches(self, backend: str) -> CompileCaches | None:
        if self.settings.sandbox == "none":
            return None
        caches = CompileCaches(self.settings, backend, bwrap.SANDBOX_UID if os.geteuid() == 0 else None)
        caches.prepare()
        return caches

    async def calibrate(self) -> wp.DevicePeak | None:
        """One sandboxed probe measuring the device's peak, on seat 0 of the worker's own JAX, held
        meanwhile (``peak_keeping`` asks only when no run is in flight); None when it could not."""
        held = self.seats.count == 0 or 0 in self.seats.free  # no seats yet: the worker is starting
        if not held:
            return None
        if self.seats.count:
            self.seats.free.remove(0)
        try:
            own = self.pools.get(self.default_runtime)
            sandbox = await own.sandbox_for(0) if own is not None else self.sandboxes[0]
            report = await self.probe(sandbox, calibrate=True)
        except RuntimeError as exc:
            log.warning("worker %s: the device peak could not be measured: %s", self.name, exc)
            return None
        finally:
            if self.seats.count:
                self.seats.give(0)
        peak = checked(report.get("device_peak"))
        if peak is None:
            log.warning("worker %s: the device peak could not be measured: %s", self.name,
                        report.get("device_peak_error", "no figures"))
        return peak

    def peak_changed(self, peak: wp.DevicePeak | None) -> None:
        """A re-check kept a better peak: runs started from now on draw their rooflines against it."""
        self.peak.peak = peak

    async def probe(self, sandbox: WarmSandbox, calibrate: bool = False) -> dict[str, Any]:
        """The devices as a sandboxed run sees them; with ``calibrate`` also their measured peak."""
        found: list[dict[str, Any]] = []

        def keep(event: dict[str, Any]) -> None:
            if event.get("type") == "probe":
                found.append(event)
            else:
                log.warning("device probe: %s", event)

        result = await sandbox.run("probe", "", 120.0, wp.JobOptions(), keep, probe=True, calibrate=calibrate)
        if not found:
            raise RuntimeError(f"device probe failed: {result.status} {result.message or ''}")
        return found[0]

    def hello(self) -> wp.WorkerHello:
        d = self.description
        # The JAX a run that names none gets: the default runtime's, which may not be the worker's own.
        default = next((e for e in self.runtime_entries if e.default), None) or agent_runtimes.entry(
            d["jax_version"], d, True)
        return wp.WorkerHello(
            token=self.token, name=self.name, backend=d["backend"], device_kind=d["device_kind"],
            device_count=d["device_count"], jax_version=default.jax_version,
            jaxlib_version=default.jaxlib_version,
            slots=len(self.sandboxes), platform_version=d.get("platform_version", ""),
            device_memory_bytes=d.get("device_memory_bytes", 0),
            libraries=default.libraries or d.get("libraries", {}),
            device_peak=self.peak.peak,
            runtimes=tuple(self.runtime_entries),
        )

    async def serve_forever(self) -> None:
        """Serve until drained (a stop signal) or refused; the pools close on the way out."""
        allow_priority_restore()
        self.drain = WorkerDrain(self, self.settings.shutdown_grace_s)
        self.drain.install()
        serving = asyncio.create_task(self._start_and_serve())
        leaving = asyncio.create_task(self.drain.finished.wait())
        try:
            await asyncio.wait({serving, leaving}, return_when=asyncio.FIRST_COMPLETED)
            if serving.done():
                serving.result()  # a refusal, or a start that failed, is raised
        finally:
            for task in (serving, leaving):
                task.cancel()
            await asyncio.gather(serving, leaving, return_exceptions=True)
            await asyncio.gather(*(pool.close() for pool in self.pools.values()), return_exceptions=True)
            await zygote_link.groups_removed(GROUPS_REMOVED_WAIT_S)

    async def _start_and_serve(self) -> None:
        await self.start_sandboxes()
        attempt = 0
        assert self.drain is not None
        while not self.drain.requested:  # a draining worker never dials again: nobody would get its results
            try:
                async with websockets.connect(self.server_url, max_size=None, ping_interval=20) as ws:
                    attempt = 0
                    await self.session(ws)
            except TokenRefused:
                raise
            except (OSError, websockets.WebSocketException) as exc:
                log.info("worker %s: connection to %s lost (%s)", self.name, self.server_url, exc,
                         exc_info=log.isEnabledFor(logging.DEBUG))
            await self.abandon_runs()
            await asyncio.sleep(RECONNECT_DELAYS_S[min(attempt, len(RECONNECT_DELAYS_S) - 1)])
            attempt += 1
        await self.drain.finished.wait()  # lost the connection while draining: the drain still ends it

    async def session(self, ws: Any) -> None:
        outbox: asyncio.Queue[str] = asyncio.Queue()
        await ws.send(wp.encode(self.hello()))
        reply = wp.decode(await ws.recv())
        if isinstance(reply, wp.ServerRefused):
            raise TokenRefused(reply.message)
        log.info("worker %s joined %s", self.name, self.server_url)
        self.outbox, self.connection = outbox, ws
        self.report_slots()
        writer = asyncio.create_task(self._write(ws, outbox))
        try:
            async for frame in ws:
                message = wp.decode(frame)
                if isinstance(message, wp.ServerJob):
                    job = asyncio.create_task(self.execute(message, outbox))
                    self.jobs.add(job)
                    job.add_done_callback(self.jobs.discard)
                elif isinstance(message, wp.ServerCancel):
                    self.cancel(message.run_id)
        finally:
            self.outbox = self.connection = None
            writer.cancel()

    async def _write(self, ws: Any, outbox: asyncio.Queue[str]) -> None:
        while True:
            await ws.send(await outbox.get())
            outbox.task_done()

    def send(self, message: Any) -> None:
        """A frame for the server, if connected (a worker without a connection has nobody to tell)."""
        if self.outbox is not None:
            self.outbox.put_nowait(wp.encode(message))

    async def leave(self, flush_s: float) -> None:
        """The drain's end: the frames still waiting go out, then the connection closes cleanly."""
        outbox, ws = self.outbox, self.connection
        if outbox is None or ws is None:
            return
        try:
            await asyncio.wait_for(outbox.join(), flush_s)
            await ws.close()
        except (TimeoutError, OSError, websockets.WebSocketException) as exc:
            log.warning("worker %s: the last results may not have reached the server: %s", self.name, exc)

    def report_slots(self) -> None:
        if self.outbox is not None:
            self.outbox.put_nowait(wp.encode(wp.WorkerSlots(busy=len(self.running), total=len(self.sandboxes),
                                                            oom_kills=self.oom_kills, crashes=self.crashes)))
