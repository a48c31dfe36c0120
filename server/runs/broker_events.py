"""A run's events on their way from the replica that executes it to the replica its browser is on (its origin),
through the origin's Redis stream: each delivered once, in order, and trimmed once read.

    executor  EventSender   one task: XADD each event with its run's sequence number, many per MULTI/EXEC,
                            with the LREM that settles a finished job (server/runs/broker_jobs.py)
    origin    EventReader   one task: XREAD its stream from where it left off, XTRIM what it has read
              InOrder       per run: drops a repeat, holds an event that comes after a gap

Why sequence numbers and transactions both:
- a batch is one MULTI/EXEC, so Redis stores all of it or none. A write refused
  for memory (OOM) in the middle of a plain pipeline stored the events before
  it, and the whole batch sent again stored them twice (output printed twice),
  or it stored a ``done`` whose stdout it had refused (output lost);
- a batch Redis carried out after the client gave up on it (Redis stalled for
  longer than the read timeout) is sent again and stored twice, transaction or
  not. So every event carries its run's sequence number, and the origin drops
  the ones it has already delivered.
An event after a gap waits for the missing ones. With whole batches sent in
order a gap means events were lost in Redis (it restarted empty, or trimmed a
stream over its cap): a gap not filled within ``GAP_WAIT_S`` ends the run as
an ``error`` saying so (server/runs/broker_redis.py), never as ``ok`` with
output missing.

Retention: the origin trims its stream (XTRIM MINID, exact) up to what it has
read, in the round trip of its next read, so Redis keeps a delivered event for
one read at most. What is not read yet is bounded in bytes per stream
(``STREAM_MAX_BYTES``, measured with MEMORY USAGE before a batch, once a second at
most per stream; over it, the oldest entries go by their size, not their count),
and every stream expires STREAM_TTL_S after its last write or heartbeat.
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

import redis.asyncio as aioredis
from redis.exceptions import RedisError

from jaxplay.server.runs.broker_keys import RETRY_S, STREAM_TTL_S, OutageLog, events_key

log = logging.getLogger("jaxplay.broker")

T = TypeVar("T")
# Unread events one origin's stream may hold, about: beyond it the oldest are trimmed (and their runs told).
STREAM_MAX_BYTES = 32 << 20
# How often the sender checks an origin's stream against STREAM_MAX_BYTES (while it sends it events).
CAP_CHECK_S = 1.0
# An event after a gap waits this long for the missing ones before its run is taken for damaged.
GAP_WAIT_S = 5.0
# Events and settles per MULTI/EXEC: Redis serves nobody else while it runs one.
MAX_BATCH = 500
READ_BLOCK_MS = 1000
READ_COUNT = 1000

# Trims a stream whose memory is over ARGV[1] bytes, oldest entries first, until about half of it is left (so that
# a reader that fell behind costs one trim, not one per batch). Measured exactly (SAMPLES 0: every node, cheap next
# to the entries): a sample of the oldest nodes takes the rest to be as large, so a few large events first made a
# small stream look over the cap. Each entry is weighed by its fields' lengths, so a few large events go without
# the many small ones of other runs behind them.
CAP_SCRIPT = """
local used = redis.call('MEMORY', 'USAGE', KEYS[1], 'SAMPLES', '0')
if not used or used <= tonumber(ARGV[1]) then return 0 end
local excess = used - tonumber(ARGV[1]) / 2
local drop, start = 0, '-'
while excess > 0 do
  local entries = redis.call('XRANGE', KEYS[1], start, '+', 'COUNT', 100)
  if #entries == 0 then break end
  for _, entry in ipairs(entries) do
    for _, value in ipairs(entry[2]) do excess = excess - #value end
    drop = drop + 1
    start = '(' .. entry[1]
    if excess <= 0 then break end
  end
