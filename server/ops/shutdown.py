"""Shutdown in numbered phases, started by the first SIGTERM or SIGINT.

1. Stop accepting: ``/readyz`` answers 503 (a load balancer stops sending new
   browsers here) and new runs are refused with a message saying to run again;
   pages, links and running runs keep being served. Every open /ws, and any that
   opens during the drain, is told (``server_draining``): the page says the
   server is restarting and holds new runs until it has reconnected.
2. Drain: wait up to ``--shutdown-grace-s`` (45 s, above the run timeout) for
   the runs in flight (queued or running, this replica's browsers' and, with
   ``--broker``, the jobs its workers took for other replicas) to end; it takes
   no new job meanwhile. Any still going then end as ``crashed`` with a message
   that says why (their workers are told to cancel).
3. Tell browsers: every open /ws gets a ``notice`` that the server is going
   away; uvicorn then closes the sockets (1012, service restart) and the
   page reconnects, to another replica where there is one.
4. Close storage: the app's lifespan stops the local workers (each drains,
   sandbox/agent_drain.py, with nothing left to run), waits for the
   result cache's writes and closes the database; then the workers' own
   listener closes (``PhasedServer.last_phase``: workers stay connected while
   runs drain).

A second signal skips what is left of the drain (uvicorn's own handling).
"""

from __future__ import annotations

import asyncio
import logging
import signal
import time
from collections.abc import Awaitable, Callable
from types import FrameType
from typing import TYPE_CHECKING

import uvicorn

from jaxplay import browser_protocol as bp

if TYPE_CHECKING:
    from jaxplay.server.ops.replica import Replica

log = logging.getLogger("jaxplay.server")

GOING_AWAY = ("This server is shutting down for maintenance; the page reconnects on its own. "
              "Runs that were still going have ended; run them again.")
UNFINISHED = "The server shut down before this run finished; run it again."
DRAINING = ("This server is restarting: runs already going may finish, and a run you start now waits and "
            "starts once the page has reconnected.")
NO_WORKER_YET = ("This server is restarting before any worker joined it to take this run; run it again once the "
                 "page has reconnected.")
FLUSH_S = 0.5  # time for the notices to leave the outboxes before uvicorn closes the sockets


async def drain(state: Replica, grace_s: float) -> None:
    """Phases 1 to 3; phase 4 is the lifespan's exit."""
    scheduler = state.scheduler
    log.info("shutdown phase 1/4: refusing new runs; /readyz answers 503")
    state.draining = True
    scheduler.accepting = False
    draining = bp.server_draining_event(DRAINING, grace_s)
    for connection in list(state.browser_hooks.open):
        connection.emit(dict(draining))
    state.browser_hooks.connected.append(lambda connection: connection.emit(dict(draining)))

    scheduler.refuse_awaiting_first_worker(NO_WORKER_YET)  # no worker to finish them within the drain
    in_flight = scheduler.runs_in_flight()
    log.info("shutdown phase 2/4: draining %d run(s) in flight, for up to %g s", in_flight, grace_s)
    deadline = time.monotonic() + grace_s
    while scheduler.runs_in_flight() and time.monotonic() < deadline:
        await asyncio.sleep(0.05)
    for queue in scheduler.queues.values():
        while queue:
            scheduler.finish(queue.popleft(), bp.RunStatus.CRASHED, UNFINISHED)
    for link in scheduler.workers:
        for run in list(link.runs.values()):
            scheduler.cancel(run)
            scheduler.finish(run, bp.RunStatus.CRASHED, UNFINISHED)
    broker = getattr(scheduler, "broker", None)
    if broker is not None:
        broker.abandon_all(UNFINISHED)

    connections = list(state.browser_hooks.open)
    log.info("shutdown phase 3/4: telling %d browser(s)", len(connections))
    for connection in connections:
        connection.emit({"type": "notice", "id": None, "level": "warning", "message": GOING_AWAY})
    flush_deadline = time.monotonic() + FLUSH_S
    while any(not c.outbox.empty() for c in connections) and time.monotonic() < flush_deadline:
        await asyncio.sleep(0.02)


class PhasedServer(uvicorn.Server):
    """uvicorn's server, with phases 1-3 run before uvicorn's own shutdown begins."""

    def __init__(self, config: uvicorn.Config, state: Replica, grace_s: float) -> None:
        super().__init__(config)
        self.state = state
        self.grace_s = grace_s
        self.draining: asyncio.Task[None] | None = None
        self.loop: asyncio.AbstractEventLoop | None = None
        # Run after uvicorn's own shutdown and the lifespan's exit, before the captured signal is re-raised.
        self.last_phase: list[Callable[[], Awaitable[None]]] = []

    async def serve(self, sockets: list | None = None) -> None:  # type: ignore[override]
        self.loop = asyncio.get_running_loop()
        await super().serve(sockets)

    async def shutdown(self, sockets: list | None = None) -> None:  # type: ignore[override]
        try:
            await super().shutdown(sockets)
        finally:
            for close in self.last_phase:
                await close()

    def handle_exit(self, sig: int, frame: FrameType | None) -> None:
        if self.draining is not None or self.loop is None or sig not in (signal.SIGTERM, signal.SIGINT):
            super().handle_exit(sig, frame)
            return
        self._captured_signals.append(sig)
        self.loop.call_soon_threadsafe(self._start_drain)

    def _start_drain(self) -> None:
        if self.draining is None:
            self.draining = asyncio.ensure_future(self._drain_then_exit())

    async def _drain_then_exit(self) -> None:
        try:
            await drain(self.state, self.grace_s)
        except Exception:
            log.exception("shutdown drain failed; closing now")
        log.info("shutdown phase 4/4: closing connections, stopping workers, closing storage")
        self.should_exit = True
