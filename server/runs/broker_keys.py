"""What the replicas of one broker share in Redis: the key names, the client's connection and retry policy,
what a failure of Redis means, and what they may tell each other of a worker. The parts of the broker
(server/runs/broker_redis.py, the origin; server/runs/broker_executor.py, the executor;
server/runs/broker_jobs.py and server/runs/broker_events.py, the hand-off and the event streams) use these.

Keys (all under ``jaxplay:``; each one expires, or is deleted, when nothing needs it)::

    queue:<backend>           list    jobs waiting for a slot (RPUSH by origins, BLMOVE by executors);
                                      expires QUEUE_TTL_S after the last push
    taken:<replica>:<backend> list    jobs <replica> took and has not finished (its processing list); moved
                                      back to the queue if <replica> is judged gone; expires TAKEN_TTL_S
                                      after <replica> stops renewing it
    claim:<run key>           string  the replica that runs it (SET NX): a run id runs at most once; expires
                                      once no copy of its job can still be taken
    events:<replica>          stream  events of the runs <replica> submitted (XADD by executors), trimmed as
                                      <replica> reads them; expires STREAM_TTL_S after its replica and
                                      executors stop renewing it
    replica:<id>              string  a replica's heartbeat, expiring after HEARTBEAT_TTL_S
    gone:<id>                 string  set by a replica that judged <id> gone; <id>, if only paused, reads it
                                      and deletes it (server/runs/broker_heartbeat.py); expires GONE_MARK_TTL_S
    probe:<id>                string  /readyz's write, expiring at once
    replicas                  set     the ids of replicas that wrote a heartbeat
    epoch                     string  set once per Redis data lifetime: a new value means the data was lost
    session:<id>              hash    a browser session's runs in flight, for a replica it reconnects to
    cancels                   pub/sub run keys to cancel wherever they execute
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from typing import Any

import redis.asyncio as aioredis
from redis.asyncio.retry import Retry
from redis.backoff import ExponentialBackoff
from redis.exceptions import AuthenticationError, NoPermissionError, OutOfMemoryError, RedisError
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import TimeoutError as RedisTimeoutError

from jaxplay import worker_protocol as wp

log = logging.getLogger("jaxplay.broker")

PREFIX = "jaxplay:"
EPOCH_KEY = PREFIX + "epoch"
CANCELS = PREFIX + "cancels"
REPLICAS = PREFIX + "replicas"
# A replica's event stream outlives it by this much: each heartbeat and each XADD renews it. The same for
# a replica's processing lists.
STREAM_TTL_S = 600
TAKEN_TTL_S = STREAM_TTL_S
# A queue nobody pushed to for this long holds only jobs past their deadline.
QUEUE_TTL_S = 3600
# A replica judged gone reads that it was within this long, if it was only paused: longer, its runs' deadlines
# have all passed.
GONE_MARK_TTL_S = QUEUE_TTL_S
# A connection Redis dropped (a restart) is retried this often, ~0.5 s in all, before an operation fails.
CONNECTION_RETRIES = 3
# A command Redis does not answer within this long fails (and is retried as above): a stalled Redis.
SOCKET_TIMEOUT_S = 5.0
# How long a task waits before trying Redis again after a failure.
RETRY_S = 0.5
# /readyz and /metrics wait this long for Redis.
PROBE_S = 1.5

# What a failure of Redis means, as /readyz, the logs and the runs it ends tell it.
OUT_OF_MEMORY = "out of memory"
CREDENTIALS_REFUSED = "credentials refused"
NOT_PERMITTED = "command not permitted"
UNREACHABLE = "unreachable"


def queue_key(backend: str) -> str:
    """The Redis list where ``backend``'s runs wait: what KEDA's Redis-list scaler reads (deploy/kubernetes)."""
    return f"{PREFIX}queue:{backend}"


def taken_key(replica: str, backend: str) -> str:
    return f"{PREFIX}taken:{replica}:{backend}"


def claim_key(run_key: str) -> str:
    return f"{PREFIX}claim:{run_key}"


def gone_key(replica: str) -> str:
    return f"{PREFIX}gone:{replica}"


def events_key(replica: str) -> str:
    return f"{PREFIX}events:{replica}"


def connect(url: str) -> aioredis.Redis:
    """A client that retries a dropped connection (Redis restarted) before failing, and checks idle ones.
    ``url`` may carry a user and password (``redis://user:password@host:port/db``) and be TLS
    (``rediss://``, with ``?ssl_ca_certs=/path/ca.crt`` for a private CA)."""
    return aioredis.from_url(url, decode_responses=True, socket_connect_timeout=2, health_check_interval=5,
                             socket_timeout=SOCKET_TIMEOUT_S,
                             retry=Retry(ExponentialBackoff(cap=0.25, base=0.05), CONNECTION_RETRIES),
                             retry_on_error=[RedisConnectionError, RedisTimeoutError])


def failure_kind(exc: BaseException) -> str:
    """Why Redis did not take a command: one of OUT_OF_MEMORY, CREDENTIALS_REFUSED, NOT_PERMITTED, UNREACHABLE."""
    if isinstance(exc, OutOfMemoryError):
        return OUT_OF_MEMORY
    if isinstance(exc, AuthenticationError):  # a ConnectionError too: tested first
        return CREDENTIALS_REFUSED
    if isinstance(exc, NoPermissionError):
        return NOT_PERMITTED
    return UNREACHABLE


def describe_failure(exc: BaseException) -> str:
    """A failure as /readyz and the logs say it, e.g. 'out of memory: command not allowed when used memory >
    'maxmemory'.'. Never the password (Redis's replies do not carry it, and the URL is not named), nor the
    command a pipeline failed on, which redis-py adds to the error: it may hold a run's code or output."""
    text = str(exc) or type(exc).__name__
    command, found, reply = text.partition(" of pipeline caused error: ")
    if found and command.startswith("Command # "):
        text = reply.strip("(),'\"")
    return f"{failure_kind(exc)}: {text}"


# What a run's browser is told when Redis failed it.
BROKER_UNREACHABLE = ("The playground's run queue (Redis) cannot be reached right now, so this run was not queued; "
                      "run it again in a moment.")
BROKER_FULL = ("The playground's run queue (Redis) is out of memory, so this run was not queued; run it again in a "
               "moment.")
BROKER_LOST = ("The server lost its connection to the run queue (Redis) while this run was in flight, and its result "
               "never came back; run it again.")
BROKER_FULL_LOST = ("The playground's run queue (Redis) ran out of memory while this run was in flight, and its result "
                    "never came back; run it again.")
OUTPUT_LOST = ("Part of this run's output was lost in the playground's run queue (Redis), so its result is "
               "incomplete; run it again.")

HINTS = {OUT_OF_MEMORY: "Redis reached its maxmemory and refuses writes: raise maxmemory or free memory "
                        "(runs are refused meanwhile)",
         CREDENTIALS_REFUSED: "check the user and password in --broker (JAXPLAY_BROKER) against Redis's ACL",
         NOT_PERMITTED: "the Redis user's ACL lacks a command the broker needs: see docs/operations.md",
         UNREACHABLE: "check --broker (JAXPLAY_BROKER) and that Redis is running"}


class OutageLog:
    """Logs a task's first failure of an outage as a warning, its repeats at debug, and the recovery once:
    a task that retries twice a second must not fill the log while Redis is away."""

    def __init__(self, what: str) -> None:
        self.what = what
        self.failing = False

    def failed(self, exc: BaseException) -> None:
        level = logging.DEBUG if self.failing else logging.WARNING
        log.log(level, "broker: %s failed (%s); retrying", self.what, describe_failure(exc))
        self.failing = True

    def worked(self) -> None:
        if self.failing:
            log.info("broker: %s works again", self.what)
            self.failing = False


def public_hello(hello: wp.WorkerHello) -> dict[str, Any]:
    """A worker's hello without its token: what other replicas may know of it."""
    return {k: v for k, v in wp.to_wire(hello).items() if k not in ("token", "type")}


def hello_of(public: dict[str, Any]) -> wp.WorkerHello:
    """A hello another replica shared (``public_hello``), checked as one from a worker is; ValueError if not."""
    hello = wp.from_wire(wp.WorkerHello, {**public, "token": ""}, "a replica's worker hello")
    wp.check_limits(hello)
    return hello


async def listen_forever(redis: aioredis.Redis, channel: str, received: Callable[[str], None], what: str) -> None:
    """Hand every message of a pub/sub ``channel`` to ``received``; subscribe again whenever Redis drops us
    (messages published meanwhile are lost: pub/sub carries only what a later message or a deadline mends)."""
    outage = OutageLog(what)
    while True:
        try:
            async with redis.pubsub() as pubsub:
                await pubsub.subscribe(channel)
                outage.worked()
                async for message in pubsub.listen():
                    if message.get("type") == "message":
                        received(message["data"])
        except (RedisError, OSError) as exc:
            outage.failed(exc)
            await asyncio.sleep(RETRY_S)
