"""An assistant's run: the one path every run takes (server/runs/run_path.py), with the answer gathered
instead of streamed.

A tool call that executes code (``run``, ``inspect``, ``sharding``,
``compare``, ``share`` with its run) becomes ``wp.RunRequest``s through
``RunPath.request``, exactly as a browser's ``run`` frame does
(server/browser_socket.py): its backend and runtime resolved, its deadline
within ``--run-timeout-s``, its code within ``--max-code-bytes``, its JAX
options and XLA flags checked against the runtime's XLA. Each is a ``Run`` of
the assistant's client (its token's, or its network's address client) that
``RunPath.start`` hands to the run's watchers (rooms, metrics, the result
cache) and, unless one answered it, to the scheduler's fair queues, which
limit it per client and per network as any browser's; every outcome is
counted by kind as a browser's is. What is the assistant's own: while a tool
call is open it holds one of its client's connections (``attach_client``),
as a browser tab does, and its runs are cancelled when the call is.

The events are kept as the page keeps them (``AgentRun.events``): what the
answer is made of (protocol.py) and what a link to the recorded run holds. A
run's own output is bounded by the worker (``--output-limit-bytes``, each IR
artifact by ``--artifact-limit-bytes``); what is kept here is bounded again
by ``KEPT_EVENT_BYTES``, beyond which output-like events are dropped (and
counted) as an overwhelmed browser's are.
"""

from __future__ import annotations

import asyncio
import json
import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from jaxplay import browser_protocol as bp
from jaxplay import worker_protocol as wp
from jaxplay.server.clients.identity import ClientIdentity
from jaxplay.server.runs.run import Run
from jaxplay.server.runs.run_path import RunPath

KEPT_EVENT_BYTES = 32 << 20  # as a browser connection's outbox (server/browser_socket.py)
DROPPABLE = frozenset({"stdout", "stderr", "display", "compiled", "compiling", "sharding", "fn_timing", "timing",
                       "notice", "profile", "roofline"})
NOT_RECORDED = frozenset({"queued"})  # a run's place in line says nothing to whoever opens its link


class AgentRefusal(Exception):
    """A run the server will not take as asked; the message says what to change (the browser's wording)."""

    def __init__(self, message: str, reason: str | None = None) -> None:
        super().__init__(message)
        self.reason = reason


@dataclass
class AgentRun:
    """One run's events, as the page would have received them, through its ``done``."""

    request: wp.RunRequest
    events: list[dict[str, Any]] = field(default_factory=list)
    kept_bytes: int = 0
    dropped: int = 0
    finished: asyncio.Event = field(default_factory=asyncio.Event)

    def add(self, event: dict[str, Any]) -> None:
        kind = event.get("type")
        if kind in NOT_RECORDED:
            return
        size = len(json.dumps(event, separators=(",", ":")))
        if kind in DROPPABLE and self.kept_bytes + size > KEPT_EVENT_BYTES:
            self.dropped += 1
        else:
            self.kept_bytes += size
            self.events.append({k: v for k, v in event.items() if k != "id"})
        if kind == "done":
            self.finished.set()

    @property
    def done(self) -> dict[str, Any]:
        return self.events[-1] if self.events and self.events[-1].get("type") == "done" else {}


@dataclass(frozen=True)
class RunAsked:
    """What a tool asked to run, before the server resolved and checked it."""

    code: str
    backend: str | None = None
    runtime: str | None = None
    timeout_s: float | None = None
    inspect: bool = True
    profile: bool = False
    fresh: bool = False
    compare: bool = False  # one of the compare tool's runs: counted as kind compare, as the page's Compare runs
    flags: Mapping[str, Any] | None = None  # {"config": {...}, "xla": {...}}, as the browser protocol's

    @property
    def kind(self) -> str:
        """Its kind (``wp.RUN_KINDS``), known before it is lowered, so a refusal is counted as its kind."""
        return "compare" if self.compare else "profile" if self.profile else "run"


class AgentClient:
    """An assistant's tool call as the run path sees its asker (``runs.run.Asker``): who it counts as. It is
    never in a room and never in ``BrowserHooks.open`` (shutdown waits for its runs, not a socket)."""

    def __init__(self, identity: ClientIdentity, path: RunPath, base_url: str = "") -> None:
        self.base_url = base_url  # where this server's links point, as the request named it
        self.session_id = identity.key
        self.network = identity.network
        self.path = path
        self.scheduler = path.scheduler
        self.runs: list[Run] = []

    async def __aenter__(self) -> AgentClient:
        try:
            self.scheduler.attach_client(self.session_id, self.network)
        except bp.ProtocolError as exc:
            raise AgentRefusal(str(exc), "connection_limit") from None
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        for run in self.runs:
            if run.state != "done":  # the tool call was cancelled (the assistant went away): its runs stop
                self.scheduler.cancel(run)
        self.scheduler.detach_client(self.session_id, self.network)

    def request_of(self, asked: RunAsked) -> wp.RunRequest:
        """The run as ``RunPath.request`` lowers every run, refused in the browser's words (and counted as a
        refused run of its kind, as the browser's are)."""
        try:
            if not asked.code.strip():  # a browser's editor never sends one; an assistant may
                raise bp.ProtocolError("The code is empty: send the program to run.", reason="invalid_message")
            return self.path.request(asked.code, backend=asked.backend, runtime=asked.runtime,
                                     timeout_s=asked.timeout_s, fresh=asked.fresh, compare=asked.compare,
                                     options=wp.RunOptions(inspect=asked.inspect, profile=asked.profile),
                                     flags=asked.flags)
        except bp.ProtocolError as exc:
            self.path.refused(asked.kind, exc)
            raise AgentRefusal(str(exc), exc.reason) from None

    async def execute(self, request: wp.RunRequest) -> AgentRun:
        """Run ``request`` the way every run goes (``RunPath.start``: its watchers, then the queue, each
        outcome counted) and wait for its ``done``."""
        answer = AgentRun(request)
        run = Run(client_id="mcp-" + uuid.uuid4().hex[:12], request=request, emit=answer.add,
                  session_id=self.session_id, network=self.network)
        self.runs.append(run)
        try:
            await self.path.start(run, self)
        except bp.ProtocolError as exc:  # counted by the path; it never runs
            raise AgentRefusal(str(exc), exc.reason) from None
        await answer.finished.wait()
        return answer
