"""The fault suite, brokered side: real replicas on a real Redis, which is killed, and which kills replicas.

Each case asserts what an operator's worst day must still give: every accepted
run ends with exactly one ``done`` (after ``queued``), no run ends ``crashed``
unless its sandbox really died, readiness tells the truth during the outage,
nothing stored is lost, and everything recovers without restarting a replica.
"""

from __future__ import annotations

import asyncio
import json
import signal
import time

import pytest
import redis

from jaxplay.server.runs.broker_keys import BROKER_UNREACHABLE, PREFIX, queue_key
from jaxplay.server.runs.broker_redis import EXECUTOR_GONE
from jaxplay.server.runs.broker_sessions import ORIGIN_GONE
from tests.live.faults import (
    Client,
    check_run_contract,
    http_status,
    metric,
    readiness,
    replica,
    sleeper,
    wait_until,
)
from tests.redis_server import RedisServer

pytestmark = pytest.mark.live

# As server pods run in Kubernetes: no local worker, ready only while some replica's CPU worker is connected.
NO_WORKER = ("--no-local-worker", "--expected-backends", "cpu")


def ready_pair(redis_url: str, tmp_path, a_args: tuple[str, ...], b_args: tuple[str, ...] = ()):
    a = replica(tmp_path, "a", redis_url, *a_args)
    a.wait_ready(workers=0 if "--no-local-worker" in a_args else 1)
    b = replica(tmp_path, "b", redis_url, *b_args, key_from=tmp_path / "a")
    b.wait_ready()
    for server in (a, b):  # ready, and every replica knows every worker
        wait_until(lambda s=server: readiness(s)[0] == 200, 20, f"{server.http_url} ready")
        wait_until(lambda s=server: sum(e["workers"] for e in http_status(s, "/api/backends")[1]["backends"]) == 2
                   - ("--no-local-worker" in a_args), 20, "every worker known")
    return a, b


def test_redis_killed_mid_load_and_restarted_loses_no_run_and_crashes_none(own_redis, tmp_path):
    # A has no worker: every run of its browser crosses Redis to B's two slots.
    a, b = ready_pair(own_redis.url, tmp_path, NO_WORKER)
    try:
        asyncio.run(redis_outage(own_redis, a, b))
    finally:
        a.stop()
        b.stop()
    log = a.log_path.read_text() + b.log_path.read_text()
    assert "which stopped" not in log  # no replica's job was dropped as if the replica had died


async def redis_outage(own_redis: RedisServer, a, b) -> None:
    async with Client(a) as on_a, Client(b) as on_b:
        # Load: two run on B's slots, the rest wait in Redis when it dies.
        before = [(on_a, await on_a.run(sleeper(2.5))) for _ in range(3)]
        before += [(on_b, await on_b.run(sleeper(2.5))) for _ in range(2)]
        await on_a.started(before[0][1])
        # Every job in Redis before it dies (two taken by B's slots, three waiting): a push still on its way
        # would be refused, rightly, saying Redis is unreachable.
        waiting = redis.Redis.from_url(own_redis.url).llen

        def all_in_redis() -> bool:
            started = sum(any(e["type"] == "started" for e in c.events[r]) for c, r in before)
            return started == 2 and waiting(queue_key("cpu")) == 3

        await asyncio.to_thread(wait_until, all_in_redis, 10, "every job in Redis")
        own_redis.kill()

        for server in (a, b):  # readiness tells the truth during the outage
            status, body = await asyncio.to_thread(wait_until, lambda s=server: _unready(s), 10, "503 from /readyz")
            assert body["checks"]["broker"].startswith("unreachable"), body
        refused = await on_a.run("print('during the outage')")
        [during] = (await on_a.all_done([refused], 20)).values()
        assert during["status"] == "rejected" and during["message"] == BROKER_UNREACHABLE

        own_redis.start()  # empty, like a restarted cache pod
        async with Client(a) as later_a, Client(b) as later_b:  # new tabs: a tab may have 4 runs in flight
            after = [(later_a, await later_a.run(sleeper(0.5))) for _ in range(2)]  # within a moment of the restart
            after += [(later_b, await later_b.run(sleeper(0.5))) for _ in range(2)]
            for client, run_id in after:
                [done] = (await client.all_done([run_id], 90)).values()
                assert done["status"] == "ok" and check_run_contract(client.events[run_id]), done

        for client, run_id in before:
            [done] = (await client.all_done([run_id], 90)).values()
            check_run_contract(client.events[run_id])
            assert done["status"] == "ok", done
            assert "finished" in "".join(e.get("text", "") for e in client.events[run_id])
        assert not on_a.closed and not on_b.closed

        for server in (a, b):  # recovery without a restart: ready again, and a fresh run works on each
            await asyncio.to_thread(wait_until, lambda s=server: readiness(s)[0] == 200, 20, "ready again")
        fresh = [(on_a, await on_a.run("print('after')")), (on_b, await on_b.run("print('after')"))]
        for client, run_id in fresh:
            [done] = (await client.all_done([run_id], 60)).values()
            assert done["status"] == "ok" and check_run_contract(client.events[run_id])
    for server in (a, b):
        assert metric(server, "jaxplay_runs_total", backend="cpu", kind="run", status="crashed") in (None, 0.0)
        assert metric(server, "jaxplay_dependency_up", dependency="broker") == 1.0
    # The replicas' event streams expire if their replica stops for good.
    streams = redis.Redis.from_url(own_redis.url).keys(f"{PREFIX}events:*")
    assert streams and all(redis.Redis.from_url(own_redis.url).ttl(key) > 0 for key in streams)


