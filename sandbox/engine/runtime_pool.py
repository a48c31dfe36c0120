"""The warm sandboxes of one JAX runtime: started at worker start (the worker's own JAX) or at first
use, stopped after ``--runtime-idle-s`` without a run (every other runtime).

A worker has ``--slots`` seats (one run each, and on a GPU host the GPU that
seat owns); every runtime may have a sandbox on each seat, made when a run of
that runtime first sits there. The agent hands out seats, so all runtimes
together never run more than ``--slots`` programs at once.

Tasks and ownership (all in the worker's event loop)::

    RuntimePool
      ├─ its WarmSandboxes, one per seat used (warm_sandbox.py)
      ├─ per seat, a lock held while that seat's sandbox starts
      ├─ ``start_again``: a sandbox of the worker's own JAX that dies between runs
      │  is started again at once, not at the seat's next run
      └─ ``stop_if_idle``: called by the agent's idle sweep; closes every sandbox
         of a pool with no run in flight and none for ``idle_s``
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from typing import Any

from jaxplay.sandbox.engine.warm_sandbox import WarmSandbox
from jaxplay.sandbox.engine.warmup import IDLE_BEFORE_WARMING_S
from jaxplay.sandbox.engine.zygote_link import SandboxRuntime

log = logging.getLogger("jaxplay.worker")

SandboxFactory = Callable[[int], WarmSandbox]


# A run whose runtime is warm only on a busy seat waits this long for that seat before starting a
# sandbox on a free one (a start costs ~1.3 s and ~200 MB; a run on it usually ends sooner).
WARM_SEAT_WAIT_S = 1.0
START_AGAIN_AFTER_S = 5.0  # between tries to start again a sandbox of the worker's own JAX that died


class Seats:
    """The worker's free seats. A run takes one where its runtime's sandbox already runs, when it can:
    a runtime in use then keeps one warm sandbox instead of starting one on every seat.

    Among those, a run that comes right after another (its seat given back less than
    ``warmup.IDLE_BEFORE_WARMING_S`` ago) takes that seat when its spare is offered: its spare, forked
    during the run before, has not idled long enough to start warming, while the other seats' spares
    may be mid-warming, which the run would wait for. Any later run takes the seat idle longest, whose
    spare has most likely done its warming; the seat given back last is likelier to be warming now
    (print(1) 0.5 s apart: ~20 ms against ~23 ms, noisy)."""

    def __init__(self, count: int) -> None:
        self.count = count
        self.free = list(range(count))  # the seat given back last is last
        self._given_at: dict[int, float] = {}  # the event loop's time each seat was given back
        self._waiting: list[asyncio.Future[None]] = []

    async def take(self, warm: Callable[[int], bool], spare_ready: Callable[[int], bool] = lambda _: False) -> int:
        loop = asyncio.get_running_loop()
        give_up_at = loop.time() + WARM_SEAT_WAIT_S
        while True:
            seat = self._just_given(loop.time())
            if seat is not None and not (warm(seat) and spare_ready(seat)):
                seat = None
            if seat is None:  # the seat idle longest: its spare most likely warm and idle
                seat = next((s for s in self.free if warm(s)), None)
            warm_elsewhere = any(warm(s) for s in range(self.count) if s not in self.free)
            if seat is None and self.free and (not warm_elsewhere or loop.time() >= give_up_at):
                seat = self.free[0]
            if seat is not None:
                self.free.remove(seat)
                return seat
            waiter = loop.create_future()
            self._waiting.append(waiter)
            timeout = max(0.0, give_up_at - loop.time()) if self.free else None
            try:
                await asyncio.wait_for(asyncio.shield(waiter), timeout)
            except TimeoutError:
                pass
            finally:
                if waiter in self._waiting:
                    self._waiting.remove(waiter)

    def _just_given(self, now: float) -> int | None:
        """The seat given back last, if that was too recently for its spare to have started warming."""
        if self.free and now - self._given_at.get(self.free[-1], float("-inf")) < IDLE_BEFORE_WARMING_S:
            return self.free[-1]
        return None

    def give(self, seat: int) -> None:
        self.free.append(seat)
        self._given_at[seat] = asyncio.get_running_loop().time()
        for waiter in self._waiting:  # each looks again: the seat may be the one it waits for
            if not waiter.done():
                waiter.set_result(None)


class RuntimePool:
    def __init__(self, name: str, make_sandbox: SandboxFactory, stays_warm: bool, idle_s: float,
                 runtime: SandboxRuntime | None = None) -> None:
        self.name = name  # the JAX version
        self.runtime = runtime
        self.make_sandbox = make_sandbox
        self.stays_warm = stays_warm  # the worker's own JAX: never stopped for being idle
        self.idle_s = idle_s
        self.sandboxes: dict[int, WarmSandbox] = {}
        self.busy = 0
        self.last_used = time.monotonic()
        self.starts = 0  # sandboxes started at first use (after idle), for the log and the benchmarks
        # Told of this runtime's first sandbox to start (the agent then fills its shared compile cache).
        self.on_first_start: Callable[[WarmSandbox], None] | None = None
        self._locks: dict[int, asyncio.Lock] = {}
        self._closed = False

    async def start(self, seats: list[int]) -> None:
        await asyncio.gather(*(self.sandbox_for(seat) for seat in seats))

    async def sandbox_for(self, seat: int) -> WarmSandbox:
        """The seat's sandbox of this runtime, started now if it has none or it died."""
        async with self._locks.setdefault(seat, asyncio.Lock()):
            sandbox = self.sandboxes.get(seat)
            if sandbox is not None and sandbox.alive:
                return sandbox
            if sandbox is not None:
                await sandbox.close()
            sandbox = self.make_sandbox(seat)
            started = time.monotonic()
            try:
                await sandbox.start()
            except BaseException:
                await sandbox.close()
                raise
            self.sandboxes[seat] = sandbox
            sandbox.on_died = lambda: self._died_on(seat)
            self.starts += 1
            if self.on_first_start is not None:
                first, self.on_first_start = self.on_first_start, None
                first(sandbox)
            log.info("runtime %s: slot %d: sandbox %s started in %.2f s", self.name, seat, sandbox.name,
                     time.monotonic() - started)
            return sandbox

    def _died_on(self, seat: int) -> None:
        if self.stays_warm and not self._closed:
            asyncio.create_task(self.start_again(seat))

    async def start_again(self, seat: int) -> None:
        """The seat's sandbox started (again), trying every START_AGAIN_AFTER_S until it starts or the pool
        closes; the agent waits on it too before giving back the seat of a run whose sandbox died."""
        while not self._closed:
            try:
                await self.sandbox_for(seat)
                return
            except Exception as exc:  # killed again while it started, say: its next run would wait for it
                log.warning("runtime %s: slot %d: the sandbox that ended could not be started again (%s); "
                            "trying again in %.0f s", self.name, seat, exc, START_AGAIN_AFTER_S)
            await asyncio.sleep(START_AGAIN_AFTER_S)

    def warm_on(self, seat: int) -> bool:
        sandbox = self.sandboxes.get(seat)
        return sandbox is not None and sandbox.alive

    def spare_ready_on(self, seat: int) -> bool:
        """Whether the seat's sandbox of this runtime has a spare its zygote has offered."""
        sandbox = self.sandboxes.get(seat)
        return sandbox is not None and sandbox.alive and sandbox.has_spare

    def taken(self) -> None:
        self.busy += 1
        self.last_used = time.monotonic()

    def released(self) -> None:
        self.busy -= 1
        self.last_used = time.monotonic()

    async def stop_if_idle(self, now: float | None = None) -> bool:
        """Close every sandbox when nothing ran for ``idle_s``; True if it stopped any."""
        now = time.monotonic() if now is None else now
        if self.stays_warm or self.busy or not self.sandboxes or now - self.last_used < self.idle_s:
            return False
        sandboxes, self.sandboxes = list(self.sandboxes.values()), {}
        await asyncio.gather(*(sandbox.close() for sandbox in sandboxes), return_exceptions=True)
        log.info("runtime %s: idle for %.0f s, its %d sandbox(es) stopped", self.name, now - self.last_used,
                 len(sandboxes))
        return True

    async def close(self) -> None:
        self._closed = True
        sandboxes, self.sandboxes = list(self.sandboxes.values()), {}
        await asyncio.gather(*(sandbox.close() for sandbox in sandboxes), return_exceptions=True)

    def describe(self) -> dict[str, Any]:
        return {"name": self.name, "running_sandboxes": sum(s.alive for s in self.sandboxes.values()),
                "busy": self.busy}
