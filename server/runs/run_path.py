"""The one path of every request that executes code, whoever asks: the browser's socket or another entry point.

Every kind of request (``wp.RUN_KINDS``: a run, a profiled run, a Compare run,
a ``passes`` request) takes the same steps, so each gets the same limits,
watchers and counts::

    RunPath.request(code, backend, runtime, timeout_s, options, ...)
        a typed ``wp.RunRequest``: its backend and runtime resolved, its code
        and deadline within the server's limits (a refusal: ``bp.ProtocolError``)
    RunPath.start(run, asker)
        its watchers in order (server/runs/run.py: the room shortens an
        attendee's deadline, the metrics time it, the result cache may answer
        it), then, unless one answered, the scheduler's limits per client and
        its fair queue; ``run.emit`` then gets every event through its ``done``
    RunPath.events(request, identity)
        both, for an entry point without a socket of its own: the run's events,
        through its ``done`` (a refusal is a ``done`` with status ``rejected``)

Counting: every outcome is told to ``BrowserHooks.told`` once (the metrics
count it by kind): a refusal where it is raised here (``refused``), any other
end at the run's ``done``. A caller that refuses a request before it reaches
this path (a malformed frame, a limit of its own connection) tells it through
``refused`` too.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from jaxplay import browser_protocol as bp
from jaxplay import run_flags
from jaxplay import worker_protocol as wp
from jaxplay.server.clients.connection import BrowserHooks
from jaxplay.server.clients.identity import ClientIdentity
from jaxplay.server.runs.run import Asker, Run, RunWatcher, before_dispatch
from jaxplay.server.runs.runtimes import flags_for_runtime
from jaxplay.server.runs.scheduler import Scheduler


@dataclass(frozen=True, eq=False)
class Requester:
    """An asker with no connection of its own (``RunPath.events``): watchers see who it counts as."""
    session_id: str
    network: str


class RunPath:
    def __init__(self, scheduler: Scheduler, watchers: Sequence[RunWatcher], hooks: BrowserHooks) -> None:
        self.scheduler = scheduler
        self.settings = scheduler.settings
        self.watchers = watchers  # made once by server/app.py, in order
        self.hooks = hooks

    def request(self, code: str, *, backend: str | None = None, runtime: str | None = None,
                timeout_s: float | None = None, options: wp.RunOptions = wp.RunOptions(), fresh: bool = False,
                compare: bool = False, flags: run_flags.RunFlags | Mapping[str, Any] | None = None,
                run_id: str | None = None) -> wp.RunRequest:
        """What was asked as a typed request within this server's limits; a refusal names what to change
        (and carries ``run_id``). Not counted here: ``refused`` is the caller's, once it knows the kind."""
        try:
            bp.check_code_size(code, self.settings.max_code_bytes)
            limit = self.settings.run_timeout_s
            if timeout_s is not None and not 0 < timeout_s <= limit:
                raise bp.ProtocolError(f"Field 'timeout_s' may be at most {limit:g} seconds on this server.",
                                       reason="timeout_too_long")
            resolved = self.scheduler.resolve_backend(backend)
            chosen = self.scheduler.resolve_runtime(resolved, runtime)
            # The flags are checked against the XLA of every worker that could run this runtime.
            asked = options.flags if flags is None else flags if isinstance(flags, run_flags.RunFlags) else dict(flags)
            checked = flags_for_runtime(self.scheduler.worker_hellos(resolved), resolved, chosen, asked)
        except bp.ProtocolError as exc:
            raise bp.ProtocolError(str(exc), run_id, exc.reason) from None
        except run_flags.FlagError as exc:
            raise bp.ProtocolError(str(exc), run_id, reason="bad_flags") from None
        passes = options.passes
        if passes is not None:  # the dump's own work is bounded besides the run's deadline
            passes = wp.PassesTarget(key=passes.key, fn=passes.fn, work_limit_s=self.settings.passes_work_limit_s)
        options = wp.RunOptions(inspect=options.inspect, profile=options.profile, passes=passes,
                                flags=checked)
        return wp.RunRequest(code=code, backend=resolved, timeout_s=float(timeout_s or limit), options=options,
                             runtime=chosen, fresh=fresh, compare=compare)

    def refused(self, kind: str, exc: bp.ProtocolError) -> None:
        """Count a request of ``kind`` refused before it ran (told to its asker by the caller)."""
        self.hooks.told(None, bp.RunStatus.REJECTED, exc.reason, kind)

    async def start(self, run: Run, asker: Asker) -> None:
        """Watchers, then the queue. A refusal is counted, and raised for the caller to tell its asker; the
        run then never sends a ``done``."""
        emit = run.emit

        def emit_counted(event: dict[str, Any]) -> None:
            emit(event)
            if event.get("type") == "done":
                self.hooks.told(run.backend, str(event.get("status")), event.get("reason"), run.request.kind)

        run.emit = emit_counted
        if await before_dispatch(run, asker, self.watchers):
            return
        try:
            self.scheduler.submit(run)
        except bp.ProtocolError as exc:
            run.state = "done"  # refused: it will never run, and holds nothing (a presenter's place in line)
            self.refused(run.request.kind, exc)
            raise bp.ProtocolError(str(exc), run.client_id, exc.reason) from None

    async def events(self, request: wp.RunRequest, identity: ClientIdentity,
                     run_id: str | None = None) -> AsyncIterator[dict[str, Any]]:
        """Run ``request`` for ``identity`` and yield its events through its ``done``. Leaving the loop early
        cancels the run."""
        events: asyncio.Queue[dict[str, Any]] = asyncio.Queue()
        run = Run(client_id=run_id or uuid.uuid4().hex[:12], request=request, emit=events.put_nowait,
                  session_id=identity.key, network=identity.network)
        try:
            await self.start(run, Requester(identity.key, identity.network))
        except bp.ProtocolError as exc:
            yield bp.rejected(run.client_id, str(exc), exc.reason)
            return
        try:
            while True:
                event = await events.get()
                yield event
                if event.get("type") == "done":
                    return
        finally:
            if run.state != "done":
                self.scheduler.cancel(run)
