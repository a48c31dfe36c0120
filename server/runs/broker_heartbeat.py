"""A replica's heartbeat in Redis, and what it learns from the others' (server/runs/broker_redis.py owns it).

Every ``HEARTBEAT_S`` one pipeline writes this replica's beat (its backends,
workers, free slots and local queue, EX ``HEARTBEAT_TTL_S``), renews the
expiry of its event stream and processing lists, reads the data epoch, every
replica's beat and every queue's length. From that the rules of
server/runs/broker_liveness.py judge who is gone; for each replica judged gone
its stream is deleted and the jobs it had taken go back to their queues
(server/runs/broker_jobs.py ``recover``). A failed beat means Redis is
unreachable or refuses writes (full, or this replica's credentials): logged
once per outage with what to check, and new runs are refused until a beat works.
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
import uuid
from typing import TYPE_CHECKING, Any

from redis.exceptions import RedisError

from jaxplay.server.runs import broker_jobs
from jaxplay.server.runs.broker_keys import (
    EPOCH_KEY,
    HINTS,
    PREFIX,
    REPLICAS,
    STREAM_TTL_S,
    TAKEN_TTL_S,
    describe_failure,
    events_key,
    failure_kind,
    public_hello,
    queue_key,
    taken_key,
)
from jaxplay.server.runs.broker_liveness import GONE_AFTER_S, HEARTBEAT_S, HEARTBEAT_TTL_S

if TYPE_CHECKING:
    from jaxplay.server.runs.broker_redis import RedisBroker

log = logging.getLogger("jaxplay.broker")


class Heartbeat:
    def __init__(self, broker: RedisBroker) -> None:
        self.broker = broker
        self.unrecovered: set[str] = set()  # gone replicas whose taken jobs are not yet back in their queues
        self.failing = ""  # why the last beat failed, while beats fail: logged when it changes

    def beat(self) -> str:
        """This replica's beat: what the others show of its workers, and its free slots and local queue."""
        scheduler = self.broker.scheduler
        backends: dict[str, dict[str, Any]] = {}
        for link in scheduler.workers:
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
            entry["queued"] = len(scheduler.queues.get(backend, ()))
        return json.dumps({"backends": backends, "at": time.time()})

    async def once(self) -> None:
        broker = self.broker
        redis, own = broker.redis, broker.id
        assert redis is not None
        backends = broker.known_backends()
        pulled = list(broker.executor.pullers)
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
            replies = await pipe.execute()
        epoch, members = replies[4 + len(pulled):6 + len(pulled)]
        broker.waiting = dict(zip(backends, map(int, replies[6 + len(pulled):]), strict=True))
        ids = sorted(members)
        beats = await redis.mget([f"{PREFIX}replica:{i}" for i in ids]) if ids else []
        for replica, beat in zip(ids, beats, strict=True):
            if beat is None:  # listed without a beat (it died before this replica saw one): judged in time
                broker.liveness.heard_of(replica)
        gone = broker.liveness.observed({i: json.loads(b) for i, b in zip(ids, beats, strict=True) if b is not None})
        if gone:
            log.info("broker: replica(s) %s stopped (no heartbeat for %.0f s)", ", ".join(gone), GONE_AFTER_S)
            async with redis.pipeline(transaction=False) as pipe:
                pipe.srem(REPLICAS, *gone)
                pipe.delete(*(events_key(replica) for replica in gone))
                await pipe.execute()
            self.unrecovered.update(gone)
        for replica in sorted(self.unrecovered):
            moved = await broker_jobs.recover(redis, replica)
            self.unrecovered.discard(replica)
            if moved:
                log.info("broker: %d job(s) that replica %s had taken are queued again", moved, replica)
        broker.saw_epoch(epoch)
        broker.executor.pull_for({link.hello.backend for link in broker.scheduler.workers})

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

    async def loop(self) -> None:
        while True:
            await asyncio.sleep(HEARTBEAT_S)
            try:
                if await self.beat_or_note_failure():
                    self.broker.check_runs()
            except Exception:  # the heartbeat is this replica's life to the others: it must never stop
                log.exception("broker: heartbeat failed")
