"""``--broker redis://...``: several server replicas share one set of queues and workers.

Each run goes through Redis, whichever replica its browser is connected to
(the *origin*) and whichever replica its worker is connected to (the
*executor*; often the same one)::

    origin A                          Redis                          executor B
    submit ── RPUSH job ───────────▶ jaxplay:queue:<backend> ──BLMOVE─▶ puller (only while B
                                     jaxplay:taken:<B>:<backend> ◀──┘   has a free slot), claims
                                     jaxplay:claim:<run key> ◀── SET NX  the run id -> a local Run
                                                                       on B's scheduler -> worker
    relay  ◀── XREAD ─── jaxplay:events:<A> (stream) ◀── XADD ──────── each event, numbered, in
           ─── XTRIM ──▶ (what A has read)                             MULTI/EXEC batches; LREM
                                                                       of the job with its done
    cancel ─── PUBLISH ───────────▶ jaxplay:cancels ─── SUBSCRIBE ──▶ cancels its local Run
    heartbeat: SET jaxplay:replica:<id> EX 3 every second, with its backends, free slots and
               local queue; it also reads every queue's length (what /metrics reports)

Tasks, all on the server's event loop and owned by the broker: the heartbeat
loop, the event reader and the pusher (the origin side, here); the pullers,
the event sender and the cancel listener belong to its ``JobExecutor``
(the executor side, server/runs/broker_executor.py). The keys are listed in
server/runs/broker_keys.py, the liveness rules in server/runs/broker_liveness.py,
the hand-off in server/runs/broker_jobs.py, the event streams in
server/runs/broker_events.py.

Why streams for events: a stream keeps order and keeps entries while the
origin's reader reconnects, where pub/sub would drop them; events are the
one thing that must not be lost or reordered, so the sender retries a batch
until Redis takes it, and the origin drops repeats and holds gaps by each
event's sequence number. Cancels use pub/sub: they are idempotent and every
run still has its deadline.

What holds:
- exactly one ``done`` per run: only the origin's ``Scheduler.finish`` emits
  it (from the executor's ``done``, a cancel while still in Redis, the
  origin's own deadline, or the executor's death);
- a job is handed over at least once (BLMOVE into the taker's processing
  list, found again after a lost answer or a dead taker) and runs at most once
  (a claim per run id); a cancel races it safely: LREM removes it if still
  queued, otherwise the cancel is published;
- a run's output reaches its browser once, in order, or the run ends as an
  ``error`` saying part of it was lost; a delivered event is trimmed at once;
- liveness is judged with grace (server/runs/broker_liveness.py): a dead
  executor's runs end as ``crashed`` and a dead origin's jobs are dropped only
  after its heartbeat was missing for seconds while Redis answered promptly; a
  replica only paused comes back, and queues its dropped jobs again;
- Redis restarting empty loses no run: ``jaxplay:epoch`` vanishes with the
  data, and an origin that sees a new epoch pushes again every job of its own
  that no executor had taken (and its browsers' session entries);
- a Redis outage is never a sandbox crash: a run submitted while Redis cannot
  be reached, or refuses writes for memory, is ``rejected`` saying which, a run
  whose result was lost in one ends as ``error`` saying so, and ``/readyz`` is
  503 meanwhile (its probe is a write: a full Redis still answers PING);
- a replica whose Redis refuses its credentials, or cannot be reached at
  start, starts anyway, unready, says why, and keeps trying;
- a dead origin: executors cancel its runs and drop its queued jobs, and its
  browsers, reconnecting to another replica, are sent a ``done`` for each
  run they had in flight (kept per session in ``jaxplay:session:<id>``).
"""

from __future__ import annotations

import asyncio
import logging
import time
import uuid
from collections.abc import Callable
from typing import Any

import redis.asyncio as aioredis
from redis.exceptions import RedisError

from jaxplay import browser_protocol as bp
from jaxplay.server.clients.identity import is_browser_session
from jaxplay.server.runs import broker_jobs, broker_sessions
from jaxplay.server.runs.broker_events import GAP_WAIT_S, EventReader
from jaxplay.server.runs.broker_executor import JobExecutor
from jaxplay.server.runs.broker_heartbeat import Heartbeat
from jaxplay.server.runs.broker_keys import (
    BROKER_FULL,
    BROKER_FULL_LOST,
    BROKER_LOST,
    BROKER_UNREACHABLE,
    CANCELS,
    EPOCH_KEY,
    HINTS,
    OUT_OF_MEMORY,
    OUTPUT_LOST,
    PREFIX,
    PROBE_S,
    QUEUE_TTL_S,
    REPLICAS,
    RETRY_S,
    UNREACHABLE,
    connect,
    describe_failure,
    events_key,
    failure_kind,
    hello_of,
    queue_key,
)
from jaxplay.server.runs.broker_liveness import GONE_AFTER_S, ReplicaLiveness
from jaxplay.server.runs.broker_state import Pending
from jaxplay.server.runs.scheduler import WORKER_GRACE_S, Run, Scheduler, WorkerLink
from jaxplay.server.storage.interface import redact

