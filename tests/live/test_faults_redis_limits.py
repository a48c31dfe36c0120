"""The fault suite, Redis at its limits: full (``maxmemory``, ``noeviction``) and stalled (SIGSTOP) under load.

Real replicas on a real Redis: A has no worker, so each of its browsers' runs
crosses Redis to B's two slots and back. Each case asserts what the operator's
worst day must still give:

- every run ends with exactly one ``done`` (after ``queued``), and no job is
  lost: each ends ``ok``, or ``rejected`` at submission saying why;
- no ``ok`` run's output differs from the same program's output on an idle
  server (nothing repeated, reordered or dropped);
- readiness matches whether a run can be served: 503 while Redis cannot take
  a run, 200 once it can, and a run sent then works;
- the rejections each replica's ``/metrics`` counts are those its browsers were told.
"""

from __future__ import annotations

import asyncio
import json
import time
from typing import Any

import pytest
import redis

from tests.live.faults import (
    Client,
    check_run_contract,
    idle_outputs,
    output_of,
    printer,
    readiness,
    rejected_counted,
    rejected_told,
    replica,
    wait_until,
)
from tests.live_server import LiveServer
from tests.redis_server import RedisServer

pytestmark = pytest.mark.live

NO_WORKER = ("--no-local-worker", "--expected-backends", "cpu")
# Longer than the Redis client's read timeout (5 s) and its retries (3 more): commands in flight fail, and Redis
# carries them out when it resumes, after the client gave up on them.
STALL_S = 25.0
RUN_TIMEOUT_S = 20  # a run lost in Redis ends at its deadline (this + 35 s), inside the test's wait


def ready_pair(redis_url: str, tmp_path) -> tuple[LiveServer, LiveServer]:
    a = replica(tmp_path, "a", redis_url, *NO_WORKER)
    a.wait_ready(workers=0)
    b = replica(tmp_path, "b", redis_url, key_from=tmp_path / "a")
    b.wait_ready()
    for server in (a, b):
        wait_until(lambda s=server: readiness(s)[0] == 200, 30, f"{server.http_url} ready")
    return a, b


def test_redis_at_maxmemory_under_load(own_redis: RedisServer, tmp_path):
    a, b = ready_pair(own_redis.url, tmp_path)
    admin = redis.Redis.from_url(own_redis.admin_url, decode_responses=True)
    try:
        asyncio.run(redis_full(admin, a, b))
    finally:
        admin.config_set("maxmemory", 0)
        a.stop()
        b.stop()


async def redis_full(admin: redis.Redis, a: LiveServer, b: LiveServer) -> None:
    programs = [printer(f"full-{n}", 300) for n in range(4)]
    idle = await idle_outputs(a, programs)
    async with Client(a) as on_a, Client(a) as on_a2, Client(b) as on_b, Client(a) as canaries:
        load = [(client, await client.run(code, timeout_s=RUN_TIMEOUT_S)) for client in (on_a, on_a2, on_b)
                for code in programs[:3]]
        await on_a.started(load[0][1])
        # Tight: a little room left, which the runs' output fills while it is being sent.
        used = int(admin.info("memory")["used_memory"])
        admin.config_set("maxmemory", used + 128 * 1024)
        await asyncio.sleep(3)
        # Full: every write is refused with an OOM error, reads still work.
        admin.config_set("maxmemory", 1)
        full_readiness = await asyncio.to_thread(readiness_while, [a, b], 6.0)
        refused = [await canaries.run("print('while Redis is full')") for _ in range(2)]
        refused_done = await canaries.all_done(refused, 30)
        admin.config_set("maxmemory", 0)
        after = await asyncio.to_thread(readiness_while, [a, b], 20.0, until=200)
        fresh = [(on_a, await on_a.run("print('after')")) for _ in range(1)]
        outcomes = await outcomes_of(load + [(canaries, r) for r in refused] + fresh, 90)

    check_outcomes(outcomes, idle | {"print('after')": "after\n"})
    for done in refused_done.values():  # the browser is told the real reason
        assert done["status"] == "rejected" and "out of memory" in done["message"], done
    assert all(status == 503 and "out of memory" in broker for status, broker in full_readiness), full_readiness
    assert after[-1][0] == 200, after
    assert [done["status"] for _, _, done in outcomes[-1:]] == ["ok"]
    check_rejections([(a, [on_a, on_a2, canaries]), (b, [on_b])])


def test_redis_stalled_longer_than_the_client_timeout(own_redis: RedisServer, tmp_path):
    a, b = ready_pair(own_redis.url, tmp_path)
    try:
        asyncio.run(redis_stalled(own_redis, a, b))
    finally:
        own_redis.resume()
        a.stop()
        b.stop()


async def redis_stalled(own_redis: RedisServer, a: LiveServer, b: LiveServer) -> None:
    programs = [printer(f"stall-{n}", 12, pause_s=0.25) for n in range(3)]  # about 3 s each
    idle = await idle_outputs(a, programs)
    async with Client(a) as on_a, Client(a) as on_a2, Client(b) as on_b, Client(a) as canaries:
        # Two run on B's two slots when Redis stops; the others wait in Redis, and B takes the next ones while
        # Redis is stopped: those takes time out in the client, and Redis carries them out when it resumes.
        load = [(client, await client.run(code, timeout_s=RUN_TIMEOUT_S)) for client in (on_a, on_b)
                for code in programs]
        await on_a.started(load[0][1])
        await asyncio.sleep(0.5)
        stopped_at = time.monotonic()
        own_redis.pause()
        stalled = await asyncio.to_thread(readiness_while, [a, b], 6.0)
        during = await canaries.run("print('during the stall')")
        await asyncio.sleep(STALL_S - (time.monotonic() - stopped_at))
        own_redis.resume()
        after = await asyncio.to_thread(readiness_while, [a, b], 20.0, until=200)
        fresh = [(on_a2, await on_a2.run("print('after')"))]
        outcomes = await outcomes_of(load + [(canaries, during)] + fresh, 90)

    check_outcomes(outcomes, idle | {"print('during the stall')": "during the stall\n", "print('after')": "after\n"})
    assert all(status == 503 for status, _ in stalled), stalled  # it cannot take a run while Redis is stopped
    assert after[-1][0] == 200, after
    assert outcomes[-1][2]["status"] == "ok"  # and can once it answers again
    check_rejections([(a, [on_a, on_a2, canaries]), (b, [on_b])])


