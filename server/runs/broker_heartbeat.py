"""A replica's heartbeat in Redis, and what it learns from the others' (server/runs/broker_redis.py owns it).

Every ``HEARTBEAT_S`` one pipeline writes this replica's beat (its backends,
workers, free slots and local queue, EX ``HEARTBEAT_TTL_S``), renews the
expiry of its event stream and processing lists, reads the data epoch, every
replica's beat and every queue's length (read again on demand for /metrics
and /api/backends). From that the rules of server/runs/broker_liveness.py
judge who is gone; for each replica judged gone its stream is deleted, the
jobs it had taken go back to their queues (server/runs/broker_jobs.py
``recover``) and the jobs it had queued are dropped (``drop_orphans``); then
it is told so (``gone:<id>``), and if it was only paused it queues them again
(``_taken_for_gone``). A new data epoch means Redis lost its data: the jobs of
this replica's that no executor had taken are pushed again. A failed beat means
Redis is unreachable or refuses writes (full, or this replica's credentials):
logged once per outage with what to check, and new runs are refused until a
beat works.
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
import uuid
from typing import TYPE_CHECKING, Any

from redis.exceptions import RedisError

from jaxplay import browser_protocol as bp
from jaxplay import worker_protocol as wp
from jaxplay.server.clients.identity import is_browser_session
from jaxplay.server.runs import broker_jobs, broker_sessions
from jaxplay.server.runs.broker_keys import (
    EPOCH_KEY,
    GONE_MARK_TTL_S,
    HINTS,
    PREFIX,
    PROBE_S,
    QUEUE_TTL_S,
    REPLICAS,
    STREAM_TTL_S,
    TAKEN_TTL_S,
    claim_key,
    describe_failure,
    events_key,
    failure_kind,
    gone_key,
    public_hello,
    queue_key,
    taken_key,
)
from jaxplay.server.runs.broker_liveness import GONE_AFTER_S, HEARTBEAT_S, HEARTBEAT_TTL_S

if TYPE_CHECKING:
    from jaxplay.server.runs.broker_state import BrokerState

log = logging.getLogger("jaxplay.broker")

TAKEN_FOR_GONE = ("This server replica lost touch with the others for a while (it was paused, or could not reach "
                  "Redis), and the replica running this program gave it up; run it again.")


class Heartbeat:
    def __init__(self, broker: BrokerState) -> None:
        self.broker = broker
        self.unrecovered: set[str] = set()  # gone replicas whose taken jobs are not yet back in their queues
        self.failing = ""  # why the last beat failed, while beats fail: logged when it changes
        self.judged_gone_by = ""  # a replica that took this one for stopped, until its runs are seen to

    def beat(self) -> str:
        """This replica's beat: what the others show of its workers, and its free slots and local queue."""
        scheduler = self.broker.scheduler
        backends: dict[str, dict[str, Any]] = {}
        for link in scheduler.serving():  # a draining worker takes no run from anyone
            hello = link.hello
            # What /api/backends of a replica without this worker shows of it (the same as this one shows).
            describe = {"device_kind": hello.device_kind, "device_count": hello.device_count,
                        "device_memory_bytes": hello.device_memory_bytes, "jax_version": hello.jax_version,
                        "jaxlib_version": hello.jaxlib_version, "libraries": hello.libraries,
                        "device_peak": wp.to_wire(hello.device_peak)}
            entry = backends.setdefault(hello.backend, {"workers": 0, "slots": 0, "free_slots": 0, "queued": 0,
                                                        "describe": describe, "hellos": []})
            entry["hellos"].append(public_hello(hello))
            entry["workers"] += 1
            entry["slots"] += hello.slots
            entry["free_slots"] += link.free_slots
        for backend, entry in backends.items():
            entry["queued"] = len(scheduler.queues.get(backend, ()))
        return json.dumps({"backends": backends, "at": time.time()})

    async def once(self) -> None:
        broker = self.broker
        redis, own = broker.redis, broker.id
        assert redis is not None
        backends = self.known_backends()
        pulled = list(broker.executor.pullers)
        began = time.monotonic()
        async with redis.pipeline(transaction=False) as pipe:
            pipe.set(f"{PREFIX}replica:{own}", self.beat(), ex=HEARTBEAT_TTL_S)
            pipe.sadd(REPLICAS, own)
            pipe.expire(events_key(own), STREAM_TTL_S)
            for backend in pulled:  # a replica that stops renewing them leaves nothing behind for good
                pipe.expire(taken_key(own, backend), TAKEN_TTL_S)
            pipe.set(EPOCH_KEY, uuid.uuid4().hex, nx=True)
            pipe.get(EPOCH_KEY)
            pipe.smembers(REPLICAS)
            for backend in backends:
                pipe.llen(queue_key(backend))
            pipe.getdel(gone_key(own))
            replies = await pipe.execute()
        epoch, members = replies[4 + len(pulled):6 + len(pulled)]
        broker.waiting = dict(zip(backends, map(int, replies[6 + len(pulled):-1]), strict=True))
        ids = sorted(members)
        beats = await redis.mget([f"{PREFIX}replica:{i}" for i in ids]) if ids else []
        for replica, beat in zip(ids, beats, strict=True):
            if beat is None:  # listed without a beat (it died before this replica saw one): judged in time
                broker.liveness.heard_of(replica)
        gone = broker.liveness.observed({i: json.loads(b) for i, b in zip(ids, beats, strict=True) if b is not None},
                                        took_s=time.monotonic() - began)
        if replies[-1] is not None:
            self.judged_gone_by = replies[-1]
        if self.judged_gone_by:  # until it is done: a beat that fails halfway does it again
            await self._taken_for_gone(self.judged_gone_by)
        if gone:
            log.info("broker: replica(s) %s stopped (no heartbeat for %.0f s)", ", ".join(gone), GONE_AFTER_S)
            async with redis.pipeline(transaction=False) as pipe:
                pipe.srem(REPLICAS, *gone)
                pipe.delete(*(events_key(replica) for replica in gone))
                await pipe.execute()
            self.unrecovered.update(gone)
        for replica in sorted(self.unrecovered):
            moved = await broker_jobs.recover(redis, replica)
            dropped = await broker_jobs.drop_orphans(redis, replica)
            # Told once its jobs are dropped, never before: if it was only paused, it queues them again.
            await redis.set(gone_key(replica), own, ex=GONE_MARK_TTL_S)
            self.unrecovered.discard(replica)
            if moved:
                log.info("broker: %d job(s) that replica %s had taken are queued again", moved, replica)
            if dropped:
                log.info("broker: %d queued job(s) of replica %s dropped: nobody waits for them", dropped, replica)
        self.saw_epoch(epoch)
        broker.executor.pull_for({link.hello.backend for link in broker.scheduler.workers})
        broker.scheduler.refuse_unoffered()  # a worker that joined another replica settles runs accepted blind

    async def refresh_waiting(self) -> None:
        """Read every known queue's length now (metrics, /api/backends); keeps the last on failure."""
        if self.broker.redis is None:
            return
        backends = self.known_backends()
        try:
            async with self.broker.redis.pipeline(transaction=False) as pipe:
                for backend in backends:
                    pipe.llen(queue_key(backend))
                lengths = await asyncio.wait_for(pipe.execute(), PROBE_S)
        except (RedisError, OSError, TimeoutError) as exc:
            log.debug("broker: queue lengths not read: %s", exc)
            return
        self.broker.waiting = dict(zip(backends, map(int, lengths), strict=True))

    def known_backends(self) -> list[str]:
        scheduler = self.broker.scheduler
        names = {w.hello.backend for w in scheduler.workers} | scheduler.expected_backends
        names |= {b for beat in self.broker.live.values() for b in beat.get("backends", {})}
        return sorted(names)

    def soon(self) -> None:
        """Beat now (a worker joined: the others learn of its backend at once, not at the next beat)."""
        if self.broker.redis is not None:
            task = asyncio.ensure_future(self.beat_or_note_failure())
            self.broker.tasks.append(task)
            task.add_done_callback(self.broker.tasks.remove)

    async def beat_or_note_failure(self) -> bool:
        try:
            await self.once()
        except (RedisError, OSError) as exc:
            kind = failure_kind(exc)
            if kind != self.failing:
                log.warning("broker: this replica's heartbeat failed: %s. %s; new runs are refused until a "
                            "heartbeat works.", describe_failure(exc), HINTS[kind])
            self.failing = kind
            self.broker.liveness.failed(kind)
            return False
        if self.failing:
            log.info("broker: this replica's heartbeat works again")
            self.failing = ""
        return True

    def saw_epoch(self, epoch: str | None) -> None:
        """Redis's data epoch, read just now: a new one means it lost its data (a restart without persistence)."""
        broker = self.broker
        if epoch is None or epoch == broker.epoch:
            return
        if broker.epoch is not None:
            log.warning("broker: Redis lost its data (restarted?); queueing this replica's waiting runs again")
            asyncio.create_task(self._push_lost_jobs(epoch))
        broker.epoch = epoch

    async def _push_lost_jobs(self, epoch: str) -> None:
        """After Redis lost its data: push again, in submission order, every job no executor had taken."""
        broker = self.broker
        assert broker.redis is not None
        lost = [p for p in broker.pending.values() if p.executor is None and p.epoch not in (None, epoch)]
        try:
            async with broker.redis.pipeline(transaction=False) as pipe:
                for pending in lost:
                    pipe.rpush(queue_key(pending.run.backend), pending.payload)
                    pipe.expire(queue_key(pending.run.backend), QUEUE_TTL_S)
                for pending in broker.pending.values():
                    if is_browser_session(pending.run.session_id):
                        broker_sessions.remember(pipe, broker.id, pending.run)
                await pipe.execute()
        except (RedisError, OSError) as exc:
            log.error("broker: could not queue %d run(s) again: %s", len(lost), describe_failure(exc))
            broker.liveness.failed(failure_kind(exc))
            broker.epoch = None  # the next heartbeat that reaches Redis tries again
            return
        for pending in lost:
            pending.epoch = epoch
        log.info("broker: %d waiting run(s) queued again", len(lost))

    async def _taken_for_gone(self, judge: str) -> None:
        """Replica ``judge`` took this one for stopped (no heartbeat of it read for seconds: it was paused, or cut
        off from Redis): the others dropped its queued jobs and gave up its runs on their workers. Its jobs that
        no executor claimed go back in the queue; its runs that had started elsewhere end, saying why."""
        broker = self.broker
        assert broker.redis is not None
        log.warning("broker: replica %s took this one for stopped (no heartbeat of it for %.0f s: paused, or cut "
                    "off from Redis); queueing its waiting runs again", judge, GONE_AFTER_S)
        again = 0
        for pending in list(broker.pending.values()):
            if pending.executor == broker.id or pending.epoch is None or pending.pushing:
                continue  # running here, or not yet in Redis: untouched
            run, queue = pending.run, queue_key(pending.run.backend)
            if pending.executor is not None or await broker.redis.exists(claim_key(run.key)):
                broker.give_up(run, bp.RunStatus.CRASHED, TAKEN_FOR_GONE)
            elif await broker.redis.lpos(queue, pending.payload) is None:
                async with broker.redis.pipeline(transaction=False) as pipe:
                    pipe.rpush(queue, pending.payload)
                    pipe.expire(queue, QUEUE_TTL_S)
                    await pipe.execute()
                again += 1
        log.info("broker: %d waiting run(s) queued again", again)
        self.judged_gone_by = ""

    async def loop(self) -> None:
        while True:
            await asyncio.sleep(HEARTBEAT_S)
            try:
                if await self.beat_or_note_failure():
                    self.broker.check_runs()
            except Exception:  # the heartbeat is this replica's life to the others: it must never stop
                log.exception("broker: heartbeat failed")