def _unready(server) -> tuple[int, dict] | None:
    status, body = readiness(server)
    return (status, body) if status == 503 else None


def test_a_replica_killed_mid_load_ends_only_its_own_runs(postgres, redis_server, tmp_path):
    database = ["--database-url", postgres.new_database()]
    a, b = ready_pair(redis_server.url, tmp_path, tuple(database), tuple(database))
    try:
        status, snippet = http_status(b, "/api/snippets", "POST", {"code": "print('stored through B')"})
        assert status == 201
        b_worker = f":{b.port}"  # local workers are named local-N@HOST:PORT, unique per replica
        client = redis.Redis.from_url(redis_server.url, decode_responses=True)
        b_ids = wait_until(lambda: [i for i in client.smembers(f"{PREFIX}replicas")
                                    if b_worker in (client.get(f"{PREFIX}replica:{i}") or "")], 10, "B's heartbeat")
        cookie = b.session_cookie()
        asyncio.run(replica_death(a, b, cookie, b_worker, lambda: client.llen(queue_key("cpu"))))
        # Nothing stored is lost: B's snippet is A's too. B's leftovers leave Redis: its stream, its jobs.
        assert http_status(a, f"/api/snippets/{snippet['id']}")[1]["code"] == "print('stored through B')"
        wait_until(lambda: not client.exists(f"{PREFIX}events:{b_ids[0]}"), 15, "B's event stream deleted")
        wait_until(lambda: client.llen(queue_key("cpu")) == 0, 15, "B's jobs dropped")
    finally:
        a.stop()
        b.stop()


async def replica_death(a, b, cookie: str, b_worker: str, waiting_in_redis) -> None:
    async with Client(a) as on_a, Client(b, cookie) as on_b:
        # Four runs on four free slots, two on each replica: A's browser has two runs on B when it dies.
        mine = [await on_a.run(sleeper(8)) for _ in range(4)]
        for run_id in mine:
            await on_a.started(run_id)
        crossed = [r for r in mine if any(e["type"] == "started" and b_worker in e["devices"]["worker"]
                                          for e in on_a.events[r])]
        assert crossed and not any(on_a.done(r) for r in crossed)
        theirs = [await on_b.run(sleeper(3)) for _ in range(2)]  # B's browser's runs: waiting in Redis
        await asyncio.to_thread(wait_until, lambda: waiting_in_redis() == 2, 10, "B's runs in Redis")
        b.process.send_signal(signal.SIGKILL)  # B and (with it) its local worker die without a word
        b.process.wait(10)
        assert (await asyncio.to_thread(readiness, a))[0] == 200
        for run_id, done in (await on_a.all_done(mine, 60)).items():
            check_run_contract(on_a.events[run_id])
            if run_id in crossed:  # their sandboxes died with B, and they say so
                assert (done["status"], done["message"]) == ("crashed", EXECUTOR_GONE)
            else:
                assert done["status"] == "ok", done
        fresh = await on_a.run("print('A carries on')")
        assert (await on_a.all_done([fresh], 60))[fresh]["status"] == "ok"
    # B's browser comes back through the load balancer to A and learns what became of its runs.
    async with Client(a, cookie, expect=theirs) as returning:
        told = await returning.all_done(theirs, 30)
    assert all(d["status"] == "crashed" and d["message"] == ORIGIN_GONE for d in told.values()), told


