"""A run on the server, the one way to watch it, and the worker link that executes it.

Ownership: a ``Run`` belongs to the browser connection that submitted it
until its ``done`` is emitted; a ``WorkerLink`` belongs to the /worker socket
handler. Both live on the server's one event loop.

Watching a run: one ordered list of ``RunWatcher``s, made once by
server/app.py (rooms, the metrics, the result cache, in that order). Every
request that executes code (``wp.RUN_KINDS``) goes the same path,
server/runs/run_path.py, and each watcher decides from ``run.request`` what
it watches::

    RunPath.start (server/runs/run_path.py; the browser's socket, or another entry point)
      └─ before_dispatch(run, asker, watchers)     before the run is queued, in order:
           a watcher may change the run (rooms: a presenter's priority lane, an
           attendee's shorter deadline) or answer it itself (the result cache
           replays a recorded run: True, and the run is never queued)
    Run.send(event)                                every event the run sends, in order:
      ├─ each watcher's on_event, or on_done for the run's ``done`` (always last)
      └─ then the browser (``emit``)

A watcher keeps what it knows of a run itself, keyed by the run, and lets go
of it at ``on_done``; weakly, since a run refused before it was queued sends
no ``done`` (its browser gets a ``rejected`` from the socket instead).
"""

from __future__ import annotations

import asyncio
import itertools
import logging
import time
import uuid
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from jaxplay import worker_protocol as wp

log = logging.getLogger("jaxplay.server")

Emit = Callable[[dict[str, Any]], None]


class Asker(Protocol):
    """Who asked for a run, as its watchers see it: a browser connection (``clients.connection.Client``), or
    the caller of another entry point (``run_path.Requester``). Hashable: watchers may key on it."""

    session_id: str  # the client it counts as (server/clients/identity.py)
    network: str


class RunWatcher:
    """Watches runs at three points; each does nothing unless a watcher overrides it."""

    async def before_dispatch(self, run: Run, asker: Asker) -> bool:
        """Before ``run`` is queued: change it, or answer it and return True (it is then never queued)."""
        return False

    def on_event(self, run: Run, event: dict[str, Any]) -> None:
        """Each event ``run`` sends but its ``done``, in order, before the browser gets it."""

    def on_done(self, run: Run, done: dict[str, Any]) -> None:
        """The run's ``done``, its last event."""


async def before_dispatch(run: Run, asker: Asker, watchers: Sequence[RunWatcher]) -> bool:
    """Hand ``run`` to each watcher in order before it is queued; True when one answered it (the watchers
    after that one never see it). A watcher that fails is logged and skipped: it never costs the run."""
    for watcher in watchers:
        run.watchers.append(watcher)
        try:
            if await watcher.before_dispatch(run, asker):
                return True
        except Exception:
            log.exception("run %s: %s failed before dispatch; the run goes on without it", run.key,
                          type(watcher).__name__)
    return False


@dataclass(eq=False)
class Run:
    client_id: str
    request: wp.RunRequest
    emit: Emit
    # The client it counts against for fairness and limits (server/clients/identity.py), and its network.
    session_id: str = ""
    network: str = ""
    key: str = field(default_factory=lambda: uuid.uuid4().hex)
    state: str = "queued"  # queued -> running -> done
    worker: WorkerLink | None = None
    submitted_at: float = field(default_factory=time.monotonic)
    position: int = 0
    # Room presenters' runs go ahead of everyone else's (server/runs/fair_queue.py).
    priority: bool = False
    started_at: float | None = None
    counted: bool = False  # against its client's limit, from submit to done
    watchers: list[RunWatcher] = field(default_factory=list)  # those that took it in ``before_dispatch``
    _deadline: asyncio.TimerHandle | None = None

    @property
    def code(self) -> str:
        return self.request.code

    @property
    def backend(self) -> str:
        return self.request.backend

    @property
    def runtime(self) -> str:
        return self.request.runtime

    @property
    def timeout_s(self) -> float:
        return self.request.timeout_s

    def send(self, event: dict[str, Any]) -> None:
        event = {**event, "id": self.client_id}
        done = event.get("type") == "done"
        for watcher in self.watchers:
            if done:
                watcher.on_done(self, event)
            else:
                watcher.on_event(self, event)
        self.emit(event)


@dataclass(eq=False)
class WorkerLink:
    hello: wp.WorkerHello
    send: Callable[[str], Awaitable[None]]
    free_slots: int = 0
    runs: dict[str, Run] = field(default_factory=dict)
    # Results the server may keep and replay to others (the result cache): only from its own local
    # workers, or remote ones the operator vouched for (--trust-remote-results).
    trusted: bool = False
    local: bool = False  # one of the server's own local workers (it presented the local token)
    id: int = field(default_factory=itertools.count(1).__next__)
    slots_report: wp.WorkerSlots | None = None  # the worker's last own word on its seats
    draining: bool = False  # told to stop: it gets no new job, and leaves once its runs end

    def describe(self) -> dict[str, Any]:
        return {"kind": self.hello.device_kind, "count": self.hello.device_count, "worker": self.hello.name}
