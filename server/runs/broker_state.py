"""What the broker's helpers (heartbeat, sessions) see of a replica's broker.

``broker_redis.RedisBroker`` owns this state; the heartbeat and the session
relay read and update it. They see it through ``BrokerState`` so that neither
imports the broker that imports them.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Protocol

import redis.asyncio as aioredis

from jaxplay import browser_protocol as bp
from jaxplay.server.runs.broker_events import InOrder
from jaxplay.server.runs.broker_executor import JobExecutor
from jaxplay.server.runs.broker_liveness import ReplicaLiveness
from jaxplay.server.runs.scheduler import Run, Scheduler


@dataclass(eq=False)
class Pending:
    """A run this replica's browser submitted, while it is in Redis or on another replica."""
    run: Run
    payload: str
    executor: str | None = None
    epoch: str | None = None  # the Redis data epoch its job was pushed in
    pushing: bool = False  # its RPUSH is on its way
    repeated: bool = False  # some of its events arrived twice (and were dropped)
    # Its executor's events, put back in order: (event, worker hello on 'started').
    order: InOrder[tuple[dict[str, Any], dict[str, Any] | None]] = field(default_factory=InOrder)


class BrokerState(Protocol):
    """A replica's broker as its heartbeat and session relay use it."""
    scheduler: Scheduler
    id: str
    redis: aioredis.Redis | None
    liveness: ReplicaLiveness
    epoch: str | None
    pending: dict[str, Pending]
    waiting: dict[str, int]  # backend -> length of its shared queue, as last read
    tasks: list[Any]
    executor: JobExecutor

    @property
    def live(self) -> dict[str, dict[str, Any]]: ...

    def check_runs(self) -> None: ...

    def give_up(self, run: Run, status: bp.RunStatus, message: str, **extra: Any) -> None: ...
