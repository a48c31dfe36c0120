"""The executor side of the broker: take other replicas' (and this one's) jobs for this replica's workers.

Tasks, all on the server's event loop, owned by the ``JobExecutor`` (started and
stopped by the broker, server/runs/broker_redis.py)::

    one puller per backend   move a job into this replica's processing list (BLMOVE) only while
                             it has a free slot for it, claim its run id, then queue it on the
                             local scheduler as a Run of its own (or give it back, when its
                             workers began draining meanwhile); now and then, and after any
                             failure, read the processing list again for a job whose move Redis
                             carried out after the client gave up (the sweep)
    the event sender         server/runs/broker_events.py: each event to its origin's stream, in
                             order, numbered, in MULTI/EXEC batches, with the settle of each
                             finished job (its LREM from the processing list)
    the cancel listener      SUBSCRIBE to cancels; cancel the local Run, or remember the
                             key for a job not taken yet

The hand-off (at least once, each run id at most once) is server/runs/broker_jobs.py's.
A job whose origin replica is judged gone (server/runs/broker_liveness.py) is
dropped; a job from an origin not yet judged runs, and is cancelled if that
origin is judged gone later. Events of this replica's own runs skip Redis:
they go straight to the origin side's ``deliver``.
"""

from __future__ import annotations

import asyncio
import itertools
import logging
import time
from typing import Any

import redis.asyncio as aioredis
from redis.exceptions import RedisError

from jaxplay import browser_protocol as bp
from jaxplay.server.runs import broker_jobs
from jaxplay.server.runs.broker_events import Deliver, Event, EventSender, Settle
from jaxplay.server.runs.broker_jobs import Job
from jaxplay.server.runs.broker_keys import (
    CANCELS,
    PREFIX,
    RETRY_S,
    OutageLog,
    connect,
    describe_failure,
    listen_forever,
    public_hello,
    taken_key,
)
from jaxplay.server.runs.broker_liveness import ReplicaLiveness
from jaxplay.server.runs.scheduler import Run, Scheduler

log = logging.getLogger("jaxplay.broker")

