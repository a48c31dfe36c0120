"""The byte cap on an origin's event stream (server/runs/broker_events.py) against a real Redis: it trims only
a stream that is over the cap, and then as few events as bring it back under, oldest first.

The attack: one run emits a few large events (a display event may be 16 MiB,
80 MiB in all per run: sandbox/output/event_channel.py) while its origin's
reader is behind, so they sit at the head of the stream, followed by other
runs' small events. Two ways the cap used to hurt those other runs:

- ``MEMORY USAGE ... SAMPLES 5`` measures the five oldest nodes of a stream and
  takes every other node to be as large: a stream a fifth of the cap, with a
  few large events first, was taken to be over it;
- a stream really over the cap was cut to a count of entries (its length times
  the cap over its size, halved), as if all entries were the same size: to
  drop the large events it dropped hundreds of small ones behind them.

Either way the other runs' unread events were dropped, and those runs ended
as ``error`` (output lost) because of one run's output.
"""

from __future__ import annotations

import asyncio
import json
import uuid

import pytest
import redis.asyncio as aioredis

from jaxplay.server.runs.broker_events import STREAM_MAX_BYTES, EventSender
from jaxplay.server.runs.broker_keys import events_key
from tests.redis_server import RedisServer

pytestmark = pytest.mark.live

SMALL_EVENTS = 1500


async def fill_and_cap(redis: RedisServer, large_events: int, large_bytes: int) -> tuple[int, int, list[str]]:
    """A stream with ``large_events`` of one run first, then another run's small ones, then the sender's cap
    check on it. Returns (its exact memory before, its length before, the runs of the entries left)."""
    client = aioredis.from_url(redis.url, decode_responses=True)
    origin = "cap-" + uuid.uuid4().hex[:8]
    stream = events_key(origin)
    try:
        large = json.dumps({"type": "display", "text": "x" * large_bytes})
        for seq in range(large_events):
            await client.xadd(stream, {"key": "large", "executor": "e", "seq": str(seq), "event": large})
        async with client.pipeline(transaction=False) as pipe:
            for seq in range(SMALL_EVENTS):
                pipe.xadd(stream, {"key": "small", "executor": "e", "seq": str(seq),
                                   "event": json.dumps({"type": "stdout", "text": f"line {seq}\n"})})
            await pipe.execute()
        exact = await client.memory_usage(stream, samples=0)
        before = await client.xlen(stream)
        await EventSender("executor", lambda origin: False)._cap(client, [origin])
        left = [fields["key"] for _, fields in await client.xrange(stream)]
        return exact, before, left
    finally:
        await client.delete(stream)
        await client.aclose()


def test_a_few_large_events_first_do_not_make_a_stream_under_the_cap_look_over_it(redis_server: RedisServer):
    exact, before, left = asyncio.run(fill_and_cap(redis_server, 5, 1 << 20))
    assert exact < STREAM_MAX_BYTES / 2, f"the stream holds {exact} bytes: the test means one well under the cap"
    assert len(left) == before == 5 + SMALL_EVENTS, (
        f"{before - len(left)} unread events dropped from a stream of {exact >> 20} MiB, under the "
        f"{STREAM_MAX_BYTES >> 20} MiB cap")


def test_a_stream_over_the_cap_through_a_few_large_events_loses_those_not_the_small_ones_behind(
        redis_server: RedisServer):
    exact, before, left = asyncio.run(fill_and_cap(redis_server, 5, 8 << 20))
    assert exact > STREAM_MAX_BYTES and before == 5 + SMALL_EVENTS
    assert left.count("small") == SMALL_EVENTS, f"{SMALL_EVENTS - left.count('small')} small events dropped"
    assert left.count("large") < 5, "the stream over the cap was not trimmed"


def test_a_stream_over_the_cap_through_many_events_is_trimmed_oldest_first_to_under_half(redis_server: RedisServer):
    exact, before, left = asyncio.run(fill_and_cap(redis_server, 48, 1 << 20))
    assert exact > STREAM_MAX_BYTES and before == 48 + SMALL_EVENTS
    # Under half the cap is left (an entry takes more memory than its fields: a few more go than half), not nothing.
    assert left.count("small") == SMALL_EVENTS and 1 <= left.count("large") <= 16, left.count("large")
