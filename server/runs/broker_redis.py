"""``--broker redis://...``: several server replicas share one set of queues and workers.

Each run goes through Redis, whichever replica its browser is connected to
(the *origin*) and whichever replica its worker is connected to (the
*executor*; often the same one)::

    origin A                          Redis                          executor B
    submit ── RPUSH job ───────────▶ jaxplay:queue:<backend> ──BLPOP──▶ puller (only while B
                                                                       has a free slot) ->
                                                                       a local Run on B's
                                                                       scheduler -> worker
    relay  ◀── XREAD ─── jaxplay:events:<A> (stream) ◀── XADD ──────── each event, in order
    cancel ─── PUBLISH ───────────▶ jaxplay:cancels ─── SUBSCRIBE ──▶ cancels its local Run
    heartbeat: SET jaxplay:replica:<id> EX 3 every second, with its backends, free slots and
               local queue; it also reads every queue's length (what /metrics reports)

Tasks, all on the server's event loop and owned by the broker: the heartbeat
loop, the event reader and the pusher (the origin side, here); the pullers,
the event sender and the cancel listener belong to its ``JobExecutor``
(the executor side, server/runs/broker_executor.py). The keys are listed in
server/runs/broker_keys.py, the liveness rules in server/runs/broker_liveness.py.

Why streams for events: a stream keeps order and keeps entries while the
origin's reader reconnects, where pub/sub would drop them; events are the
one thing that must not be lost or reordered, so the sender retries a batch
until Redis takes it. Cancels use pub/sub: they are idempotent and every run
still has its deadline.

What holds:
- exactly one ``done`` per run: only the origin's ``Scheduler.finish`` emits
  it (from the executor's ``done``, a cancel while still in Redis, the
  origin's own deadline, or the executor's death);
- a job is taken by exactly one executor (BLPOP), and a cancel races it
  safely: LREM removes it if still queued, otherwise the cancel is published;
- liveness is judged with grace (server/runs/broker_liveness.py): a dead
  executor's runs end as ``crashed`` and a dead origin's jobs are dropped only
  after its heartbeat was missing for seconds while Redis answered;
- Redis restarting empty loses no run: ``jaxplay:epoch`` vanishes with the
  data, and an origin that sees a new epoch pushes again every job of its own
  that no executor had taken (and its browsers' session entries);
- a Redis outage is never a sandbox crash: a run submitted while Redis cannot
  be reached is ``rejected`` saying so, a run whose result was lost in one ends
  as ``error`` saying so, and ``/readyz`` is 503 meanwhile;
- a dead origin: executors cancel its runs and drop its queued jobs, and its
  browsers, reconnecting to another replica, are sent a ``done`` for each
  run they had in flight (kept per session in ``jaxplay:session:<id>``).
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import redis.asyncio as aioredis
from redis.exceptions import RedisError

from jaxplay import browser_protocol as bp
from jaxplay import worker_protocol as wp
from jaxplay.server.clients.identity import is_browser_session
from jaxplay.server.runs.broker_executor import JobExecutor
from jaxplay.server.runs.broker_keys import (
    CANCELS,
    EPOCH_KEY,
    PREFIX,
    REPLICAS,
    RETRY_S,
    STREAM_TTL_S,
    connect,
    events_key,
    public_hello,
    queue_key,
)
from jaxplay.server.runs.broker_liveness import GONE_AFTER_S, HEARTBEAT_S, HEARTBEAT_TTL_S, ReplicaLiveness
from jaxplay.server.runs.scheduler import WORKER_GRACE_S, Run, Scheduler, WorkerLink
from jaxplay.server.storage.interface import redact

log = logging.getLogger("jaxplay.broker")

# /readyz and /metrics wait this long for Redis.
PROBE_S = 1.5
# A returning browser's old replica is judged within seconds; beyond this (Redis away?) it is not told.
RETURNING_WAIT_S = 60.0

EXECUTOR_GONE = "The server replica running this program stopped; run it again."
ORIGIN_GONE = ("The server this page was connected to stopped while this run was in flight, so its result "
               "was lost; run it again.")
BROKER_UNREACHABLE = ("The playground's run queue (Redis) cannot be reached right now, so this run was not queued; "
                      "run it again in a moment.")
BROKER_LOST = ("The server lost its connection to the run queue (Redis) while this run was in flight, and its result "
               "never came back; run it again.")


@dataclass(eq=False)
class Pending:
    """A run this replica's browser submitted, while it is in Redis or on another replica."""
    run: Run
    payload: str
    executor: str | None = None
    epoch: str | None = None  # the Redis data epoch its job was pushed in
    pushing: bool = False  # its RPUSH is on its way


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

    @property
    def live(self) -> dict[str, dict[str, Any]]:
        """Replica id -> its last heartbeat, for every replica not judged gone (this one included)."""
        return self.liveness.live

    # --- lifecycle ---------------------------------------------------------

    async def start(self) -> None:
        self.redis = connect(self.url)
        try:
            await self.redis.ping()
        except (RedisError, OSError) as exc:
            raise RuntimeError(f"Cannot reach the broker at {redact(self.url)}: {exc}. Check --broker "
                               "(JAXPLAY_BROKER) and that Redis is running.") from exc
        await self._heartbeat_once()
        self.executor.start(self.redis)
        for loop in (self._heartbeat_loop, self._read_events, self._push_in_order):
            self.tasks.append(asyncio.create_task(loop()))
        log.info("broker: replica %s on %s", self.id, redact(self.url))  # a password never reaches a log

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
            self._give_up(pending.run, bp.RunStatus.CRASHED, message)

    def _give_up(self, run: Run, status: bp.RunStatus, message: str) -> None:
        """End a run here, and take its job back from Redis or cancel it wherever it runs."""
        pending = self.pending.get(run.key)
        if pending is not None:
            asyncio.create_task(self._withdraw(run, pending.payload))
        self._end(run, status, message)

    async def _withdraw(self, run: Run, payload: str) -> None:
        if self.redis is None:
            return
        try:
            if not await self.redis.lrem(queue_key(run.backend), 1, payload):
                await self.redis.publish(CANCELS, run.key)
        except (RedisError, OSError) as exc:
            log.warning("broker: run %s could not be withdrawn (Redis: %s); its deadline ends it", run.key, exc)

    def remote_backends(self) -> set[str]:
        return {b for info in self.live.values() for b, n in info.get("backends", {}).items() if n["workers"]}

    async def probe(self) -> str:
        """For /readyz: 'reachable', or why not."""
        if self.redis is None:
            return "not started"
        try:
            await asyncio.wait_for(self.redis.ping(), PROBE_S)
            return "reachable"
        except (RedisError, OSError, TimeoutError) as exc:
            self.liveness.failed()
            return f"unreachable: {exc or type(exc).__name__}"

    async def refresh_waiting(self) -> None:
        """Read every known queue's length now (metrics, /api/backends); keeps the last on failure."""
        if self.redis is None:
            return
        backends = self._known_backends()
        try:
            async with self.redis.pipeline(transaction=False) as pipe:
                for backend in backends:
                    pipe.llen(queue_key(backend))
                lengths = await asyncio.wait_for(pipe.execute(), PROBE_S)
        except (RedisError, OSError, TimeoutError) as exc:
            log.debug("broker: queue lengths not read: %s", exc)
            return
        self.waiting = dict(zip(backends, map(int, lengths), strict=True))

    def _known_backends(self) -> list[str]:
        names = {w.hello.backend for w in self.scheduler.workers} | self.scheduler.expected_backends
        names |= {b for beat in self.live.values() for b in beat.get("backends", {})}
        return sorted(names)

    # --- origin side -------------------------------------------------------

    def enqueue(self, run: Run) -> None:
        job = {"key": run.key, "origin": self.id, "code": run.code, "backend": run.backend,
               "timeout_s": run.timeout_s, "options": run.options, "session_id": run.session_id,
               "network": run.network, "runtime": run.runtime}
        payload = json.dumps(job, separators=(",", ":"))
        self.pending[run.key] = Pending(run, payload)
        loop = asyncio.get_running_loop()
        run._deadline = loop.call_later(run.timeout_s + WORKER_GRACE_S + GONE_AFTER_S, self._overdue, run)
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
            async with self.redis.pipeline(transaction=False) as pipe:
                pipe.rpush(queue, payload)
                if is_browser_session(run.session_id):  # an address client is nobody who comes back
                    self._remember_session(pipe, run)
                position, *_ = await pipe.execute()
        except (RedisError, OSError) as exc:
            # Tried again on a fresh connection first (``connect``): Redis is down, not a stale socket. The runs
            # behind this one in line would only wait to fail the same way: they are refused with it.
            refused = [run] + [waiting for waiting, _ in _drain(self.pushes)]
            log.error("broker: could not queue %d run(s): %s", len(refused), exc)
            self.liveness.failed()
            for waiting in refused:
                if waiting.key in self.pending:
                    self._end(waiting, bp.RunStatus.REJECTED, BROKER_UNREACHABLE, reason="broker_unreachable")
            return
        finally:
            pending.pushing = False
        pending.epoch = epoch
        self._saw_epoch(epoch)
        if run.key in self.pending and run.state == "queued" and run.position != int(position):
            run.position = int(position)
            run.send(bp.queued_event(run.client_id, run.position))

    def _remember_session(self, pipe: Any, run: Run) -> None:
        pipe.hset(f"{PREFIX}session:{run.session_id}", run.client_id,
                  json.dumps({"origin": self.id, "key": run.key, "backend": run.backend}))
        pipe.expire(f"{PREFIX}session:{run.session_id}", 24 * 3600)

    def _saw_epoch(self, epoch: str | None) -> None:
        """Redis's data epoch, read just now: a new one means it lost its data (a restart without persistence)."""
        if epoch is None or epoch == self.epoch:
            return
        if self.epoch is not None:
            log.warning("broker: Redis lost its data (restarted?); queueing this replica's waiting runs again")
            asyncio.create_task(self._push_lost_jobs(epoch))
        self.epoch = epoch

    async def _push_lost_jobs(self, epoch: str) -> None:
        """After Redis lost its data: push again, in submission order, every job no executor had taken."""
        assert self.redis is not None
        lost = [p for p in self.pending.values() if p.executor is None and p.epoch not in (None, epoch)]
        try:
            async with self.redis.pipeline(transaction=False) as pipe:
                for pending in lost:
                    pipe.rpush(queue_key(pending.run.backend), pending.payload)
                for pending in self.pending.values():
                    if is_browser_session(pending.run.session_id):
                        self._remember_session(pipe, pending.run)
                await pipe.execute()
        except (RedisError, OSError) as exc:
            log.error("broker: could not queue %d run(s) again: %s", len(lost), exc)
            self.liveness.failed()
            self.epoch = None  # the next heartbeat that reaches Redis tries again
            return
        for pending in lost:
            pending.epoch = epoch
        log.info("broker: %d waiting run(s) queued again", len(lost))

    def cancel(self, run: Run) -> None:
        asyncio.create_task(self._cancel(run))

    async def _cancel(self, run: Run) -> None:
        pending = self.pending.get(run.key)
        if pending is None or self.redis is None:
            return
        for _ in range(500):  # a push on its way lands first (at most its retries), then LREM finds it
            if not pending.pushing:
                break
            await asyncio.sleep(0.01)
        if pending.epoch is None and not pending.pushing:  # still waiting for the pusher: it never reaches Redis
            self._end(run, bp.RunStatus.CANCELLED, "Cancelled before it started.")
            return
        try:
            if pending.executor is None and await self.redis.lrem(queue_key(run.backend), 1, pending.payload):
                self._end(run, bp.RunStatus.CANCELLED, "Cancelled before it started.")
                return
            await self.redis.publish(CANCELS, run.key)
        except (RedisError, OSError) as exc:
            log.warning("broker: cancel of %s could not reach Redis: %s", run.key, exc)

    def _overdue(self, run: Run) -> None:
        log.warning("run %s: no result through the broker within its deadline", run.key)
        if self.liveness.unreachable_since(run.submitted_at):
            self._give_up(run, bp.RunStatus.ERROR, BROKER_LOST)
        else:
            self._give_up(run, bp.RunStatus.CRASHED, "The worker stopped answering; the run was abandoned.")

    def _end(self, run: Run, status: bp.RunStatus, message: str | None = None,
             elapsed_ms: float | None = None, **extra: Any) -> None:
        self.pending.pop(run.key, None)
        self.scheduler.finish(run, status, message, elapsed_ms, **extra)
        if is_browser_session(run.session_id) and self.redis is not None:
            asyncio.create_task(self._forget(run))

    async def _forget(self, run: Run) -> None:
        try:
            assert self.redis is not None
            await self.redis.hdel(f"{PREFIX}session:{run.session_id}", run.client_id)
        except (RedisError, OSError):
            pass

    def deliver(self, key: str, executor: str, event: dict[str, Any], hello: dict[str, Any] | None = None) -> None:
        """An event of one of this replica's runs, from whichever replica executes it.

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
                run.worker = WorkerLink(hello=wp.WorkerHello(token="", **hello), send=_nowhere, trusted=trusted)
        run.send(event)

    async def _read_events(self) -> None:
        assert self.redis is not None
        stream, last = events_key(self.id), "$"
        while True:
            try:
                replies = await self.redis.xread({stream: last}, block=1000, count=1000)
            except (RedisError, OSError) as exc:
                log.warning("broker: reading events failed (%s); retrying", exc)
                await asyncio.sleep(RETRY_S)
                continue
            for _, entries in replies or ():
                for entry_id, fields in entries:
                    last = entry_id
                    hello = json.loads(fields["hello"]) if "hello" in fields else None
                    self.deliver(fields["key"], fields["executor"], json.loads(fields["event"]), hello)

    # --- liveness ----------------------------------------------------------

    def _beat(self) -> str:
        backends: dict[str, dict[str, Any]] = {}
        for link in self.scheduler.workers:
            hello = link.hello
            # What /api/backends of a replica without this worker shows of it (the same as this one shows).
            describe = {"device_kind": hello.device_kind, "device_count": hello.device_count,
                        "device_memory_bytes": hello.device_memory_bytes, "jax_version": hello.jax_version,
                        "jaxlib_version": hello.jaxlib_version, "libraries": hello.libraries,
                        "device_peak": hello.device_peak or None}
            entry = backends.setdefault(hello.backend, {"workers": 0, "slots": 0, "free_slots": 0, "queued": 0,
                                                        "describe": describe, "hellos": []})
            entry["hellos"].append(public_hello(hello))
            entry["workers"] += 1
            entry["slots"] += hello.slots
            entry["free_slots"] += link.free_slots
        for backend, entry in backends.items():
            entry["queued"] = len(self.scheduler.queues.get(backend, ()))
        return json.dumps({"backends": backends, "at": time.time()})

    async def _heartbeat_once(self) -> None:
        assert self.redis is not None
        backends = self._known_backends()
        async with self.redis.pipeline(transaction=False) as pipe:
            pipe.set(f"{PREFIX}replica:{self.id}", self._beat(), ex=HEARTBEAT_TTL_S)
            pipe.sadd(REPLICAS, self.id)
            pipe.expire(events_key(self.id), STREAM_TTL_S)
            pipe.set(EPOCH_KEY, uuid.uuid4().hex, nx=True)
            pipe.get(EPOCH_KEY)
            pipe.smembers(REPLICAS)
            for backend in backends:
                pipe.llen(queue_key(backend))
            _, _, _, _, epoch, members, *lengths = await pipe.execute()
        ids = sorted(members)
        beats = await self.redis.mget([f"{PREFIX}replica:{i}" for i in ids]) if ids else []
        self.waiting = dict(zip(backends, map(int, lengths), strict=True))
        gone = self.liveness.observed({i: json.loads(b) for i, b in zip(ids, beats, strict=True) if b is not None})
        if gone:
            log.info("broker: replica(s) %s stopped (no heartbeat for %.0f s)", ", ".join(gone), GONE_AFTER_S)
            async with self.redis.pipeline(transaction=False) as pipe:
                pipe.srem(REPLICAS, *gone)
                pipe.delete(*(events_key(replica) for replica in gone))
                await pipe.execute()
        self._saw_epoch(epoch)
        self.executor.pull_for({link.hello.backend for link in self.scheduler.workers})

    def beat_soon(self) -> None:
        if self.redis is not None:
            task = asyncio.ensure_future(self._beat_or_note_failure())
            self.tasks.append(task)
            task.add_done_callback(self.tasks.remove)

    async def _beat_or_note_failure(self) -> bool:
        try:
            await self._heartbeat_once()
            return True
        except (RedisError, OSError) as exc:
            if self.liveness.reachable:
                log.warning("broker: Redis cannot be reached (%s); new runs are refused until it can", exc)
            self.liveness.failed()
            return False

    async def _heartbeat_loop(self) -> None:
        while True:
            await asyncio.sleep(HEARTBEAT_S)
            try:
                if await self._beat_or_note_failure():
                    self._end_runs_of_gone_replicas()
            except Exception:  # the heartbeat is this replica's life to the others: it must never stop
                log.exception("broker: heartbeat failed")

    def _end_runs_of_gone_replicas(self) -> None:
        for pending in list(self.pending.values()):
            if pending.executor is not None and self.liveness.is_gone(pending.executor):
                self._end(pending.run, bp.RunStatus.CRASHED, EXECUTOR_GONE)
        self.executor.cancel_orphans()

    # --- browsers that come back -------------------------------------------

    async def tell_returning_browser(self, session_id: str, emit: Any,
                                     told: Callable[[str | None, str], None] | None = None) -> None:
        """A browser connected here: end the runs it had in flight on a replica that has since stopped.

        It often reconnects before that replica is judged gone: wait for the judgement (or for a heartbeat
        that shows the replica alive) rather than answer from a stale view. Every connection of the session
        that finds a run's entry is told; ``told(backend, status)`` counts it once, by whichever replica's
        HDEL removed the entry (metrics: each outcome a browser is told, once per run)."""
        if not is_browser_session(session_id) or self.redis is None:
            return
        try:
            runs = await self.redis.hgetall(f"{PREFIX}session:{session_id}")
        except (RedisError, OSError) as exc:
            log.warning("broker: could not look up session runs: %s", exc)
            return
        entries = {client_id: json.loads(raw) for client_id, raw in runs.items()}
        origins = {client_id: entry["origin"] for client_id, entry in entries.items()}
        waiting = {client_id: origin for client_id, origin in origins.items() if origin != self.id}
        started = time.monotonic()
        # A dead replica's heartbeat stays readable until it expires: only one read after that proves it alive.
        alive_after = started + HEARTBEAT_TTL_S + HEARTBEAT_S
        while waiting and time.monotonic() < started + RETURNING_WAIT_S:
            for client_id, origin in list(waiting.items()):
                if self.liveness.is_gone(origin):
                    emit(bp.done_event(client_id, bp.RunStatus.CRASHED, 0.0, ORIGIN_GONE))
                    del waiting[client_id]
                    try:
                        removed = await self.redis.hdel(f"{PREFIX}session:{session_id}", client_id)
                    except (RedisError, OSError):
                        removed = 0  # the entry stays: the next connection that finds it is told and counts it
                    if removed and told is not None:
                        told(entries[client_id].get("backend"), bp.RunStatus.CRASHED)
                elif self.liveness.seen_at.get(origin, 0.0) > alive_after:
                    del waiting[client_id]  # its replica is alive: it answers the run itself
            await asyncio.sleep(HEARTBEAT_S / 2)