def readiness_while(servers: list[LiveServer], seconds: float, until: int | None = None) -> list[tuple[int, str]]:
    """(status, broker check) of each replica's /readyz, read every half second for ``seconds``, from the
    first 503 on (or until every replica answers ``until``)."""
    readings: list[tuple[int, str]] = []
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        now = [readiness(server) for server in servers]
        now_read = [(status, str(body.get("checks", {}).get("broker"))) for status, body in now]
        if until is not None and all(status == until for status, _ in now_read):
            return readings + now_read
        if readings or any(status == 503 for status, _ in now_read) or until is not None:
            readings.extend(now_read)
        time.sleep(0.5)
    return readings or [(0, "never 503 in the time allowed")]


async def outcomes_of(runs: list[tuple[Client, str]], timeout_s: float) -> list[tuple[Client, str, dict[str, Any]]]:
    """Every run's ``done``, waiting up to ``timeout_s`` in all; a run without one is a lost job."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline and not all(client.done(run_id) for client, run_id in runs):
        await asyncio.sleep(0.1)
    lost = [run_id for client, run_id in runs if not client.done(run_id)]
    assert not lost, f"runs without a done after {timeout_s} s (lost jobs): {lost}"
    return [(client, run_id, client.done(run_id)) for client, run_id in runs]


def check_outcomes(outcomes: list[tuple[Client, str, dict[str, Any]]], idle: dict[str, str]) -> None:
    """Exactly one done each; ok with the idle output, or rejected at submission saying why; nothing else."""
    for client, run_id, _ in outcomes:
        check_run_contract(client.events[run_id])
    codes = {run_id: code for client, run_id, _ in outcomes for code in [client.code_of[run_id]]}
    wrong = {run_id: (done["status"], done.get("message")) for _, run_id, done in outcomes
             if done["status"] not in ("ok", "rejected")}
    assert not wrong, f"runs that ended neither ok nor rejected: {wrong}"
    differs = {run_id: output_of(client.events[run_id]) for client, run_id, done in outcomes
               if done["status"] == "ok" and output_of(client.events[run_id]) != idle[codes[run_id]]}
    assert not differs, "ok runs whose output differs from an idle server's:\n" + "\n---\n".join(
        f"{run_id}: {text[:300]!r}... ({len(text.splitlines())} lines, idle: "
        f"{len(idle[codes[run_id]].splitlines())})" for run_id, text in differs.items())
    for _, _, done in outcomes:
        if done["status"] == "rejected":
            assert "Redis" in done["message"], done


def check_rejections(replicas: list[tuple[LiveServer, list[Client]]]) -> None:
    for server, clients in replicas:
        assert rejected_counted(server) == rejected_told(clients), (server.http_url, rejected_told(clients))


@pytest.mark.parametrize("stall_s", [10.0, 25.0])
def test_a_cancel_sent_while_redis_stalls_ends_the_queued_run_once_redis_answers(own_redis: RedisServer, tmp_path,
                                                                                 stall_s: float):
    """A run waiting in Redis (its backend's workers are all busy or gone), cancelled while Redis is stopped: the
    cancel is carried out when Redis resumes, not at the run's deadline. At 10 s the client's retry of the
    withdrawal finds the job already gone (Redis carried out the first try late); at 25 s every try fails."""
    server = replica(tmp_path, "a", own_redis.url, "--no-local-worker", "--expected-backends", "cpu")
    server.wait_ready(workers=0)  # no worker: its runs wait in Redis for one
    try:
        asyncio.run(cancel_in_a_stall(own_redis, server, stall_s))
    finally:
        own_redis.resume()
        server.stop()


async def cancel_in_a_stall(own_redis: RedisServer, server: LiveServer, stall_s: float) -> None:
    async with Client(server) as tab:
        run_id = await tab.run("print('never runs')", timeout_s=30)  # its deadline is 30 + 35 s away
        await wait_for_event(tab, run_id, "queued")
        await asyncio.sleep(0.5)  # in Redis by now
        own_redis.pause()
        await tab.ws.send(json.dumps({"type": "cancel", "id": run_id}))
        await asyncio.sleep(stall_s)
        own_redis.resume()
        resumed_at = time.monotonic()
        done = (await tab.all_done([run_id], 20))[run_id]
        check_run_contract(tab.events[run_id])
        assert (done["status"], done.get("message")) == ("cancelled", "Cancelled before it started."), done
        assert time.monotonic() - resumed_at < 15
    left = redis.Redis.from_url(own_redis.url, decode_responses=True).llen("jaxplay:queue:cpu")
    assert left == 0, "the cancelled job is still queued"


async def wait_for_event(client: Client, run_id: str, kind: str, timeout_s: float = 30) -> None:
    async with asyncio.timeout(timeout_s):
        while not any(e["type"] == kind for e in client.events[run_id]):
            await asyncio.sleep(0.05)
