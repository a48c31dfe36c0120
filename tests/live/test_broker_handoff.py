"""The job hand-off between replicas (server/runs/broker_jobs.py), on a real Redis with real replicas: a job
is delivered at least once and its run id runs at most once, and what a run leaves in Redis is gone once
its browser has its done.

Replica A has no worker, B has one: every run of A's browser crosses Redis.
"""

from __future__ import annotations

import asyncio
import json
import time
import uuid

import pytest
import redis
import redis.asyncio as aioredis

from jaxplay.server.runs import broker_jobs
from jaxplay.server.runs.broker_keys import PREFIX, events_key, queue_key, taken_key
from tests.live.faults import Client, check_run_contract, output_of, readiness, sleeper, wait_until
from tests.live_server import LiveServer

pytestmark = pytest.mark.live


@pytest.fixture
def pair(replica_pair, own_redis):
    a, b = replica_pair
    return a, b, redis.Redis.from_url(own_redis.admin_url, decode_responses=True)


def replica_ids(client: redis.Redis) -> dict[str, str]:
    """Replica id -> the heartbeat it wrote, for each replica listed."""
    return {i: client.get(f"{PREFIX}replica:{i}") or "" for i in client.smembers(f"{PREFIX}replicas")}


def test_a_job_delivered_again_after_its_run_ended_is_not_run_again_and_leaves_nothing(pair):
    a, b, client = pair
    ids = wait_until(lambda: len(replica_ids(client)) == 2 and replica_ids(client), 10, "both heartbeats")
    [a_id] = [i for i, beat in ids.items() if f":{b.port}" not in beat]
    [b_id] = [i for i in ids if i != a_id]

    async def scenario() -> tuple[str, dict, list[dict]]:
        async with Client(a) as browser:
            run_id = await browser.run(sleeper(1.5))
            await browser.started(run_id)
            [job] = client.lrange(taken_key(b_id, "cpu"), 0, -1)  # B's processing list holds it while it runs
            [done] = (await browser.all_done([run_id], 60)).values()
            await asyncio.to_thread(wait_until, lambda: not client.exists(taken_key(b_id, "cpu")), 10, "settled")
            added = client.xinfo_stream(events_key(a_id))["entries-added"]
            # The same job again, as a push retried after a stall, or a processing list recovered, would bring it.
            client.rpush(queue_key("cpu"), job)
            await asyncio.to_thread(wait_until, lambda: not client.exists(queue_key("cpu"), taken_key(b_id, "cpu")),
                                    10, "the copy taken and dropped")
            await asyncio.sleep(1.5)
            assert client.xinfo_stream(events_key(a_id))["entries-added"] == added  # it sent no event: it never ran
            return job, done, browser.events[run_id]

    job, done, events = asyncio.run(scenario())
    assert done["status"] == "ok" and output_of(events) == "started\nfinished\n"  # its result stands
    check_run_contract(events)  # one done, no event after it
    key = job.split('"key":"', 1)[1].split('"', 1)[0]
    assert f"dropping a copy of run {key}, which replica {b_id} runs or ran" in b.log_path.read_text()
    # Nothing of the run is left but its claim, which expires once no copy of its job can still be taken.
    assert client.xlen(events_key(a_id)) == 0
    assert sorted(client.keys(f"{PREFIX}claim:*")) == [f"{PREFIX}claim:{key}"]
    assert 0 < client.pttl(f"{PREFIX}claim:{key}") <= (30 + 35 + 60) * 1000


def test_the_jobs_a_dead_replica_had_taken_go_back_to_the_queue_and_run(pair):
    a, b, client = pair

    async def scenario() -> dict:
        async with Client(a) as browser:
            hold = await browser.run(sleeper(60))  # B's one slot is busy
            await browser.started(hold)
            waiting = await browser.run("print('ran after all')")
            await asyncio.to_thread(wait_until, lambda: client.llen(queue_key("cpu")) == 1, 10, "the job queued")
            # A replica took it and died before claiming it: listed, no heartbeat, the job in its processing list.
            client.sadd(f"{PREFIX}replicas", "0dead0replica")
            assert client.lmove(queue_key("cpu"), taken_key("0dead0replica", "cpu"), "LEFT", "RIGHT")
            await browser.ws.send(json.dumps({"type": "cancel", "id": hold}))
            # Only the replicas' recovery can bring it back (the slot is free once its sandbox restarted).
            [done] = (await browser.all_done([waiting], 60)).values()
            check_run_contract(browser.events[waiting])
            assert output_of(browser.events[waiting]) == "ran after all\n"
            return done

    assert asyncio.run(scenario())["status"] == "ok"
    assert not client.exists(taken_key("0dead0replica", "cpu"))
    logs = a.log_path.read_text() + b.log_path.read_text()
    assert "job(s) that replica 0dead0replica had taken are queued again" in logs


def test_a_replica_that_cannot_reach_redis_at_start_comes_up_unready_and_recovers(own_redis, tmp_path):
    own_redis.kill()
    server = LiveServer(tmp_path / "a", ["--broker", own_redis.url])
    try:
        server.wait_ready()  # up, with its worker, although Redis is down: no crash loop
        status, body = readiness(server)
        assert status == 503 and body["checks"]["broker"].startswith("unreachable"), body
        own_redis.start()
        wait_until(lambda: readiness(server)[0] == 200, 20, "ready once Redis answers")
        events = server.run("print('queued through Redis')")
        assert events[-1]["status"] == "ok" and output_of(events) == "queued through Redis\n"
    finally:
        server.stop()


def test_an_origin_withdrawing_its_job_is_sure_it_never_runs_even_when_its_removal_answered_late(redis_server):
    """``broker_jobs.withdraw``, the cancel of a queued run: removed from its queue; or, when it is not there
    (the removal Redis carried out after the client gave up, whose retry then finds nothing), its run id is
    claimed so that no executor runs a copy; or, when an executor holds the claim, False (it must be cancelled
    there)."""
    client = aioredis.Redis.from_url(redis_server.url, decode_responses=True)

    def job(backend: str) -> str:
        return json.dumps({"key": uuid.uuid4().hex, "origin": "a", "code": "print(1)", "backend": backend,
                           "timeout_s": 5, "deadline": time.time() + 40})

    async def scenario() -> None:
        backend = f"withdraw-{uuid.uuid4().hex[:8]}"
        queued, gone, running = job(backend), job(backend), job(backend)
        await client.rpush(queue_key(backend), queued, running)
        assert await broker_jobs.withdraw(client, queued, "a")
        assert await client.lrange(queue_key(backend), 0, -1) == [running]

        assert await broker_jobs.withdraw(client, gone, "a")  # not in the queue: claimed for its origin
        assert await broker_jobs.withdraw(client, gone, "a")  # a retry of that claim, answered late: still sure
        assert await broker_jobs.claim(client, broker_jobs.read_job(gone), "b") == "withdrawn-by:a"  # B drops it

        assert await broker_jobs.claim(client, broker_jobs.read_job(running), "b") is None  # B took and claimed it
        await client.lrem(queue_key(backend), 0, running)
        assert not await broker_jobs.withdraw(client, running, "a")
        await client.aclose()

    asyncio.run(scenario())
