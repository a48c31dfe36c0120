"""Runs, the workers that execute them, and the per-backend queues between them.

Everything here runs on the server's one event loop, so the state needs no
locks. Ownership: a ``Run`` belongs to the browser connection that submitted
it until its ``done`` is emitted; a ``WorkerLink`` belongs to the /worker
socket handler. The scheduler hands queued runs to free worker slots, relays
worker events (adding the browser's run id), and guarantees exactly one
``done`` per run, last: from the worker's ``finished``, a cancel while
queued, a lost worker, or the server's own deadline.
"""

from __future__ import annotations

import asyncio
import itertools
import logging
import time
import uuid
from collections import deque
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

from jaxplay import browser_protocol as bp
from jaxplay import worker_protocol as wp
from jaxplay.settings import Settings
from server.sessions import SessionKeys

log = logging.getLogger("jaxplay.server")

Emit = Callable[[dict[str, Any]], None]
RunObserver = Callable[["Run", dict[str, Any]], None]
# Beyond its own deadline, how long a worker has to report before the server gives up on it.
WORKER_GRACE_S = 30.0


@dataclass(eq=False)
class Run:
    client_id: str
    code: str
    backend: str
    timeout_s: float
    options: dict[str, Any]
    emit: Emit
    session_id: str = ""  # the browser session (server/sessions.py); "" for in-process callers
    key: str = field(default_factory=lambda: uuid.uuid4().hex)
    state: str = "queued"  # queued -> running -> done
    worker: WorkerLink | None = None
    submitted_at: float = field(default_factory=time.monotonic)
    position: int = 0
    observers: list[RunObserver] = field(default_factory=list)
    _deadline: asyncio.TimerHandle | None = None

    def send(self, event: dict[str, Any]) -> None:
        event = {**event, "id": self.client_id}
        for observer in self.observers:
            observer(self, event)
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
    id: int = field(default_factory=itertools.count(1).__next__)

    def describe(self) -> dict[str, Any]:
        return {"kind": self.hello.device_kind, "count": self.hello.device_count, "worker": self.hello.name}