end
if drop == 0 then return 0 end
return redis.call('XTRIM', KEYS[1], 'MAXLEN', '=', redis.call('XLEN', KEYS[1]) - drop)
"""


@dataclass(frozen=True)
class Event:
    """One event of run ``key`` for its origin's stream; ``seq`` counts its run's events from 0."""
    origin: str
    key: str
    seq: int
    event: dict[str, Any]
    hello: dict[str, Any] | None = None

    def fields(self, executor: str) -> dict[str, str]:
        fields = {"key": self.key, "executor": executor, "seq": str(self.seq),
                  "event": json.dumps(self.event, separators=(",", ":"))}
        if self.hello is not None:
            fields["hello"] = json.dumps(self.hello)
        return fields


@dataclass(frozen=True)
class Settle:
    """A job this replica finished (or dropped): take it out of its processing list ``taken``."""
    taken: str
    job: str


Outgoing = Event | Settle
# (run key, executing replica, sequence number or None from an older replica, event, worker hello)
Deliver = Callable[[str, str, int | None, dict[str, Any], dict[str, Any] | None], None]


class InOrder(Generic[T]):
    """One run's events put back in the order its executor numbered them: a repeat is dropped, an early one
    (after a gap) is held until the ones before it come. Pure bookkeeping; the caller gives the time."""

    def __init__(self) -> None:
        self.next = 0
        self.early: dict[int, T] = {}
        self.gap_since: float | None = None  # when the gap that holds the early ones appeared

    def accept(self, seq: int, item: T, now: float) -> list[T]:
        """What may be delivered now, in order: ``item`` and the held ones that follow it, or nothing."""
        if seq < self.next or seq in self.early:
            return []
        self.early[seq] = item
        ready = []
        while self.next in self.early:
            ready.append(self.early.pop(self.next))
            self.next += 1
        if not self.early:
            self.gap_since = None
        elif ready or self.gap_since is None:
            self.gap_since = now
        return ready

    def gap_older_than(self, seconds: float, now: float) -> bool:
        return self.gap_since is not None and now - self.gap_since > seconds


class EventSender:
    """The executor side: sends events and settles in the order they were put, retrying a batch Redis did not
    take until it does (dropping the events of origins judged gone meanwhile)."""

    def __init__(self, replica: str, is_gone: Callable[[str], bool]) -> None:
        self.replica = replica
        self.is_gone = is_gone
        self.queue: asyncio.Queue[Outgoing] = asyncio.Queue()
        self.checked: dict[str, float] = {}  # origin -> when its stream was last checked against its cap

    def put(self, item: Outgoing) -> None:
        self.queue.put_nowait(item)

    async def run(self, redis: aioredis.Redis) -> None:
        outage = OutageLog("sending run events")
        batch: list[Outgoing] = []
        while True:
            if not batch:
                batch.append(await self.queue.get())
            while len(batch) < MAX_BATCH and not self.queue.empty():
                batch.append(self.queue.get_nowait())
            batch = [item for item in batch if isinstance(item, Settle) or not self.is_gone(item.origin)]
            if not batch:
                continue
            try:
                await self._send(redis, batch)
            except (RedisError, OSError) as exc:
                outage.failed(exc)
                await asyncio.sleep(RETRY_S)
                continue
            outage.worked()
            batch = []

    async def _send(self, redis: aioredis.Redis, batch: list[Outgoing]) -> None:
        origins = sorted({item.origin for item in batch if isinstance(item, Event)})
        await self._cap(redis, origins)
        async with redis.pipeline(transaction=True) as pipe:
            for item in batch:
                if isinstance(item, Event):
                    pipe.xadd(events_key(item.origin), item.fields(self.replica))
                else:
                    pipe.lrem(item.taken, 1, item.job)
            for origin in origins:
                pipe.expire(events_key(origin), STREAM_TTL_S)  # a stopped origin's stream expires
            await pipe.execute()

    async def _cap(self, redis: aioredis.Redis, origins: list[str]) -> None:
        """Trim the streams of ``origins`` not checked for a second that are over STREAM_MAX_BYTES."""
        now = time.monotonic()
        due = [origin for origin in origins if now - self.checked.get(origin, 0.0) >= CAP_CHECK_S]
        if not due:
            return
        async with redis.pipeline(transaction=False) as pipe:
            for origin in due:
                pipe.eval(CAP_SCRIPT, 1, events_key(origin), STREAM_MAX_BYTES)
            trimmed = await pipe.execute()
        for origin, count in zip(due, trimmed, strict=True):
            self.checked[origin] = now
            if count:
                log.warning("broker: replica %s's event stream was over %d MiB unread: its %d oldest events "
                            "were dropped (their runs end saying so)", origin, STREAM_MAX_BYTES >> 20, count)


class EventReader:
    """The origin side: reads this replica's stream in order, from where it left off (also across Redis
    outages), and trims each entry in the round trip of the read after the one that delivered it."""

    def __init__(self, replica: str, deliver: Deliver) -> None:
        self.stream = events_key(replica)
        self.deliver = deliver

    async def run(self, redis: aioredis.Redis) -> None:
        outage = OutageLog("reading run events")
        last = trimmed = "0-0"
        while True:
            try:
                async with redis.pipeline(transaction=False) as pipe:
                    if last != trimmed:
                        pipe.xtrim(self.stream, minid=following(last), approximate=False)
                    pipe.xread({self.stream: last}, block=READ_BLOCK_MS, count=READ_COUNT)
                    replies = (await pipe.execute())[-1]
            except (RedisError, OSError) as exc:
                outage.failed(exc)
                await asyncio.sleep(RETRY_S)
                continue
            outage.worked()
            trimmed = last
            for _, entries in replies or ():
                for entry_id, fields in entries:
                    last = entry_id
                    self._deliver(entry_id, fields)

    def _deliver(self, entry_id: str, fields: dict[str, str]) -> None:
        try:
            seq = int(fields["seq"]) if "seq" in fields else None
            hello = json.loads(fields["hello"]) if "hello" in fields else None
            self.deliver(fields["key"], fields["executor"], seq, json.loads(fields["event"]), hello)
        except (KeyError, ValueError, TypeError) as exc:  # not an entry an executor wrote: skipped, reading goes on
            log.warning("broker: event %s in %s skipped: %r", entry_id, self.stream, exc)


def following(entry_id: str) -> str:
    """The smallest stream id after ``entry_id`` (XTRIM MINID keeps ids from it on)."""
    millis, _, seq = entry_id.partition("-")
    return f"{millis}-{int(seq or 0) + 1}"
