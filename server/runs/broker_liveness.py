"""Which server replicas are alive, as one replica judges from the heartbeats it reads in Redis.

A replica is judged gone only when its heartbeat has been missing for
``GONE_AFTER_S`` while this replica itself could read Redis the whole time.
Missing for a moment is not enough, because Redis may have just restarted
empty: every replica rewrites its heartbeat within ``HEARTBEAT_S``, and until
it has, its runs and jobs must not be dropped or ended. So:

- every successful read of the heartbeats (``observed``) refreshes when each
  replica was last seen;
- a failed read (``failed``) means this replica cannot tell: nobody is judged,
  and when reads work again every replica gets ``GONE_AFTER_S`` afresh;
- a replica first heard of through a job (``heard_of``), before its first
  heartbeat was read here, gets the same grace;
- a read that took longer than ``SLOW_READ_S`` tells nothing either (Redis
  stalled, and the client's retries carried the read out late: the others'
  beats, held up by the same stall, may not have landed yet): every replica
  gets ``GONE_AFTER_S`` afresh.

A replica judged gone is taken for dead: its leftover jobs are dropped at once
and its streams deleted (a restarted process takes a new id). One whose
heartbeat is read again was only paused or cut off (SIGSTOP, a long stall of
its own): it is live again from that beat, and it learns that it was judged
gone (server/runs/broker_heartbeat.py), so it queues its dropped jobs again.

Pure bookkeeping, no I/O: server/runs/broker_redis.py reads Redis and feeds
it; tests drive it with their own clock.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

HEARTBEAT_S = 1.0
HEARTBEAT_TTL_S = 3
# Missing this long (while Redis answered us) makes a replica gone: its heartbeat's expiry, two more beats.
GONE_AFTER_S = HEARTBEAT_TTL_S + 2 * HEARTBEAT_S
# A heartbeat read slower than this was held up (a stalled Redis): it judges nobody.
SLOW_READ_S = 2.0
# How long the ids of gone replicas are remembered (their jobs may linger in a queue this long).
FORGET_GONE_S = 24 * 3600.0


class ReplicaLiveness:
    def __init__(self, own_id: str, clock: Callable[[], float] = time.monotonic) -> None:
        self.own_id = own_id
        self.clock = clock
        self.beats: dict[str, dict[str, Any]] = {}  # replica id -> its last heartbeat read, while not gone
        self.seen_at: dict[str, float] = {}  # replica id -> when its heartbeat was last read (or first heard of)
        self.gone: dict[str, float] = {}  # replica id -> when it was judged gone
        self.reading_since: float | None = None  # since when heartbeat reads have worked without a failure
        self.last_failure: float | None = None
        self.failure = ""  # why the last failure happened ('out of memory', 'unreachable', ...)

    @property
    def live(self) -> dict[str, dict[str, Any]]:
        """Every replica not judged gone whose heartbeat was read at least once, this one included."""
        return self.beats

    @property
    def reachable(self) -> bool:
        """Whether this replica's last attempt to reach Redis worked."""
        return self.reading_since is not None

    def failed(self, kind: str = "unreachable") -> None:
        """Redis could not be read or written (``kind``: why, as server/runs/broker_keys.py names it): judge
        nobody until it can be again."""
        now = self.clock()
        self.reading_since = None
        self.last_failure = now
        self.failure = kind

    def observed(self, beats: dict[str, dict[str, Any]], took_s: float = 0.0) -> list[str]:
        """Heartbeats read just now (every replica whose key exists), in a read that took ``took_s``; returns
        the replicas judged gone now."""
        now = self.clock()
        if self.reading_since is None or took_s > SLOW_READ_S:
            self.reading_since = now
        for replica, beat in beats.items():
            self.gone.pop(replica, None)  # beating again: it was paused, not dead
            self.beats[replica] = beat
            self.seen_at[replica] = now
        newly_gone = []
        for replica, seen in list(self.seen_at.items()):
            if replica in beats or replica == self.own_id:
                continue
            if now - max(seen, self.reading_since) > GONE_AFTER_S:
                newly_gone.append(replica)
                self.gone[replica] = now
                self.seen_at.pop(replica)
                self.beats.pop(replica, None)
        for replica, when in list(self.gone.items()):
            if now - when > FORGET_GONE_S:
                del self.gone[replica]
        return newly_gone

    def back(self, replica: str) -> None:
        """``replica``, judged gone, has a heartbeat again (read outside ``observed``): live from now."""
        self.gone.pop(replica, None)
        self.seen_at[replica] = self.clock()

    def heard_of(self, replica: str) -> None:
        """A job or event names ``replica``: unless already judged, it gets the grace from now."""
        if replica not in self.gone and replica not in self.seen_at:
            self.seen_at[replica] = self.clock()

    def is_gone(self, replica: str) -> bool:
        return replica in self.gone

    def unreachable_since(self, moment: float) -> bool:
        """Whether Redis failed to answer this replica at some time after ``moment`` (a monotonic time)."""
        return self.last_failure is not None and self.last_failure >= moment
