"""The job of a run, and how it goes from its origin replica to the one replica that executes it: delivered at
least once, run at most once.

    origin    RPUSH queue:<backend> <job>                          (with its session entry, in one MULTI)
    executor  BLMOVE queue:<backend> taken:<me>:<backend>          only while it has a free slot
              SET claim:<run key> <me> NX GET PX <ttl>             nobody had it: run it; else drop this copy
              ...the run...
              LREM taken:<me>:<backend> 1 <job>                    in the MULTI that sends the run's done
                                                                   (server/runs/broker_events.py)
              or, if its workers began draining meanwhile (``give_back``), in one MULTI:
              LREM taken:<me>:<backend> 1 <job>, LPUSH queue:<backend> <job>, DEL claim:<run key>
    origin    LREM queue:<backend> 0 <job>, else                   a cancel, or a run ended before its result
              SET claim:<run key> withdrawn-by:<me> NX GET         (``withdraw``): no executor runs it after

Why a move and not a pop: a destructive pop (BLPOP) that Redis carries out after
the client gave up (Redis stalled longer than the client's read timeout) loses
the job. A move leaves it in the taker's processing list, where the taker
finds it again (its sweep), or, if the taker died, every replica that judges
it gone moves it back to the queue (``recover``). So a job may arrive more
than once, as it may after a push that was retried on a timeout which Redis in
fact carried out: the claim makes a run id run at most once. A job re-delivered
after its run ended finds the claim and is dropped; the result its origin
already has stands.

A claim lives until no copy of its job can be taken any more: a job carries its
origin's deadline, every executor drops one past it (plus ``CLOCK_SKEW_S``)
unread, and the claim outlives that by ``CLOCK_SKEW_S`` again.

The job's shape lives here alone (``job_payload`` writes it, ``read_job`` and
``job_run`` read it): the run's ``RunRequest`` (jaxplay/worker_protocol.py)
flat beside the job's own fields, but ``fresh``, which only the origin's
result cache reads; ``job_run`` checks it as it leaves Redis.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass, fields
from typing import Any

import redis.asyncio as aioredis

from jaxplay import worker_protocol as wp
from jaxplay.server.runs.broker_keys import claim_key, queue_key, taken_key
from jaxplay.server.runs.run import Emit, Run

# What a claim holds when the run's origin took its job back (a cancel): no replica runs it.
WITHDRAWN_BY = "withdrawn-by:"

# How far apart the replicas' clocks may be (they compare the origin's wall-clock deadline).
CLOCK_SKEW_S = 30.0


def job_payload(run: Run, origin: str, deadline: float) -> str:
    """A run as the job its origin pushes: everything an executor needs, and ``deadline``, the wall-clock time
    (``time.time()``) after which its origin no longer waits for it."""
    job = {"key": run.key, "origin": origin, "code": run.code, "backend": run.backend, "timeout_s": run.timeout_s,
           "options": wp.to_wire(run.request.options), "session_id": run.session_id, "network": run.network,
           "runtime": run.runtime, "deadline": deadline}
    if run.request.compare:  # its kind travels with it; left out otherwise, as replicas of earlier versions sent it
        job["compare"] = True
    return json.dumps(job, separators=(",", ":"))


@dataclass(frozen=True)
class Job:
    """A job as an executor took it: ``raw`` is its exact text, which identifies it in the lists."""
    raw: str
    fields: dict[str, Any]

    @property
    def key(self) -> str:
        return str(self.fields["key"])

    @property
    def origin(self) -> str:
        return str(self.fields["origin"])

    @property
    def backend(self) -> str:
        return str(self.fields["backend"])

    @property
    def expires_at(self) -> float:
        """When every executor drops it unread. A job without a deadline (from a replica of an older version)
        gets the one its origin would have set, from now."""
        deadline = self.fields.get("deadline")
        if not isinstance(deadline, (int, float)):
            deadline = time.time() + float(self.fields.get("timeout_s") or 0) + 35.0
        return float(deadline) + CLOCK_SKEW_S

    def expired(self) -> bool:
        return time.time() > self.expires_at

    def request(self) -> wp.RunRequest:
        """What the browser asked, each field checked; ValueError names what is wrong."""
        asked = {f.name: self.fields[f.name] for f in fields(wp.RunRequest) if f.name in self.fields}
        return wp.from_wire(wp.RunRequest, asked, "a queued job")


def read_job(raw: str) -> Job:
    return Job(raw, json.loads(raw))


def job_run(job: Job, emit: Emit) -> Run:
    """The executor's own Run of a job: its events go to ``emit``. ValueError if the job is malformed."""
    return Run(client_id=job.key, request=job.request(), emit=emit, session_id=job.fields.get("session_id") or "",
               network=job.fields.get("network") or "", key=job.key)


