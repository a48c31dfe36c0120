"""Judging replicas alive or gone from their heartbeats, with a clock the test moves (server/runs/broker_liveness.py)."""

from __future__ import annotations

from jaxplay.server.runs.broker_liveness import GONE_AFTER_S, HEARTBEAT_S, ReplicaLiveness

BEAT = {"backends": {}}


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def beating(*replicas: str) -> dict[str, dict]:
    return {replica: BEAT for replica in replicas}


def test_a_replica_whose_heartbeat_stops_is_gone_only_after_the_grace():
    clock = Clock()
    liveness = ReplicaLiveness("me", clock)
    assert liveness.observed(beating("me", "other")) == []
    clock.now += GONE_AFTER_S - HEARTBEAT_S
    assert liveness.observed(beating("me")) == [] and "other" in liveness.live
    clock.now += 2 * HEARTBEAT_S
    assert liveness.observed(beating("me")) == ["other"]
    assert liveness.is_gone("other") and "other" not in liveness.live

def test_a_replica_judged_gone_whose_heartbeat_is_read_again_is_live_again():
    # Its id is never a restarted process's (that takes a new one): it was paused (SIGSTOP) or cut off, and
    # judged on every job and run it touches from its next beat on as any live replica.
    clock = Clock()
    liveness = ReplicaLiveness("me", clock)
    liveness.observed(beating("me", "other"))
    clock.now += GONE_AFTER_S + HEARTBEAT_S
    assert liveness.observed(beating("me")) == ["other"] and liveness.is_gone("other")
    clock.now += 3 * HEARTBEAT_S
    assert liveness.observed(beating("me", "other")) == []
    assert not liveness.is_gone("other") and "other" in liveness.live
    clock.now += GONE_AFTER_S + HEARTBEAT_S  # and stopping again is judged again
    assert liveness.observed(beating("me")) == ["other"]


def test_a_read_held_up_by_a_stalled_redis_judges_nobody():
    # Redis stopped 8 s: this replica's read was carried out late (the client retried it), just before the other
    # replica's beat, held up by the same stall, landed. Its last beat read was 9 s ago; it is not gone.
    clock = Clock()
    liveness = ReplicaLiveness("me", clock)
    liveness.observed(beating("me", "other"))
    clock.now += 9.0
    assert liveness.observed(beating("me"), took_s=8.0) == []
    clock.now += HEARTBEAT_S
    assert liveness.observed(beating("me", "other"), took_s=0.01) == [] and not liveness.is_gone("other")
    # A prompt read is believed: missing for the grace after the slow one, it is gone.
    clock.now += GONE_AFTER_S + HEARTBEAT_S
    assert liveness.observed(beating("me"), took_s=0.01) == ["other"]


def test_redis_restarting_empty_judges_nobody_while_replicas_write_their_heartbeats_again():
    clock = Clock()
    liveness = ReplicaLiveness("me", clock)
    liveness.observed(beating("me", "other"))
    clock.now += 1
    liveness.failed()  # Redis is down: nobody can be judged
    assert not liveness.reachable
    clock.now += 3 * GONE_AFTER_S  # a long outage
    liveness.failed()
    clock.now += HEARTBEAT_S
    # Back, empty: only this replica has rewritten its heartbeat yet. The other keeps its grace from now.
    assert liveness.observed(beating("me")) == [] and liveness.reachable
    clock.now += GONE_AFTER_S - HEARTBEAT_S
    assert liveness.observed(beating("me", "other")) == []
    assert not liveness.is_gone("other") and "other" in liveness.live
    assert liveness.unreachable_since(1000.0) and not liveness.unreachable_since(clock.now)


def test_a_replica_first_heard_of_through_a_job_gets_the_grace():
    clock = Clock()
    liveness = ReplicaLiveness("me", clock)
    liveness.observed(beating("me"))
    liveness.heard_of("new")  # its job arrived before its first heartbeat was read here
    clock.now += GONE_AFTER_S / 2
    assert liveness.observed(beating("me")) == [] and not liveness.is_gone("new")
    clock.now += GONE_AFTER_S
    assert liveness.observed(beating("me")) == ["new"]


def test_this_replica_is_never_judged_gone_by_itself():
    clock = Clock()
    liveness = ReplicaLiveness("me", clock)
    liveness.observed(beating("me"))
    clock.now += 10 * GONE_AFTER_S
    assert liveness.observed({}) == [] and not liveness.is_gone("me")