class Scheduler:
    def __init__(self, settings: Settings, session_keys: SessionKeys | None = None) -> None:
        self.settings = settings
        self.session_keys = session_keys
        self.workers: list[WorkerLink] = []
        self.queues: dict[str, deque[Run]] = {}
        self.expected_backends: set[str] = {"cpu"} if settings.local_workers > 0 else set()

    # --- what is offered ---------------------------------------------------

    def backends(self) -> list[dict[str, Any]]:
        names = sorted({w.hello.backend for w in self.workers} | self.expected_backends)
        result = []
        for name in names:
            links = [w for w in self.workers if w.hello.backend == name]
            first = links[0].hello if links else None
            result.append({
                "name": name,
                "device_kind": first.device_kind if first else None,
                "device_count": first.device_count if first else None,
                "jax_version": first.jax_version if first else None,
                "jaxlib_version": first.jaxlib_version if first else None,
                "workers": len(links),
                "slots": sum(w.hello.slots for w in links),
                "free_slots": sum(w.free_slots for w in links),
                "queued": len(self.queues.get(name, ())),
                "sandbox": self.settings.sandbox,
            })
        return result

    def resolve_backend(self, requested: str | None) -> str:
        known = {w.hello.backend for w in self.workers} | self.expected_backends
        if requested is None:
            if not known:
                raise bp.ProtocolError("No worker is connected to this server yet; try again in a moment.")
            return "cpu" if "cpu" in known else sorted(known)[0]
        if requested not in known:
            offered = ", ".join(sorted(known)) or "none yet"
            raise bp.ProtocolError(f"Unknown backend {requested!r}: this server offers {offered}.")
        return requested

    # --- runs --------------------------------------------------------------

    def submit(self, run: Run) -> None:
        queue = self.queues.setdefault(run.backend, deque())
        if len(queue) >= self.settings.queue_limit:
            raise bp.ProtocolError(
                f"The {run.backend} queue is full ({len(queue)} runs waiting); try again in a minute.")
        queue.append(run)
        run.position = len(queue)
        run.send(bp.queued_event(run.client_id, run.position))
        self.dispatch(run.backend)

    def cancel(self, run: Run) -> None:
        if run.state == "queued":
            self.queues[run.backend].remove(run)
            self.finish(run, bp.RunStatus.CANCELLED, "Cancelled before it started.")
            self._announce_positions(run.backend)
        elif run.state == "running" and run.worker is not None:
            asyncio.create_task(run.worker.send(wp.encode(wp.ServerCancel(run_id=run.key))))

    def withdraw(self, run: Run) -> bool:
        """Take a run out of its queue without ending it (it is about to be answered otherwise)."""
        if run.state != "queued":
            return False
        self.queues[run.backend].remove(run)
        self._announce_positions(run.backend)
        return True

    def finish(self, run: Run, status: bp.RunStatus, message: str | None = None, elapsed_ms: float | None = None,
               **extra: Any) -> None:
        if run.state == "done":
            return
        run.state = "done"
        if run._deadline:
            run._deadline.cancel()
        if run.worker is not None:
            run.worker.runs.pop(run.key, None)
        if elapsed_ms is None:
            elapsed_ms = (time.monotonic() - run.submitted_at) * 1000
        run.send(bp.done_event(run.client_id, status, elapsed_ms, message, **extra))

    def dispatch(self, backend: str) -> None:
        queue = self.queues.get(backend)
        moved = False
        while queue:
            link = max((w for w in self.workers if w.hello.backend == backend and w.free_slots > 0),
                       key=lambda w: w.free_slots, default=None)
            if link is None:
                break
            run = queue.popleft()
            moved = True
            link.free_slots -= 1
            link.runs[run.key] = run
            run.worker, run.state = link, "running"
            run._deadline = asyncio.get_running_loop().call_later(run.timeout_s + WORKER_GRACE_S, self._overdue, run)
            run.send(bp.started_event(run.client_id, backend, link.describe(), link.hello.jax_version)
                     | {"jaxlib_version": link.hello.jaxlib_version, "sandbox": self.settings.sandbox})
            job = wp.ServerJob(run_id=run.key, code=run.code, timeout_s=run.timeout_s, options=self.job_options(run))
            asyncio.create_task(self._send_job(link, run, job))
        if moved:
            self._announce_positions(backend)

    def job_options(self, run: Run) -> dict[str, Any]:
        """What the worker gets: the run's options plus the name of its session's private compile cache
        (derived, so a worker never learns the session id; kept out of ``run.options``, which the
        result cache keys on)."""
        if self.session_keys is None or not run.session_id:
            return run.options
        return {**run.options, "compile_cache": self.session_keys.derived("compile-cache", run.session_id)}

    async def _send_job(self, link: WorkerLink, run: Run, job: wp.ServerJob) -> None:
        try:
            await link.send(wp.encode(job))
        except Exception as exc:  # the worker went away between dispatch and send
            log.info("job %s could not reach worker %s: %s", run.key, link.hello.name, exc)
            self.finish(run, bp.RunStatus.CRASHED, "The worker disconnected before the run started; run it again.")

    def _overdue(self, run: Run) -> None:
        log.warning("run %s: worker %s sent no result within its deadline", run.key,
                    run.worker.hello.name if run.worker else "?")
        self.finish(run, bp.RunStatus.CRASHED, "The worker stopped answering; the run was abandoned.")

    def _announce_positions(self, backend: str) -> None:
        for position, run in enumerate(self.queues.get(backend, ()), start=1):
            if run.position != position:
                run.position = position
                run.send(bp.queued_event(run.client_id, position))

    # --- workers -----------------------------------------------------------

    def add_worker(self, link: WorkerLink) -> None:
        link.free_slots = link.hello.slots
        self.workers.append(link)
        log.info("worker %s joined: %s x%d (%s), %d slot(s)", link.hello.name, link.hello.backend,
                 link.hello.device_count, link.hello.device_kind, link.hello.slots)
        self.dispatch(link.hello.backend)

    def remove_worker(self, link: WorkerLink) -> None:
        if link in self.workers:
            self.workers.remove(link)
        for run in list(link.runs.values()):
            self.finish(run, bp.RunStatus.CRASHED, "The worker running this program disconnected; run it again.")
        log.info("worker %s left", link.hello.name)

    def worker_event(self, link: WorkerLink, message: wp.WorkerEvent) -> None:
        run = link.runs.get(message.run_id)
        if run is not None and run.state == "running":
            event = {k: v for k, v in message.event.items() if k != "id"}
            run.send(event)

    def worker_finished(self, link: WorkerLink, message: wp.WorkerFinished) -> None:
        run = link.runs.get(message.run_id)
        link.free_slots = min(link.free_slots + 1, link.hello.slots)
        if run is not None:
            try:
                status = bp.RunStatus(message.status)
            except ValueError:
                status = bp.RunStatus.CRASHED
            self.finish(run, status, message.message, message.elapsed_ms)
        self.dispatch(link.hello.backend)
