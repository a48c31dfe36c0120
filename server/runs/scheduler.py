"""Runs, the workers that execute them, and the per-backend queues between them.

Everything here runs on the server's one event loop, so the state needs no
locks. A ``Run``, the ``WorkerLink`` that executes it and who owns each are
in server/runs/run.py. The scheduler hands queued runs to free worker slots, relays
worker events (adding the browser's run id), and guarantees exactly one
``done`` per run, last: from the worker's ``finished``, a cancel while
queued, a lost worker, or the server's own deadline. Which workers are
connected and what they offer (backends, runtimes, the backend and runtime a
run gets) is held by its base, ``OfferedBackends`` (server/runs/offered_backends.py).

Fairness lives in ``server/runs/fair_queue.py``: each backend's queue serves
networks, and the clients within each, in turn, presenters of workshop rooms
first, and tells each waiting run its position and an estimated wait. Limits
per client (connections, runs waiting or running) and per network
(connections) are counted here; who is a client is server/clients/identity.py's word.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections import Counter
from collections.abc import Callable
from typing import Any

from jaxplay import browser_protocol as bp
from jaxplay import worker_protocol as wp
from jaxplay.server.clients.identity import is_browser_session
from jaxplay.server.clients.sessions import SessionKeys
from jaxplay.server.runs import offered_backends, output_vouch, runtimes
from jaxplay.server.runs.fair_queue import FairQueue, RunDurations
from jaxplay.server.runs.offered_backends import OfferedBackends
from jaxplay.server.runs.run import Run, WorkerLink
from jaxplay.settings import Settings

log = logging.getLogger("jaxplay.server")

SlotsListener = Callable[["WorkerLink", wp.WorkerSlots], None]
# Beyond its own deadline, how long a worker has to report before the server gives up on it.
WORKER_GRACE_S = 30.0
# How long a run accepted before any worker joined waits for one (a restart's workers rejoin within seconds).
FIRST_WORKER_WAIT_S = 60.0


class Scheduler(OfferedBackends):
    def __init__(self, settings: Settings, session_keys: SessionKeys | None = None) -> None:
        super().__init__(settings)  # the workers and what they offer (server/runs/offered_backends.py)
        self.session_keys = session_keys
        self.queues: dict[str, FairQueue[Run]] = {}
        self.durations: dict[str, RunDurations] = {}
        # Per client: runs waiting or running, and open connections; per network: open connections.
        self.active_runs: Counter[str] = Counter()
        self.connections: Counter[str] = Counter()
        self.network_connections: Counter[str] = Counter()
        self.accepting = True  # False from the first phase of shutdown on
        self.slots_listeners: list[SlotsListener] = []
        # Runs accepted while no backend was known (offered_backends.WORKER_BACKENDS), until one is or they end;
        # each with its timer: a wait for a worker that never joins is bounded (FIRST_WORKER_WAIT_S).
        self.awaiting_first_worker: dict[str, tuple[Run, asyncio.TimerHandle]] = {}

    # --- what waits, and the broker -----------------------------------------

    def waiting(self, backend: str) -> int:
        """Runs of ``backend`` waiting for a slot (with --broker: in the shared queue too)."""
        return len(self.queues.get(backend, ()))

    async def refresh_waiting(self) -> None:
        """Bring ``waiting`` up to date before it is reported; here the queues are in this process."""

    def waiting_since(self, backend: str) -> float | None:
        """When (``time.monotonic``) the longest-waiting run of ``backend`` that this server holds was
        submitted, or None when none waits (metrics: the oldest waiting run's age)."""
        return min((run.submitted_at for run in self.queues.get(backend, ())), default=None)

    async def broker_memory(self) -> tuple[int, int] | None:
        """Without a broker, None; with one, Redis's (used memory, maxmemory) in bytes, read now."""
        return None

    @property
    def broker_reachable(self) -> bool | None:
        """None without a broker, else whether its last attempt to reach Redis worked (metrics)."""
        return None

    async def broker_check(self) -> str | None:
        """For /readyz: None without a broker, else 'reachable' or why not."""
        return None

    # --- clients -----------------------------------------------------------

    def attach_client(self, session_id: str, network: str = "") -> None:
        """Count one more connection of ``session_id`` from ``network``; refuse it beyond either limit."""
        limit = self.settings.max_connections_per_client
        if self.connections[session_id] >= limit:
            who = "This browser already has" if is_browser_session(session_id) else \
                "Connections without the playground's session cookie from your address already have"
            raise bp.ProtocolError(
                f"{who} {self.connections[session_id]} connections open to the playground (the limit is {limit}); "
                "close some tabs and reload.")
        network_limit = self.settings.max_connections_per_address
        if self.network_connections[network] >= network_limit:
            raise bp.ProtocolError(
                f"Your network address already has {self.network_connections[network]} connections open to the "
                f"playground (the limit is {network_limit}); close some tabs, or ask the operator to raise "
                "--max-connections-per-address.")
        self.connections[session_id] += 1
        self.network_connections[network] += 1

    def detach_client(self, session_id: str, network: str = "") -> None:
        for counter, key in ((self.connections, session_id), (self.network_connections, network)):
            counter[key] -= 1
            if counter[key] <= 0:
                del counter[key]

    # --- runs --------------------------------------------------------------

    def submit(self, run: Run) -> None:
        self.admit(run)
        self.queue_here(run)
        self.await_first_worker(run)

    def await_first_worker(self, run: Run) -> None:
        """A run queued while no backend is known (accepted blind): the first worker to join settles it, or it
        is refused when none joins within FIRST_WORKER_WAIT_S. Only once queued, so a refused run holds nothing."""
        if run.backend not in self.known_backends():
            # Within the server's own wait for its result (with --broker, its deadline in Redis comes after).
            wait_s = min(FIRST_WORKER_WAIT_S, run.timeout_s + WORKER_GRACE_S)
            timer = asyncio.get_running_loop().call_later(wait_s, self._no_worker_came, run, wait_s)
            self.awaiting_first_worker[run.key] = (run, timer)

    def admit(self, run: Run) -> None:
        """Refuse a run this server will not take now: shutting down, its backend no longer awaited, or its
        browser at its limit."""
        if not self.accepting:
            raise bp.ProtocolError("This server is shutting down and takes no new runs; run it again in a moment "
                                   "(the page reconnects on its own).", reason="shutting_down")
        known = self.known_backends()
        if known and run.backend not in known:  # resolved while none was known; a worker joined since
            raise bp.ProtocolError(offered_backends.unknown_backend(run.backend, known), reason="unknown_backend")
        limit = self.settings.max_runs_per_client
        if self.active_runs[run.session_id] >= limit:
            raise bp.ProtocolError(
                f"You already have {self.active_runs[run.session_id]} runs waiting or running (the limit is {limit} "
                "per browser); wait for one to finish or stop one.", reason="client_limit")

    def count_for_client(self, run: Run) -> None:
        """The run counts against its browser until ``finish``."""
        self.active_runs[run.session_id] += 1
        run.counted = True

    def queue_here(self, run: Run, *, count: bool = True) -> None:
        """Queue for this server's workers. A client at its limit was refused first (``admit``), so a
        full queue never sheds another user's run for a newcomer that is refused anyway."""
        queue = self.queues.setdefault(run.backend, FairQueue())
        if len(queue) >= self.settings.queue_limit and not self._make_room(queue, run):
            raise bp.ProtocolError(
                f"The {run.backend} queue is full ({len(queue)} runs waiting); try again in a minute.",
                reason="queue_full")
        if count:
            self.count_for_client(run)
        queue.append(run)
        self._announce_positions(run.backend)
        self.dispatch(run.backend)

    def _make_room(self, queue: FairQueue[Run], run: Run) -> bool:
        """A full queue sheds the newest run of the busiest client of the network holding the most, if that
        network (or, within the newcomer's own network, that client) holds more than the newcomer's would:
        one network's flood can fill the queue but never lock others out."""
        victim = queue.heaviest()
        if victim is None:
            return False
        if victim.network == run.network:
            holds, would_hold = (queue.count_for(victim.session_id, victim.network),
                                 queue.count_for(run.session_id, run.network) + 1)
        else:
            holds, would_hold = queue.count_for_network(victim.network), queue.count_for_network(run.network) + 1
        if holds <= would_hold:
            return False
        queue.remove(victim)
        self.finish(victim, bp.RunStatus.REJECTED, "The queue is full and you had the most runs waiting: your "
                                                   "newest one was dropped to let another user's run in.",
                    reason="queue_full")
        return True

    def cancel(self, run: Run) -> None:
        if run.state == "queued":
            queue = self.queues.get(run.backend)
            if queue is not None and run in queue:  # not yet queued: its browser left while a hook looked it up
                queue.remove(run)
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
        """End ``run`` with its one ``done``. A ``rejected`` one names its reason (``bp.REJECTION_REASONS``)
        in ``extra["reason"]``; across replicas it travels in the ``done`` itself."""
        if run.state == "done":
            return
        if (awaiting := self.awaiting_first_worker.pop(run.key, None)) is not None:
            awaiting[1].cancel()
        if status is bp.RunStatus.REJECTED:
            extra.setdefault("reason", "other")
        else:
            extra.pop("reason", None)
        if run.started_at is not None and not extra.get("cached"):
            self.durations.setdefault(run.backend, RunDurations()).record(time.monotonic() - run.started_at)
        if run.counted:
            run.counted = False
            self.active_runs[run.session_id] -= 1
            if self.active_runs[run.session_id] <= 0:
                del self.active_runs[run.session_id]
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
            head = next(iter(queue))
            link = max((w for w in self.workers if w.hello.backend == backend and w.free_slots > 0
                        and runtimes.offers(w.hello, head.runtime)), key=lambda w: w.free_slots, default=None)
            if link is None:
                refusal = runtimes.refusal(self.worker_hellos(backend), backend, head.runtime)
                if refusal is None:
                    break
                queue.remove(head)  # queued before any worker joined, for a runtime none of them offers
                self.finish(head, bp.RunStatus.REJECTED, refusal, reason="unknown_runtime")
                continue
            run = queue.popleft()
            moved = True
            link.free_slots -= 1
            link.runs[run.key] = run
            run.worker, run.state = link, "running"
            run.started_at = time.monotonic()
            run._deadline = asyncio.get_running_loop().call_later(run.timeout_s + WORKER_GRACE_S, self._overdue, run)
            run.send(bp.started_event(run.client_id, backend, link.describe(), link.hello.jax_version)
                     | {"jaxlib_version": link.hello.jaxlib_version, "sandbox": self.settings.sandbox}
                     | runtimes.started_fields(link.hello, run.runtime)
                     | ({"flags": run.request.options.flags.plain()} if run.request.options.flags else {}))
            job = wp.ServerJob(run_id=run.key, code=run.code, timeout_s=run.timeout_s, options=self.job_options(run),
                               runtime=run.runtime)
            asyncio.create_task(self._send_job(link, run, job))
        if moved:
            self._announce_positions(backend)

    def job_options(self, run: Run) -> wp.JobOptions:
        """What the worker gets: the request's options plus the name of its session's private compile cache
        (derived, so a worker never learns the session id; kept out of the request, which the result
        cache keys on). An address client gets none: it may be several people behind one address, and
        a cache one of them could write would run code in the others' runs."""
        cache = None
        if self.session_keys is not None and is_browser_session(run.session_id):
            cache = self.session_keys.derived("compile-cache", run.session_id)
        return wp.JobOptions.of(run.request.options, cache)

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
        """Tell each waiting run whose place changed its new position and estimated wait."""
        queue = self.queues.get(backend)
        if not queue:
            return
        now = time.monotonic()
        links = [w for w in self.workers if w.hello.backend == backend]
        running_for = [now - r.started_at for w in links for r in w.runs.values() if r.started_at is not None]
        durations = self.durations.get(backend) or RunDurations()
        waits = durations.waits(len(queue), sum(w.hello.slots for w in links), running_for)
        for position, (run, wait_s) in enumerate(zip(list(queue), waits, strict=True), start=1):
            if run.position != position:
                run.position = position
                run.send(bp.queued_event(run.client_id, position, wait_s))

    # --- workers -----------------------------------------------------------

    def add_worker(self, link: WorkerLink) -> None:
        link.free_slots = link.hello.slots
        self.workers.append(link)
        if link.local:  # the local workers' own word replaces the guess from the host's devices
            self.local_backends = {w.hello.backend for w in self.workers if w.local}
        log.info("worker %s joined: %s x%d (%s), %d slot(s)", link.hello.name, link.hello.backend,
                 link.hello.device_count, link.hello.device_kind, link.hello.slots)
        self.dispatch(link.hello.backend)
        self.refuse_unoffered()

    def refuse_unoffered(self) -> None:
        """Runs accepted before any backend was known: refused once one is and theirs is not (no worker offers
        it, nor is expected to); the others are runs like any other from then on. Called at every join and,
        with --broker, every heartbeat: nothing to do in the common case, where no run waits so."""
        if not self.awaiting_first_worker:
            return
        known = self.known_backends()
        if not known:
            return
        for key, (run, timer) in list(self.awaiting_first_worker.items()):
            del self.awaiting_first_worker[key]
            timer.cancel()
            if run.backend not in known:
                self.refuse(run, offered_backends.unknown_backend(run.backend, known), "unknown_backend")

    def refuse_awaiting_first_worker(self, message: str) -> None:
        """The server shuts down: the runs still waiting for a first worker are refused now."""
        for run, _ in list(self.awaiting_first_worker.values()):
            self.refuse(run, message, "shutting_down")

    def _no_worker_came(self, run: Run, wait_s: float) -> None:
        self.awaiting_first_worker.pop(run.key, None)
        self.refuse(run, f"No worker is connected to this server to take this run, and none came in the {wait_s:g} s "
                         "it waited; run it again in a while, or ask the operator whether its workers are starting.",
                    "no_worker")

    def refuse(self, run: Run, message: str, reason: str) -> None:
        """End a waiting run as ``rejected``: its backend is offered by no worker."""
        queue = self.queues.get(run.backend)
        if queue is not None and run in queue:
            queue.remove(run)
            self._announce_positions(run.backend)
        self.finish(run, bp.RunStatus.REJECTED, message, reason=reason)

    def remove_worker(self, link: WorkerLink) -> None:
        if link in self.workers:
            self.workers.remove(link)
        for run in list(link.runs.values()):
            self.finish(run, bp.RunStatus.CRASHED, "The worker running this program disconnected; run it again.")
        log.info("worker %s left", link.hello.name)

    def worker_event(self, link: WorkerLink, message: wp.WorkerEvent) -> None:
        run = link.runs.get(message.run_id)
        if run is not None and run.state == "running":
            event = output_vouch.unvouched({k: v for k, v in message.event.items() if k != "id"})
            if link.trusted and self.session_keys is not None:  # rich outputs this server vouches for
                event = output_vouch.vouched(self.session_keys, run.code, event)
            run.send(event)

    def worker_draining(self, link: WorkerLink, message: wp.WorkerDraining) -> None:
        """The worker was told to stop: no new job goes to it (its free slots stay 0); its runs go on."""
        link.draining = True
        link.free_slots = 0
        log.info("worker %s is draining: it takes no new run, and its %d run(s) may take up to %g s",
                 link.hello.name, len(link.runs), message.grace_s)
        self.dispatch(link.hello.backend)

    def worker_slots(self, link: WorkerLink, message: wp.WorkerSlots) -> None:
        link.slots_report = message
        for listener in self.slots_listeners:
            listener(link, message)

    def runs_in_flight(self) -> int:
        return sum(len(q) for q in self.queues.values()) + sum(len(w.runs) for w in self.workers)

    def worker_finished(self, link: WorkerLink, message: wp.WorkerFinished) -> None:
        run = link.runs.get(message.run_id)
        if not link.draining:
            link.free_slots = min(link.free_slots + 1, link.hello.slots)
        if run is not None:
            try:
                status = bp.RunStatus(message.status)
            except ValueError:
                status = bp.RunStatus.CRASHED
            # A result that may rest on what the session's earlier runs wrote is marked so in the done:
            # the result cache keeps it for that session alone (server/runs/result_cache.py).
            marked: dict[str, Any] = {"read_session_cache": True} if message.read_session_cache else {}
            if status is bp.RunStatus.REJECTED:  # a worker refuses only a runtime it does not offer
                marked["reason"] = "unknown_runtime"
            self.finish(run, status, message.message, message.elapsed_ms, **marked)
        self.dispatch(link.hello.backend)