# A key cancelled before its job arrived is remembered this long.
CANCEL_MEMORY_S = 60.0
# A run this replica finished is remembered this long (a late copy of its job is then dropped, not run).
FINISHED_MEMORY_S = 600.0
# How often a puller reads its processing list again even when nothing failed.
SWEEP_S = 5.0
TAKE_BLOCK_S = 1.0


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
        self.finished: dict[str, float] = {}  # run key -> when this replica sent its done
        self.cancelled: dict[str, float] = {}  # keys cancelled before this replica registered them
        self.giving_back: set[str] = set()  # keys of jobs on their way back to the shared queue
        self.sender = EventSender(replica_id, liveness.is_gone)
        self.tasks: list[asyncio.Task[None]] = []
        self.pullers: dict[str, asyncio.Task[None]] = {}

    def start(self, redis: aioredis.Redis) -> None:
        self.redis = redis
        self.tasks = [asyncio.create_task(self.sender.run(redis)), asyncio.create_task(self._listen_cancels())]

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
        now = time.monotonic()
        self.cancelled = {k: t for k, t in self.cancelled.items() if t > now - CANCEL_MEMORY_S}
        self.finished = {k: t for k, t in self.finished.items() if t > now - FINISHED_MEMORY_S}

    # --- taking jobs -------------------------------------------------------

    def _free_slots(self, backend: str) -> int:
        free = sum(w.free_slots for w in self.scheduler.workers if w.hello.backend == backend)
        return free - len(self.scheduler.queues.get(backend, ()))

    async def _pull(self, backend: str) -> None:
        """Take jobs for ``backend`` from Redis while this replica has a free slot for one."""
        connection = connect(self.url)  # BLMOVE holds its connection while it waits
        outage = OutageLog(f"taking {backend} jobs")
        sweep_at = 0.0
        try:
            while True:
                if not self.scheduler.accepting:
                    await asyncio.sleep(0.05)
                    continue
                if time.monotonic() >= sweep_at:
                    sweep_at = time.monotonic() + (SWEEP_S if await self._sweep(backend) else RETRY_S)
                if self._free_slots(backend) <= 0:
                    await asyncio.sleep(0.005)
                    continue
                try:
                    raw = await broker_jobs.take(connection, backend, self.id, TAKE_BLOCK_S)
                except (RedisError, OSError) as exc:
                    outage.failed(exc)
                    sweep_at = 0.0  # Redis may have moved a job for us after we gave up waiting
                    await asyncio.sleep(RETRY_S)
                    continue
                outage.worked()
                if raw is not None and not await self._handle(backend, raw):
                    sweep_at = 0.0
        finally:
            await connection.aclose()

    async def _sweep(self, backend: str) -> bool:
        """Handle each job in this replica's processing list that it has not registered (a move whose answer
        was lost, a claim that failed); False if Redis could not be read."""
        assert self.redis is not None
        try:
            jobs = await broker_jobs.taken(self.redis, self.id, backend)
        except (RedisError, OSError):
            return False
        unregistered = [raw for raw in jobs if broker_jobs.read_job(raw).key not in self.executing]
        lost = sum(1 for raw in unregistered if broker_jobs.read_job(raw).key not in self.finished)
        if lost:  # (a finished one is there until the settle sent with its done reaches Redis)
            log.info("broker: %d %s job(s) found in this replica's processing list that it had not registered "
                     "(a take or claim whose answer was lost)", lost, backend)
        handled = True
        for raw in unregistered:
            handled = await self._handle(backend, raw) and handled
        return handled

    async def _handle(self, backend: str, raw: str) -> bool:
        """A job now in this replica's processing list: run it if its claim is ours, else settle it (drop it
        from the list). False if Redis failed before that was decided (the job stays for the next sweep)."""
        assert self.redis is not None
        job = broker_jobs.read_job(raw)
        settle = Settle(taken_key(self.id, backend), raw)
        if job.key in self.giving_back:  # the sweep found it before its give-back moved it
            return True
        if job.key in self.executing:  # a second copy of a run this replica runs now
            self.sender.put(settle)
            return True
        if job.origin != self.id and self.liveness.is_gone(job.origin):
            try:  # a job pushed again by an origin that was only paused: its heartbeat is back
                back = await self.redis.exists(f"{PREFIX}replica:{job.origin}")
            except (RedisError, OSError):
                return False
            if not back:
                log.info("broker: dropping run %s of replica %s, which stopped", job.key, job.origin)
                self.sender.put(settle)
                return True
            self.liveness.back(job.origin)
        if job.expired():
            log.info("broker: dropping run %s: its origin stopped waiting for it", job.key)
            self.sender.put(settle)
            return True
        try:
            holder = await broker_jobs.claim(self.redis, job, self.id)
        except (RedisError, OSError) as exc:
            log.info("broker: run %s not claimed yet (%s); trying again", job.key, describe_failure(exc))
            return False
        if holder is not None and (holder != self.id or job.key in self.finished):
            log.info("broker: dropping a copy of run %s, %s", job.key, "which its origin withdrew"
                     if holder.startswith(broker_jobs.WITHDRAWN_BY) else f"which replica {holder} runs or ran")
            self.sender.put(settle)
            return True
        self._execute(job, settle)
        return True

    def _execute(self, job: Job, settle: Settle) -> None:
        key, origin = job.key, job.origin
        self.liveness.heard_of(origin)  # not yet judged: it gets the grace a restarting Redis needs
        numbers = itertools.count()

        def relay(event: dict[str, Any]) -> None:
            seq = next(numbers)
            done = event.get("type") == "done"
            if done:
                self.executing.pop(key, None)
                self.finished[key] = time.monotonic()
            hello = None
            if event.get("type") == "started" and run.worker:
                hello = public_hello(run.worker.hello) | {"trusted": run.worker.trusted}
            if origin == self.id:
                self.deliver(key, self.id, seq, event, hello)
            else:
                self.sender.put(Event(origin, key, seq, event, hello))
            if done:  # after its done, in the same batch or a later one: never before it
                self.sender.put(settle)

        if not self.scheduler.takes_new_runs(job.backend):
            # Taken just as this replica's last worker of its backend began draining (or left): another replica's
            # workers take it, rather than it waiting here for none. Nothing of it was sent yet.
            self.giving_back.add(key)
            asyncio.create_task(self._give_back(job))
            return
        try:
            run = broker_jobs.job_run(job, relay)
        except ValueError as exc:  # a job no replica of this version can run: its origin's deadline ends it
            log.warning("broker: dropping run %s, whose job this replica cannot read: %s", key, exc)
            self.sender.put(settle)
            return
        self.executing[key] = (run, origin)
        if self.cancelled.pop(key, None) is not None:
            self.scheduler.finish(run, bp.RunStatus.CANCELLED, "Stopped at your request.")
            return
        try:
            # A job taken from the shared queue: it counts against its browser on the replica it came from.
            self.scheduler.queue_here(run, count=False)
        except bp.ProtocolError as exc:
            self.scheduler.finish(run, bp.RunStatus.REJECTED, str(exc), reason=exc.reason)

    async def _give_back(self, job: Job) -> None:
        assert self.redis is not None
        log.info("broker: giving run %s back to the shared queue (no worker here takes new runs)", job.key)
        try:
            while True:
                try:
                    await broker_jobs.give_back(self.redis, job, self.id)
                    return
                except (RedisError, OSError) as exc:
                    log.warning("broker: run %s not given back yet (%s); retrying", job.key, describe_failure(exc))
                    await asyncio.sleep(RETRY_S)
        finally:
            self.giving_back.discard(job.key)

    # --- cancels in ----------------------------------------------------------

    async def _listen_cancels(self) -> None:
        assert self.redis is not None
        await listen_forever(self.redis, CANCELS, self._cancel_received, "cancels from other replicas")

    def _cancel_received(self, key: str) -> None:
        entry = self.executing.get(key)
        if entry is not None:
            Scheduler.cancel(self.scheduler, entry[0])
        else:  # not taken yet (maybe still on its way into Redis): refuse it when it is
            self.cancelled[key] = time.monotonic()
