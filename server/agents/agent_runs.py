"""An assistant's run: the one path every run takes, with the answer gathered instead of streamed.

A tool call that executes code (``run``, ``inspect``, ``sharding``,
``compare``) becomes ``wp.RunRequest``s exactly as a browser's ``run`` frame
does (server/browser_socket.py): its backend and runtime resolved by the
scheduler, its deadline within ``--run-timeout-s``, its code within
``--max-code-bytes``. Each is a ``Run`` of the assistant's client (its token's,
or its network's address client), handed to the run's watchers
(rooms, metrics, the result cache: ``before_dispatch``) and, unless one
answered it, to the scheduler's fair queues, which limit it per client and
per network as any browser's. While a tool call is open it holds one of its
client's connections (``attach_client``), as a browser tab does.

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
import logging
import uuid
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from jaxplay import browser_protocol as bp
from jaxplay import worker_protocol as wp
from jaxplay.server.clients.connection import BrowserHooks
from jaxplay.server.clients.identity import ClientIdentity
from jaxplay.server.runs.run import Run, RunWatcher, before_dispatch
from jaxplay.server.runs.scheduler import Scheduler

log = logging.getLogger("jaxplay.agents")

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
    """What a tool asked to run, before the server resolved it."""

    code: str
    backend: str | None = None
    runtime: str | None = None
    timeout_s: float | None = None
    inspect: bool = True
    profile: bool = False
    fresh: bool = False


class AgentClient:
    """An assistant's tool call as the run path sees a client (``clients.connection.Client``): who it counts
    as. It is never in a room and never in ``BrowserHooks.open`` (shutdown waits for its runs, not a socket)."""

    def __init__(self, identity: ClientIdentity, scheduler: Scheduler, watchers: Sequence[RunWatcher],
                 hooks: BrowserHooks, base_url: str = "") -> None:
        self.base_url = base_url  # where this server's links point, as the request named it
        self.session_id = identity.key
        self.network = identity.network
        self.scheduler = scheduler
        self.settings = scheduler.settings
        self.watchers = watchers
        self.hooks = hooks
        self.runs: list[Run] = []
        self._tasks: set[asyncio.Future[Any]] = set()

    # ``Client``'s sending side: an assistant is answered when its tool call returns, never sent frames.
    def emit(self, event: dict[str, Any]) -> None:
        log.debug("an agent client was sent %s outside a run", event.get("type"))

    def send_encoded(self, frame: str, droppable: bool, *, snapshot: bool = False) -> None:
        log.debug("an agent client was sent a room frame")

    def spawn(self, work: Any) -> None:
        task = asyncio.ensure_future(work)
        self._tasks.add(task)  # referenced until it ends
        task.add_done_callback(self._tasks.discard)

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

    def request_of(self, asked: RunAsked, options: wp.RunOptions | None = None) -> wp.RunRequest:
        """The run as the browser's ``start_run`` lowers it, each refusal worded as the browser's (and
        counted as a rejected run, as the browser's are)."""
        try:
            return self._lower(asked, options)
        except AgentRefusal as refusal:
            self.hooks.told(None, bp.RunStatus.REJECTED, refusal.reason)
            raise

    def _lower(self, asked: RunAsked, options: wp.RunOptions | None) -> wp.RunRequest:
        code_bytes = len(asked.code.encode("utf-8", "surrogatepass"))
        if code_bytes > self.settings.max_code_bytes:
            raise AgentRefusal(f"The code is {code_bytes} bytes; this server runs programs of at most "
                               f"{self.settings.max_code_bytes} bytes. Send a shorter program.", "code_too_large")
        if not asked.code.strip():
            raise AgentRefusal("The code is empty: send the program to run.", "invalid_message")
        limit = self.settings.run_timeout_s
        if asked.timeout_s is not None and not 0 < asked.timeout_s <= limit:
            raise AgentRefusal(f"timeout_s must be above 0 and at most {limit:g} seconds on this server.",
                               "timeout_too_long")
        try:
            backend = self.scheduler.resolve_backend(asked.backend)
            runtime = self.scheduler.resolve_runtime(backend, asked.runtime)
        except bp.ProtocolError as exc:
            raise AgentRefusal(str(exc), exc.reason) from None
        return wp.RunRequest(code=asked.code, backend=backend, timeout_s=float(asked.timeout_s or limit),
                             options=options or wp.RunOptions(inspect=asked.inspect, profile=asked.profile),
                             runtime=runtime, fresh=asked.fresh)

    async def execute(self, request: wp.RunRequest) -> AgentRun:
        """Run ``request`` the way every run goes (its watchers, then the queue) and wait for its ``done``."""
        answer = AgentRun()
        run = Run(client_id="mcp-" + uuid.uuid4().hex[:12], request=request, emit=answer.add,
                  session_id=self.session_id, network=self.network)
        self.runs.append(run)
        if not await before_dispatch(run, self, self.watchers):  # type: ignore[arg-type]
            try:
                self.scheduler.submit(run)
            except bp.ProtocolError as exc:
                run.state = "done"
                self.hooks.told(None, bp.RunStatus.REJECTED, exc.reason)
                raise AgentRefusal(str(exc), exc.reason) from None
        await answer.finished.wait()
        self.hooks.told(run.backend, str(answer.done.get("status")), answer.done.get("reason"))
        return answer