async def take(connection: aioredis.Redis, backend: str, replica: str, block_s: float) -> str | None:
    """Move the first waiting job of ``backend`` into ``replica``'s processing list; None if none came within
    ``block_s``. ``connection`` is the caller's own: BLMOVE holds it while it waits."""
    return await connection.blmove(queue_key(backend), taken_key(replica, backend), block_s, "LEFT", "RIGHT")


async def claim(redis: aioredis.Redis, job: Job, replica: str) -> str | None:
    """Claim ``job``'s run for ``replica``: None if this call claimed it, else the replica that holds the claim
    (``replica`` itself when an earlier claim of its own answered too late)."""
    ttl_ms = max(1000, int((job.expires_at + CLOCK_SKEW_S - time.time()) * 1000))
    holder: str | None = await redis.set(claim_key(job.key), replica, nx=True, get=True, px=ttl_ms)
    return holder


async def withdraw(redis: aioredis.Redis, raw: str, origin: str) -> bool:
    """The origin takes back its job ``raw`` so that it never runs: True if it is sure it never will.

    Removed from its queue, or, when it is not there, its run id claimed for the origin's withdrawal (a copy an
    executor takes later finds the claim and is dropped). Not by the removal alone: a removal that Redis carried
    out after the client gave up on it (a stall) is tried again by the client, and the retry finds nothing. False
    when an executor holds the claim: the run started or is starting there, and only a cancel sent to it ends it.
    """
    job = read_job(raw)
    if await redis.lrem(queue_key(job.backend), 0, raw):
        return True
    mine = WITHDRAWN_BY + origin
    holder = await claim(redis, job, mine)
    return holder is None or holder == mine  # this call's claim, or an earlier one of ours that answered late


async def give_back(redis: aioredis.Redis, job: Job, replica: str) -> None:
    """Undo ``replica``'s take of ``job``, which it claimed but cannot run (its workers began draining): back at
    the head of its queue, its claim released, in one MULTI, for another replica to take."""
    async with redis.pipeline(transaction=True) as pipe:
        pipe.lrem(taken_key(replica, job.backend), 1, job.raw)
        pipe.lpush(queue_key(job.backend), job.raw)
        pipe.delete(claim_key(job.key))
        await pipe.execute()


async def taken(redis: aioredis.Redis, replica: str, backend: str) -> list[str]:
    """The jobs in ``replica``'s processing list of ``backend``, oldest first."""
    return list(await redis.lrange(taken_key(replica, backend), 0, -1))


async def recover(redis: aioredis.Redis, replica: str) -> int:
    """Put the jobs a gone ``replica`` had taken back at the head of their queues, in their order; returns how
    many. Every replica that judges it gone may do this at once: each job moves once. A job whose run it had
    claimed is dropped by whoever takes it next (the claim holds), and that run's origin ends it."""
    moved = 0
    prefix = taken_key(replica, "")
    async for key in redis.scan_iter(match=prefix + "*", count=100):
        queue = queue_key(key.removeprefix(prefix))
        while await redis.lmove(key, queue, "RIGHT", "LEFT") is not None:
            moved += 1
    return moved


async def drop_orphans(redis: aioredis.Redis, origin: str) -> int:
    """Drop from every queue the jobs of ``origin``, judged gone: nobody waits for their result (its browsers
    were told their runs ended). Without this, a job of a backend no worker takes would wait out the queue's
    TTL, counted in the queue's length, its positions and its limit. Returns how many."""
    dropped = 0
    async for queue in redis.scan_iter(match=queue_key("*"), count=100):
        for raw in await redis.lrange(queue, 0, -1):
            try:
                orphan = json.loads(raw).get("origin") == origin
            except (ValueError, AttributeError):
                continue  # not a job this version can read: whoever takes it settles it
            if orphan:
                dropped += await redis.lrem(queue, 1, raw)
    return dropped

