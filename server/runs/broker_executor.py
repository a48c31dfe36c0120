"""The executor side of the broker: take other replicas' (and this one's) jobs for this replica's workers.

Tasks, all on the server's event loop, owned by the ``JobExecutor`` (started and
stopped by the broker, server/runs/broker_redis.py)::

    one puller per backend   BLPOP a job only while this replica has a free slot for it,
                             then queue it on the local scheduler as a Run of its own
    the event sender         XADD each event to its origin's stream, in order, batched;
                             a batch Redis did not take is sent again until it does
    the cancel listener      SUBSCRIBE to cancels; cancel the local Run, or remember the
                             key for a job not taken yet

A job whose origin replica is judged gone (server/runs/broker_liveness.py) is
dropped; a job from an origin not yet judged runs, and is cancelled if that
origin is judged gone later. Events of this replica's own runs skip Redis:
they go straight to the origin side's ``deliver``.
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
from collections.abc import Callable
from typing import Any

import redis.asyncio as aioredis
from redis.exceptions import RedisError

from jaxplay import browser_protocol as bp
from jaxplay.server.runs.broker_keys import (
    CANCELS,
    RETRY_S,
    STREAM_MAXLEN,
    STREAM_TTL_S,
    connect,
    events_key,
    listen_forever,
    public_hello,
    queue_key,
)
from jaxplay.server.runs.broker_liveness import ReplicaLiveness
from jaxplay.server.runs.scheduler import Run, Scheduler

log = logging.getLogger("jaxplay.broker")

# (origin, run key, event, the executing worker's hello on 'started')
Outgoing = tuple[str, str, dict[str, Any], dict[str, Any] | None]
Deliver = Callable[[str, str, dict[str, Any], dict[str, Any] | None], None]
# A key cancelled before its job arrived is remembered this long.
CANCEL_MEMORY_S = 60.0


class JobExecutor:
    def __init__(self, url: str, scheduler: Scheduler, replica_id: str, liveness: ReplicaLiveness,
                 deliver: Deliver) -> None:
        self.url = url
        self.scheduler = scheduler
        self.id = replica_id
        self.liveness = liveness
        self.deliver = deliver  # the origin side of this replica, for its own runs
        self.redis: aioredis.Redis | None = None
        self.executing: dict[str, tuple[Run, str]] = {}  # run key -> (local run, origin)
        self.cancelled: dict[str, float] = {}  # keys cancelled before this replica registered them
        self.outgoing: asyncio.Queue[Outgoing] = asyncio.Queue()
        self.tasks: list[asyncio.Task[None]] = []
        self.pullers: dict[str, asyncio.Task[None]] = {}

    def start(self, redis: aioredis.Redis) -> None:
        self.redis = redis
        self.tasks = [asyncio.create_task(self._send_events()), asyncio.create_task(self._listen_cancels())]

    async def stop(self) -> None:
        tasks = [*self.tasks, *self.pullers.values()]
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)

    def pull_for(self, backends: set[str]) -> None:
        """Start taking jobs for each backend this replica now has workers for."""
        for backend in backends - set(self.pullers):
            self.pullers[backend] = asyncio.create_task(self._pull(backend))

    def cancel_orphans(self) -> None:
        """Cancel the runs of origins judged gone: nobody would read their events."""
        for key, (run, origin) in list(self.executing.items()):
            if self.liveness.is_gone(origin):
                log.info("broker: replica %s stopped; cancelling its run %s", origin, key)
                self.executing.pop(key, None)
                Scheduler.cancel(self.scheduler, run)
        cutoff = time.monotonic() - CANCEL_MEMORY_S
        self.cancelled = {k: t for k, t in self.cancelled.items() if t > cutoff}

    # --- taking jobs -------------------------------------------------------

    def _free_slots(self, backend: str) -> int:
        free = sum(w.free_slots for w in self.scheduler.workers if w.hello.backend == backend)
        return free - len(self.scheduler.queues.get(backend, ()))

    async def _pull(self, backend: str) -> None:
        """Take jobs for ``backend`` from Redis while this replica has a free slot for one."""
        connection = connect(self.url)  # BLPOP holds its connection
        try:
            while True:
                if not self.scheduler.accepting or self._free_slots(backend) <= 0:
                    await asyncio.sleep(0.005)
                    continue
                try:
                    item = await connection.blpop([queue_key(backend)], timeout=1)
                except (RedisError, OSError) as exc:
                    log.warning("broker: taking a job failed (%s); retrying", exc)
                    await asyncio.sleep(RETRY_S)
                    continue
                if item is not None:
                    self._execute(json.loads(item[1]))
        finally:
            await connection.aclose()

    def _execute(self, job: dict[str, Any]) -> None:
        key, origin = job["key"], job["origin"]
        if origin != self.id and self.liveness.is_gone(origin):
            log.info("broker: dropping run %s of replica %s, which stopped", key, origin)
            return
        if key in self.executing:
            return  # pushed again after Redis lost its data, and this replica already runs it
        self.liveness.heard_of(origin)  # not yet judged: it gets the grace a restarting Redis needs

        def relay(event: dict[str, Any]) -> None:
            if event.get("type") == "done":
                self.executing.pop(key, None)
            hello = None
            if event.get("type") == "started" and run.worker:
                hello = public_hello(run.worker.hello) | {"trusted": run.worker.trusted}
            if origin == self.id:
                self.deliver(key, self.id, event, hello)
            else:
                self.outgoing.put_nowait((origin, key, event, hello))

        run = Run(client_id=key, code=job["code"], backend=job["backend"], timeout_s=float(job["timeout_s"]),
                  options=job["options"], emit=relay, session_id=job.get("session_id") or "",
                  network=job.get("network") or "", key=key, runtime=str(job.get("runtime") or ""))
        self.executing[key] = (run, origin)
        if self.cancelled.pop(key, None) is not None:
            self.scheduler.finish(run, bp.RunStatus.CANCELLED, "Stopped at your request.")
            return
        try:
            # A job taken from the shared queue: it counts against its browser on the replica it came from.
            self.scheduler.queue_here(run, count=False)
        except bp.ProtocolError as exc:
            self.scheduler.finish(run, bp.RunStatus.REJECTED, str(exc), reason=exc.reason)

    # --- events out, cancels in ----------------------------------------------

    async def _send_events(self) -> None:
        """XADD events to their origins' streams in order, many per round trip; a batch Redis did not take
        is sent again (in order, with what came since) until it does, unless its origin is gone."""
        assert self.redis is not None
        batch: list[Outgoing] = []
        while True:
            if not batch:
                batch.append(await self.outgoing.get())
            while not self.outgoing.empty():
                batch.append(self.outgoing.get_nowait())
            batch = [item for item in batch if not self.liveness.is_gone(item[0])]
            try:
                async with self.redis.pipeline(transaction=False) as pipe:
                    for origin, key, event, hello in batch:
                        fields = {"key": key, "executor": self.id, "event": json.dumps(event, separators=(",", ":"))}
                        if hello is not None:
                            fields["hello"] = json.dumps(hello)
                        pipe.xadd(events_key(origin), fields, maxlen=STREAM_MAXLEN, approximate=True)
                    for origin in {item[0] for item in batch}:
                        pipe.expire(events_key(origin), STREAM_TTL_S)  # a stopped origin's stream expires
                    await pipe.execute()
                batch = []
            except (RedisError, OSError) as exc:
                log.warning("broker: %d event(s) not sent yet (%s); retrying", len(batch), exc)
                await asyncio.sleep(RETRY_S)

    async def _listen_cancels(self) -> None:
        assert self.redis is not None
        await listen_forever(self.redis, CANCELS, self._cancel_received, "cancels from other replicas")

    def _cancel_received(self, key: str) -> None:
        entry = self.executing.get(key)
        if entry is not None:
            Scheduler.cancel(self.scheduler, entry[0])
        else:  # not taken yet (maybe still on its way into Redis): refuse it when it is
            self.cancelled[key] = time.monotonic()