log = logging.getLogger("jaxplay.broker")

PROBE_TTL_MS = 2000  # /readyz's write expires at once

EXECUTOR_GONE = "The server replica running this program stopped; run it again."


async def _nowhere(text: str) -> None:
    """The send of a worker on another replica: this replica never writes to it."""


def _drain(queue: asyncio.Queue[Any]) -> list[Any]:
    items = []
    while not queue.empty():
        items.append(queue.get_nowait())
    return items


class RedisBroker:
    def __init__(self, url: str, scheduler: Scheduler) -> None:
        self.url = url
        self.scheduler = scheduler
        self.id = uuid.uuid4().hex[:12]
        self.redis: aioredis.Redis | None = None
        self.liveness = ReplicaLiveness(self.id)
        self.epoch: str | None = None
        self.pending: dict[str, Pending] = {}
        self.waiting: dict[str, int] = {}  # backend -> length of its shared queue, as last read
        self.pushes: asyncio.Queue[tuple[Run, str]] = asyncio.Queue()
        self.tasks: list[asyncio.Task[None]] = []
        self.executor = JobExecutor(url, scheduler, self.id, self.liveness, self.deliver)
        self.heartbeat = Heartbeat(self)

    @property
    def live(self) -> dict[str, dict[str, Any]]:
        """Replica id -> its last heartbeat, for every replica not judged gone (this one included)."""
        return self.liveness.live

    # --- lifecycle ---------------------------------------------------------

    async def start(self) -> None:
        """Connect and start the tasks. A Redis that cannot be reached, or refuses this replica's credentials,
        does not stop the start: the replica stays up, unready (/readyz says why), and its heartbeat keeps
        trying, so a wrong password or an outage at start is no crash loop."""
        self.redis = connect(self.url)
        self.executor.start(self.redis)  # before the first beat, which may start its pullers
        try:
            await self.heartbeat.once()
            log.info("broker: replica %s on %s", self.id, redact(self.url))
        except (RedisError, OSError) as exc:
            kind = failure_kind(exc)
            self.liveness.failed(kind)
            self.heartbeat.failing = kind  # said here, with what to check: the heartbeat logs only a change
            log.error("broker: replica %s cannot use Redis at %s: %s. %s. It stays up, not ready, and tries "
                      "again every second.", self.id, redact(self.url), describe_failure(exc), HINTS[kind])
        reader = EventReader(self.id, self.deliver)
        self.tasks += [asyncio.create_task(self.heartbeat.loop()), asyncio.create_task(reader.run(self.redis)),
                       asyncio.create_task(self._push_in_order())]

    async def stop(self) -> None:
        for task in self.tasks:
            task.cancel()
        await asyncio.gather(*self.tasks, self.executor.stop(), return_exceptions=True)
        if self.redis is not None:
            try:
                await self.redis.delete(f"{PREFIX}replica:{self.id}", events_key(self.id))
                await self.redis.srem(REPLICAS, self.id)
            except (RedisError, OSError):
                pass
            await self.redis.aclose()

    def abandon_all(self, message: str) -> None:
        """Shutdown, after the drain: end this replica's runs still out in Redis or on other replicas."""
        for pending in list(self.pending.values()):
            self.give_up(pending.run, bp.RunStatus.CRASHED, message)

    def give_up(self, run: Run, status: bp.RunStatus, message: str, **extra: Any) -> None:
        """End a run here, and take its job back from Redis or cancel it wherever it runs."""
        pending = self.pending.get(run.key)
        if pending is not None:
            asyncio.create_task(self._withdraw(run, pending.payload))
        self._end(run, status, message, **extra)

    async def _withdraw(self, run: Run, payload: str, until: float | None = None, started: bool = False) -> bool:
        """Take a run's job back so it never runs, or else (or if it ``started``) cancel it where it runs; tried
        again until ``until`` (a monotonic time) if Redis cannot take it now, else once. True if it was taken
        back before it started."""
        while self.redis is not None:
            try:
                if not started and await broker_jobs.withdraw(self.redis, payload, self.id):
                    return True
                await self.redis.publish(CANCELS, run.key)
                return False
            except (RedisError, OSError) as exc:
                if until is None or time.monotonic() > until:
                    log.warning("broker: run %s could not be withdrawn (Redis: %s); its deadline ends it",
                                run.key, describe_failure(exc))
                    return False
            await asyncio.sleep(RETRY_S)
        return False

    def remote_backends(self) -> set[str]:
        return {b for info in self.live.values() for b, n in info.get("backends", {}).items() if n["workers"]}

    async def probe(self) -> str:
        """For /readyz: 'reachable' (Redis answers and takes a write), or why not: 'out of memory: ...',
        'credentials refused: ...', 'unreachable: ...'. A write, because a Redis at maxmemory still answers
        PING and reads while it refuses every run."""
        if self.redis is None:
            return "not started"
        try:
            await asyncio.wait_for(self.redis.set(f"{PREFIX}probe:{self.id}", "1", px=PROBE_TTL_MS), PROBE_S)
            return "reachable"
        except (RedisError, OSError, TimeoutError) as exc:
            self.liveness.failed(failure_kind(exc))
            return describe_failure(exc)

    # --- origin side -------------------------------------------------------

    def enqueue(self, run: Run) -> None:
        waits_s = run.timeout_s + WORKER_GRACE_S + GONE_AFTER_S
        payload = broker_jobs.job_payload(run, self.id, time.time() + waits_s)
        self.pending[run.key] = Pending(run, payload)
        loop = asyncio.get_running_loop()
        run._deadline = loop.call_later(waits_s, self._overdue, run)
        # Accepted: the browser learns its place now (the shared queue's length as last read), and the exact one
        # once Redis has the job, before any event of its execution can arrive.
        run.position = self.waiting.get(run.backend, 0) + self.pushes.qsize() + 1
        run.send(bp.queued_event(run.client_id, run.position))
        self.pushes.put_nowait((run, payload))

    async def _push_in_order(self) -> None:
        """One task pushes every job, so the shared queue keeps the order the browsers submitted in."""
        while True:
            run, payload = await self.pushes.get()
            await self._push(run, payload)

    async def _push(self, run: Run, payload: str) -> None:
        assert self.redis is not None
        pending = self.pending.get(run.key)
        if pending is None or pending.executor is not None:
            return  # ended (cancelled) while waiting to be pushed, or pushed again after it was taken
        queue = queue_key(run.backend)
        pending.pushing = True
        pushed = False
        try:
            async with self.redis.pipeline(transaction=False) as pipe:
                pipe.set(EPOCH_KEY, uuid.uuid4().hex, nx=True)
                pipe.get(EPOCH_KEY)
                pipe.llen(queue)
                _, epoch, waiting = await pipe.execute()
            if waiting >= self.scheduler.settings.queue_limit:
                self._end(run, bp.RunStatus.REJECTED,
                          f"The {run.backend} queue is full ({waiting} runs waiting); try again in a minute.",
                          reason="queue_full")
                return
            pushed = True
            async with self.redis.pipeline(transaction=True) as pipe:  # all or nothing: no job without its entry
                pipe.rpush(queue, payload)
                pipe.expire(queue, QUEUE_TTL_S)
                if is_browser_session(run.session_id):  # an address client is nobody who comes back
                    broker_sessions.remember(pipe, self.id, run)
                position, *_ = await pipe.execute()
        except (RedisError, OSError) as exc:
            # Tried again on a fresh connection first (``connect``): Redis is down or full, not a stale socket. The
            # runs behind this one in line would only wait to fail the same way: they are refused with it.
            refused = [run] + [waiting for waiting, _ in _drain(self.pushes)]
            kind = failure_kind(exc)
            log.error("broker: could not queue %d run(s): %s", len(refused), describe_failure(exc))
            self.liveness.failed(kind)
            for waiting in refused:
                if waiting.key in self.pending:
                    if kind == OUT_OF_MEMORY:
                        self._end(waiting, bp.RunStatus.REJECTED, BROKER_FULL, reason="broker_out_of_memory")
                    else:
                        self._end(waiting, bp.RunStatus.REJECTED, BROKER_UNREACHABLE, reason="broker_unreachable")
            if pushed and kind == UNREACHABLE:  # Redis may have carried the push out after the client gave up
                until = time.monotonic() + run.timeout_s + WORKER_GRACE_S + GONE_AFTER_S  # executors drop it then
                asyncio.create_task(self._withdraw(run, payload, until=until))
            return
        finally:
            pending.pushing = False
        pending.epoch = epoch
        self.heartbeat.saw_epoch(epoch)
        if run.key in self.pending and run.state == "queued" and run.position != int(position):
            run.position = int(position)
            run.send(bp.queued_event(run.client_id, run.position))

    def cancel(self, run: Run) -> None:
        asyncio.create_task(self._cancel(run))

    async def _cancel(self, run: Run) -> None:
        pending = self.pending.get(run.key)
        if pending is None or self.redis is None:
            return
        for _ in range(500):  # a push on its way lands first (at most its retries), then the withdrawal finds it
            if not pending.pushing:
                break
            await asyncio.sleep(0.01)
        if pending.epoch is None and not pending.pushing:  # still waiting for the pusher: it never reaches Redis
            self._end(run, bp.RunStatus.CANCELLED, "Cancelled before it started.")
            return
        # Tried again through a Redis stall: a cancel lost there would leave the run waiting for its deadline.
        until = time.monotonic() + run.timeout_s + GONE_AFTER_S
        if await self._withdraw(run, pending.payload, until, started=pending.executor is not None) \
                and run.key in self.pending:
            self._end(run, bp.RunStatus.CANCELLED, "Cancelled before it started.")

    def _overdue(self, run: Run) -> None:
        log.warning("run %s: no result through the broker within its deadline", run.key)
        if self.liveness.unreachable_since(run.submitted_at):
            self.give_up(run, bp.RunStatus.ERROR, BROKER_FULL_LOST if self.liveness.failure == OUT_OF_MEMORY
                          else BROKER_LOST)
        else:
            self.give_up(run, bp.RunStatus.CRASHED, "The worker stopped answering; the run was abandoned.")

    def _end(self, run: Run, status: bp.RunStatus, message: str | None = None,
             elapsed_ms: float | None = None, **extra: Any) -> None:
        self.pending.pop(run.key, None)
        self.scheduler.finish(run, status, message, elapsed_ms, **extra)
        if is_browser_session(run.session_id) and self.redis is not None:
            asyncio.create_task(broker_sessions.forget(self, run))

    def deliver(self, key: str, executor: str, seq: int | None, event: dict[str, Any],
                hello: dict[str, Any] | None = None) -> None:
        """An event of one of this replica's runs, from whichever replica executes it, numbered ``seq`` among
        that run's events (None from a replica of an older version: taken as it comes).

        ``started`` comes with the executing worker's hello, which the result cache keys on, and
        whether the executing replica trusts that worker's results (``WorkerLink.trusted``): only a
        trusted worker's result may be cached and replayed to others.
        """
        pending = self.pending.get(key)
        if pending is None:
            return
        if pending.executor is None:
            pending.executor = executor
        elif pending.executor != executor:
            # A second copy (its job was pushed again after Redis lost its data): the first executor's word counts.
            log.info("broker: ignoring run %s's events from replica %s (it runs on %s)", key, executor,
                     pending.executor)
            return
        order = pending.order
        ready = [(event, hello)] if seq is None else order.accept(seq, (event, hello), time.monotonic())
        if seq is not None and seq < order.next and not ready and not pending.repeated:
            pending.repeated = True  # once per run: a stall can repeat many
            log.info("broker: run %s: events that Redis stored twice (a batch sent again after a timeout) were "
                     "dropped", key)
        for event, hello in ready:
            if key in self.pending:
                self._apply(pending, event, hello)

    def _apply(self, pending: Pending, event: dict[str, Any], hello: dict[str, Any] | None) -> None:
        run = pending.run
        kind = event.get("type")
        if kind == "queued":
            return  # the executor's own queue: the browser already has its place in the shared one
        if kind == "done":
            extra = {k: v for k, v in event.items() if k not in ("type", "id", "status", "elapsed_ms", "message")}
            self._end(run, bp.RunStatus(event["status"]), event.get("message"), event.get("elapsed_ms"), **extra)
            return
        if kind == "started":
            run.state = "running"
            if hello is not None and run.worker is None:
                hello = dict(hello)
                trusted = hello.pop("trusted", False) is True
                run.worker = WorkerLink(hello=hello_of(hello), send=_nowhere, trusted=trusted)
        run.send(event)

    # --- runs that cannot end well ----------------------------------------

    def check_runs(self) -> None:
        """After each heartbeat: end the runs whose executor is gone, or whose events were lost in Redis."""
        now = time.monotonic()
        for pending in list(self.pending.values()):
            if pending.executor is not None and self.liveness.is_gone(pending.executor):
                self._end(pending.run, bp.RunStatus.CRASHED, EXECUTOR_GONE)
            elif pending.order.gap_older_than(GAP_WAIT_S, now):
                log.warning("run %s: events lost in Redis (a gap of %.0f s in its sequence)", pending.run.key,
                            now - (pending.order.gap_since or now))
                self.give_up(pending.run, bp.RunStatus.ERROR, OUTPUT_LOST)
        self.executor.cancel_orphans()

    def beat_soon(self) -> None:
        self.heartbeat.soon()

    async def tell_returning_browser(self, session_id: str, emit: Any,
                                     told: Callable[..., None] | None = None) -> None:
        await broker_sessions.tell_returning_browser(self, session_id, emit, told)
