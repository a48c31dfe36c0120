"""A worker told to stop drains: it takes no new run, lets its runs finish, then leaves.

The first SIGTERM (or Ctrl+C) starts it; the agent (sandbox/agent.py) keeps
serving its runs in flight meanwhile::

    signal handler (on the agent's loop)
      ├─ first signal: tell the server ``draining`` (it sends no new job), and
      │  start the drain task
      └─ second signal: cut the drain short
    drain task
      1. wait until no job is in hand, at most ``--shutdown-grace-s``
      2. cut short (grace over, or a second signal): cancel the runs left and
         report each ``crashed`` with ``DRAIN_EXPIRED`` (never a silent crash)
      3. send every frame still waiting, close the connection cleanly, and set
         ``finished``: ``serve_forever`` returns and the process exits 0

A job already on its way when the server learned of the drain still runs: it
was accepted, and dropping it would lose it. With no connection (the server is
gone) the runs were already abandoned, so the drain ends at once.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import signal
import time
from typing import Any, Protocol

from jaxplay import worker_protocol as wp

log = logging.getLogger("jaxplay.worker")

# After cancelling the runs left, how long their sandboxes get to end and report.
CANCEL_WAIT_S = 10.0
# How long the last frames (results) get to leave before the connection is closed.
FLUSH_S = 5.0


def drain_expired(grace_s: float, cut_by_signal: bool) -> str:
    why = "a second stop signal" if cut_by_signal else f"its {grace_s:g} s to finish ran out"
    return (f"The worker running this program was stopped (its host is being shut down or replaced) before the "
            f"run finished: {why}. Run it again.")


class DrainingAgent(Protocol):
    """What the drain uses of the worker agent (sandbox/agent.py)."""

    name: str
    jobs: set[asyncio.Task[None]]  # one per job in hand
    running: dict[str, Any]  # run id -> its sandbox (None while it starts)

    def send(self, message: Any) -> None: ...
    def cancel(self, run_id: str) -> None: ...
    async def leave(self, flush_s: float) -> None: ...


class WorkerDrain:
    def __init__(self, agent: DrainingAgent, grace_s: float) -> None:
        self.agent = agent
        self.grace_s = max(0.0, grace_s)
        self.requested = False  # a first signal came: no reconnecting, no new run
        self.cut_short = False  # runs still in flight are ended now
        self.ended: set[str] = set()  # runs the drain cancelled: reported as DRAIN_EXPIRED, not "cancelled"
        self.message = ""
        self.finished = asyncio.Event()
        self._second = asyncio.Event()
        self._task: asyncio.Task[None] | None = None

    def install(self) -> None:
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, self.on_signal)

    def on_signal(self) -> None:
        if self._task is None:
            self.requested = True
            busy = len(self.agent.jobs)
            log.info("worker %s: told to stop; taking no new run, %d in hand may take up to %g s (a second "
                     "signal ends them now)", self.agent.name, busy, self.grace_s)
            self.agent.send(wp.WorkerDraining(grace_s=self.grace_s))
            self._task = asyncio.create_task(self._drain())
        else:
            self._second.set()

    async def _drain(self) -> None:
        deadline = time.monotonic() + self.grace_s
        while self.agent.jobs and time.monotonic() < deadline and not self._second.is_set():
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._second.wait(), min(0.05, max(0.0, deadline - time.monotonic())))
        if self.agent.jobs:
            self.cut_short = True
            self.message = drain_expired(self.grace_s, self._second.is_set())
            log.warning("worker %s: ending %d run(s) still in hand: %s", self.agent.name, len(self.agent.jobs),
                        "a second signal" if self._second.is_set() else "the grace ran out")
            for run_id in list(self.agent.running):
                self.ended.add(run_id)
                self.agent.cancel(run_id)
            end_by = time.monotonic() + CANCEL_WAIT_S
            while self.agent.jobs and time.monotonic() < end_by:
                await asyncio.sleep(0.02)
        await self.agent.leave(FLUSH_S)
        log.info("worker %s: drained; leaving", self.agent.name)
        self.finished.set()
