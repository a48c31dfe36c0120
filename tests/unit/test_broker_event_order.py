"""The broker's pure parts: putting a run's events back in order (server/runs/broker_events.py), what a job
carries (server/runs/broker_jobs.py), and how a Redis failure is told (broker_keys.py)."""

from __future__ import annotations

import json
import time

import pytest
from redis.exceptions import AuthenticationError, NoPermissionError, OutOfMemoryError
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import TimeoutError as RedisTimeoutError

from jaxplay import worker_protocol as wp
from jaxplay.server.runs import broker_jobs
from jaxplay.server.runs.broker_events import Event, InOrder, following
from jaxplay.server.runs.broker_keys import describe_failure, failure_kind
from jaxplay.server.runs.scheduler import Run


def delivered(order: InOrder[str], arrivals: list[int], now: float = 0.0) -> list[str]:
    out: list[str] = []
    for seq in arrivals:
        out += order.accept(seq, f"e{seq}", now)
    return out


def test_events_in_order_pass_straight_through():
    assert delivered(InOrder(), [0, 1, 2, 3]) == ["e0", "e1", "e2", "e3"]


def test_a_batch_stored_twice_is_delivered_once():
    # A MULTI that Redis carried out after the client timed out, then again when the client sent it again.
    assert delivered(InOrder(), [0, 1, 2, 0, 1, 2, 3, 2, 3]) == ["e0", "e1", "e2", "e3"]


def test_an_event_after_a_gap_waits_for_the_missing_ones():
    order: InOrder[str] = InOrder()
    assert order.accept(0, "e0", 0.0) == ["e0"]
    assert order.accept(2, "e2", 1.0) == []  # e1 is missing: e2 (a done, say) must not overtake it
    assert order.accept(3, "e3", 1.5) == []
    assert order.gap_since == 1.0 and not order.gap_older_than(5.0, 5.9) and order.gap_older_than(5.0, 6.1)
    assert order.accept(1, "e1", 2.0) == ["e1", "e2", "e3"]
    assert order.gap_since is None and not order.gap_older_than(5.0, 100.0)


def test_a_repeat_of_an_event_held_after_a_gap_is_dropped():
    order: InOrder[str] = InOrder()
    assert delivered(order, [2, 2, 1, 1]) == []
    assert order.accept(0, "e0", 0.0) == ["e0", "e1", "e2"]


def test_a_second_gap_restarts_the_clock():
    order: InOrder[str] = InOrder()
    order.accept(1, "e1", 1.0)
    order.accept(3, "e3", 2.0)
    assert order.accept(0, "e0", 4.0) == ["e0", "e1"]  # the first gap filled, the one before e3 remains
    assert order.gap_since == 4.0


def test_an_event_entry_carries_its_run_sequence_and_worker_hello():
    fields = Event("originA", "k1", 7, {"type": "stdout", "text": "hi"}, {"name": "w"}).fields("execB")
    assert fields["seq"] == "7" and fields["executor"] == "execB" and fields["key"] == "k1"
    assert json.loads(fields["event"]) == {"type": "stdout", "text": "hi"} and json.loads(fields["hello"]) == {"name": "w"}
    assert "hello" not in Event("o", "k", 0, {"type": "done"}).fields("e")


def test_the_trim_point_is_just_after_the_last_entry_read():
    assert following("1700000000000-0") == "1700000000000-1"
    assert following("1700000000000-41") == "1700000000000-42"


def test_a_job_round_trips_and_carries_its_origins_deadline():
    request = wp.RunRequest(code="print(1)", backend="cpu", timeout_s=5.0, runtime="0.6.2")
    run = Run(client_id="c1", request=request, emit=lambda e: None, session_id="s", network="n")
    deadline = time.time() + 40
    job = broker_jobs.read_job(broker_jobs.job_payload(run, "originA", deadline))
    assert (job.key, job.origin, job.backend) == (run.key, "originA", "cpu")
    assert job.expires_at == pytest.approx(deadline + broker_jobs.CLOCK_SKEW_S) and not job.expired()
    again = broker_jobs.job_run(job, lambda e: None)
    assert (again.key, again.request, again.session_id, again.network) == (run.key, request, "s", "n")


def test_a_job_past_its_deadline_is_expired_and_one_from_an_older_replica_gets_one():
    stale = broker_jobs.read_job(json.dumps({"key": "k", "origin": "o", "backend": "cpu", "timeout_s": 5,
                                             "deadline": time.time() - broker_jobs.CLOCK_SKEW_S - 1}))
    assert stale.expired()
    old = broker_jobs.read_job(json.dumps({"key": "k", "origin": "o", "backend": "cpu", "timeout_s": 5}))
    assert not old.expired() and old.expires_at > time.time() + 5


def test_a_redis_failure_is_told_by_its_cause():
    assert failure_kind(OutOfMemoryError("command not allowed when used memory > 'maxmemory'.")) == "out of memory"
    assert failure_kind(AuthenticationError("invalid username-password pair")) == "credentials refused"
    assert failure_kind(NoPermissionError("this user has no permissions")) == "command not permitted"
    for exc in (RedisConnectionError("refused"), RedisTimeoutError("Timeout reading"), OSError("reset")):
        assert failure_kind(exc) == "unreachable"


def test_a_failed_pipeline_is_told_without_the_command_it_carried():
    failure = OutOfMemoryError("command not allowed when used memory > 'maxmemory'.")
    failure.args = ("Command # 2 (XADD jaxplay:events:a * key k event {\"text\": \"the user's output\"}) of pipeline "
                    "caused error: (\"command not allowed when used memory > 'maxmemory'.\",)",)
    assert describe_failure(failure) == "out of memory: command not allowed when used memory > 'maxmemory'."
