"""What the replicas of one broker share in Redis: the key names, the client's retry policy, and what they
may tell each other of a worker. The two sides of the broker (server/runs/broker_redis.py, the origin;
server/runs/broker_executor.py, the executor) both use these.

Keys (all under ``jaxplay:``)::

    queue:<backend>     list    jobs waiting for a slot (RPUSH by origins, BLPOP by executors)
    events:<replica>    stream  events of the runs <replica> submitted (XADD by executors); expires
                                STREAM_TTL_S after its replica and executors stop renewing it
    replica:<id>        string  a replica's heartbeat, expiring after HEARTBEAT_TTL_S
    replicas            set     the ids of replicas that wrote a heartbeat
    epoch               string  set once per Redis data lifetime: a new value means the data was lost
    session:<id>        hash    a browser session's runs in flight, for a replica it reconnects to
    cancels             pub/sub run keys to cancel wherever they execute
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from dataclasses import asdict
from typing import Any

import redis.asyncio as aioredis
from redis.asyncio.retry import Retry
from redis.backoff import ExponentialBackoff
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import RedisError
from redis.exceptions import TimeoutError as RedisTimeoutError

from jaxplay import worker_protocol as wp

log = logging.getLogger("jaxplay.broker")

PREFIX = "jaxplay:"
EPOCH_KEY = PREFIX + "epoch"
CANCELS = PREFIX + "cancels"
REPLICAS = PREFIX + "replicas"
STREAM_MAXLEN = 100_000
# A replica's event stream outlives it by this much: each heartbeat and each XADD renews it.
STREAM_TTL_S = 600
# A connection Redis dropped (a restart) is retried this often, ~0.5 s in all, before an operation fails.
CONNECTION_RETRIES = 3
# How long a task waits before trying Redis again after a failure.
RETRY_S = 0.5


def queue_key(backend: str) -> str:
    """The Redis list where ``backend``'s runs wait: what KEDA's Redis-list scaler reads (deploy/kubernetes)."""
    return f"{PREFIX}queue:{backend}"


def events_key(replica: str) -> str:
    return f"{PREFIX}events:{replica}"


def connect(url: str) -> aioredis.Redis:
    """A client that retries a dropped connection (Redis restarted) before failing, and checks idle ones."""
    return aioredis.from_url(url, decode_responses=True, socket_connect_timeout=2, health_check_interval=5,
                             retry=Retry(ExponentialBackoff(cap=0.25, base=0.05), CONNECTION_RETRIES),
                             retry_on_error=[RedisConnectionError, RedisTimeoutError])


def public_hello(hello: wp.WorkerHello) -> dict[str, Any]:
    """A worker's hello without its token: what other replicas may know of it."""
    return {k: v for k, v in asdict(hello).items() if k not in ("token", "type")}


async def listen_forever(redis: aioredis.Redis, channel: str, received: Callable[[str], None], what: str) -> None:
    """Hand every message of a pub/sub ``channel`` to ``received``; subscribe again whenever Redis drops us
    (messages published meanwhile are lost: pub/sub carries only what a later message or a deadline mends)."""
    while True:
        try:
            async with redis.pubsub() as pubsub:
                await pubsub.subscribe(channel)
                async for message in pubsub.listen():
                    if message.get("type") == "message":
                        received(message["data"])
        except (RedisError, OSError) as exc:
            log.warning("%s interrupted (%s); subscribing again", what, exc)
            await asyncio.sleep(RETRY_S)