def test_the_queue_metric_reports_the_brokered_backlog(redis_server, tmp_path):
    # One slot in all (B's): runs back up in Redis, where the autoscaler must see them.
    a, b = ready_pair(redis_server.url, tmp_path, NO_WORKER, ("--slots", "1"))
    client = redis.Redis.from_url(redis_server.url)
    try:
        asyncio.run(backlog(a, b, client))
    finally:
        a.stop()
        b.stop()


async def backlog(a, b, client) -> None:
    async with Client(a) as first, Client(a) as second, Client(b) as third:
        runs = [(c, await c.run(sleeper(4))) for c in (first, second, third) for _ in range(2)]
        await asyncio.sleep(1.5)  # every job pushed, one started
        readings = await asyncio.to_thread(stable_readings, a, b, client)
        backlog_now, on_a, on_b, api_a, api_b = readings
        assert backlog_now >= 3
        assert on_a == on_b == backlog_now, readings  # every replica reports the shared queue
        assert api_a["queued"] == api_b["queued"] == backlog_now
        for entry in (api_a, api_b):  # and agrees on capacity: B's one slot, busy
            assert (entry["workers"], entry["slots"], entry["free_slots"]) == (1, 1, 0), entry
        assert api_a["libraries"] == api_b["libraries"] and "jax" in api_a["libraries"]  # A has no worker of its own
        for c, run_id in runs:
            await c.ws.send(json.dumps({"type": "cancel", "id": run_id}))
        for c in (first, second, third):
            for done in (await c.all_done([r for cc, r in runs if cc is c], 60)).values():
                assert done["status"] in ("cancelled", "ok")


def stable_readings(a, b, client) -> tuple[int, float | None, float | None, dict, dict]:
    """The Redis list's length (LLEN) and what each replica reports, read while the backlog held still."""
    for _ in range(20):
        before = client.llen(queue_key("cpu"))
        time.sleep(1.2)  # a heartbeat later: every replica's view of the others is fresh
        on_a, on_b = metric(a, "jaxplay_queue_depth", backend="cpu"), metric(b, "jaxplay_queue_depth", backend="cpu")
        [api_a] = http_status(a, "/api/backends")[1]["backends"]
        [api_b] = http_status(b, "/api/backends")[1]["backends"]
        if client.llen(queue_key("cpu")) == before:
            return before, on_a, on_b, api_a, api_b
    raise AssertionError("the backlog never held still for a reading")


def test_the_queued_jobs_of_a_killed_replica_leave_redis_though_no_worker_would_take_them(own_redis, tmp_path):
    """A replica killed -9 with its browser's gpu run waiting in Redis, where no gpu worker will ever come: a
    replica that judges it gone drops that job, which nobody waits for, rather than leave it counted in the
    queue's length, its positions and its limit until the queue expires (an hour)."""
    expects_gpu = ("--no-local-worker", "--expected-backends", "gpu")
    a = replica(tmp_path, "a", own_redis.url, *expects_gpu)
    a.wait_ready(workers=0)
    b = replica(tmp_path, "b", own_redis.url, *expects_gpu, key_from=tmp_path / "a")
    client = redis.Redis.from_url(own_redis.url, decode_responses=True)
    try:
        b.wait_ready(workers=0)
        wait_until(lambda: client.scard(f"{PREFIX}replicas") == 2, 15, "both heartbeats")

        async def queue_one_then_die() -> None:
            async with Client(a) as tab:  # open until A dies: a tab that closes cancels its runs
                await tab.run("print('for a gpu that never comes')", backend="gpu")
                await asyncio.to_thread(wait_until, lambda: client.llen(queue_key("gpu")) == 1, 10, "the job queued")
                a.process.send_signal(signal.SIGKILL)
                a.process.wait(10)

        asyncio.run(queue_one_then_die())
        wait_until(lambda: client.llen(queue_key("gpu")) == 0, 20, "the killed replica's job dropped")
        assert client.scard(f"{PREFIX}replicas") == 1
    finally:
        a.stop()
        b.stop()
