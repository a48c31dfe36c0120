"""The fault suite, workers told to stop: SIGTERM to a worker under load, as a rollout or a scale-down sends.

A worker told to stop takes no new run (the server stops sending it jobs, and
with ``--broker`` its replica stops taking them from Redis), lets its running
programs finish, then leaves; past its grace, or at a second signal, the runs
left end as ``crashed`` saying the worker was stopped. Asserted, as in the
rest of the suite: exactly one ``done`` per run, no job lost, ``ok`` output
equal to the same program's on an idle server, readiness that matches whether
a run can be served, and ``/metrics`` counting what the browsers were told.
"""

from __future__ import annotations

import asyncio
import signal
import time
import uuid

import pytest
import redis

from jaxplay.server.runs.broker_keys import queue_key
from tests.live.faults import (
    Client,
    check_run_contract,
    http_status,
    metric_total,
    readiness,
    remote_worker,
    replica,
    stop_process,
    wait_until,
)
from tests.live_server import LiveServer, output_text

pytestmark = pytest.mark.live

TOKEN = "drain-test-token-0123456789"
NO_WORKER = ("--no-local-worker", "--expected-backends", "cpu")
# Deterministic output, a start the test can see, and a sleep to be in flight when the signal comes.
PROGRAM = ("import hashlib, time\nprint('started', flush=True)\ntime.sleep({seconds})\n"
           "print(hashlib.sha256(b'playground').hexdigest())\n")


def program(seconds: float) -> str:
    return PROGRAM.format(seconds=seconds) + f"# {uuid.uuid4().hex}"  # unique: never a cache answer


def worker_of(client: Client, run_id: str) -> str | None:
    started = next((e for e in client.events[run_id] if e["type"] == "started"), None)
    return started["devices"]["worker"] if started else None


def told(clients_runs: list[tuple[Client, str]], status: str) -> int:
    return sum(1 for client, run_id in clients_runs if (client.done(run_id) or {}).get("status") == status)


def assert_metrics_match(servers: list[LiveServer], runs: list[tuple[Client, str]]) -> None:
    """The crashed and rejected runs /metrics counts, over the replicas, are those the browsers were told of."""
    crashed = sum(metric_total(s, "jaxplay_runs_total", status="crashed") for s in servers)
    rejected = sum(metric_total(s, "jaxplay_runs_rejected_total") for s in servers)
    assert (crashed, rejected) == (told(runs, "crashed"), told(runs, "rejected"))


def test_a_worker_told_to_stop_under_load_finishes_its_runs_and_takes_no_new_one(redis_server, tmp_path):
    env = {"JAXPLAY_WORKER_TOKEN": TOKEN}
    a = replica(tmp_path, "a", redis_server.url, *NO_WORKER, env=env)
    a.wait_ready(workers=0)
    b = replica(tmp_path, "b", redis_server.url, *NO_WORKER, key_from=tmp_path / "a", env=env)
    b.wait_ready(workers=0)
    staying = remote_worker(a, TOKEN, "staying", tmp_path, "--slots", "2")
    leaving = remote_worker(b, TOKEN, "leaving", tmp_path, "--slots", "2")
    try:
        for server in (a, b):  # every replica knows both workers
            wait_until(lambda s=server: sum(e["workers"] for e in http_status(s, "/api/backends")[1]["backends"])
                       == 2, 180, "both workers joined")
        runs = asyncio.run(drain_under_load(a, b, leaving))
        assert leaving.wait(60) == 0  # it left on its own, once its runs had ended
        assert (readiness(b)[0], readiness(b)[1]["checks"]["workers"]) == (200, {"cpu": 1})  # A's worker serves B
        assert redis.Redis.from_url(redis_server.url).llen(queue_key("cpu")) == 0  # no job left behind
        assert_metrics_match([a, b], runs)
        log = (tmp_path / "worker-leaving.log").read_text()
        assert "told to stop" in log and "drained; leaving" in log and "Traceback" not in log
    finally:
        for process in (staying, leaving):
            stop_process(process)
        a.stop()
        b.stop()


async def drain_under_load(a: LiveServer, b: LiveServer, leaving) -> list[tuple[Client, str]]:
    async with Client(a) as idle:  # what the program prints on an idle server
        run_id = await idle.run(program(0.1))
        [done] = (await idle.all_done([run_id], 60)).values()
        assert done["status"] == "ok", done
        expected = output_text(idle.events[run_id])
    assert expected.startswith("started\n")
    async with Client(a) as c1, Client(a) as c2, Client(b) as c3, Client(b) as c4:
        clients = [c1, c2, c3, c4]
        before = [(c, await c.run(program(3))) for c in clients for _ in range(3)]  # 12 runs on 4 slots

        def going_on_leaving() -> list[tuple[Client, str]] | None:
            going = [(c, r) for c, r in before if worker_of(c, r) == "leaving" and not c.done(r)]
            return going if len(going) == 2 else None

        on_leaving = await asyncio.to_thread(wait_until, going_on_leaving, 60, "two runs going on the leaving worker")
        leaving.send_signal(signal.SIGTERM)
        signalled = time.monotonic()
        await asyncio.to_thread(wait_until, lambda: http_status(b, "/api/backends")[1]["backends"][0].get("draining")
                                or leaving.poll() is not None, 10, "the server to learn the worker drains")
        after = [(c, await c.run(program(1))) for c in clients]  # sent while it drains: they go elsewhere
        for c in clients:
            await c.all_done([r for cc, r in before + after if cc is c], 180)
    runs = before + after
    for c, run_id in runs:
        done = check_run_contract(c.events[run_id])
        assert done["status"] == "ok", (worker_of(c, run_id), done)
        assert output_text(c.events[run_id]) == expected, run_id  # as on an idle server: nothing lost or doubled
    assert all(worker_of(c, r) == "leaving" for c, r in on_leaving)  # the runs it had finished on it
    assert not [r for c, r in after if worker_of(c, r) == "leaving"]  # no new run went to it
    assert time.monotonic() - signalled < 45  # within its grace
    return runs


def test_a_worker_stopped_past_its_grace_or_twice_ends_its_runs_saying_so(tmp_path):
    server = LiveServer(tmp_path / "s", list(NO_WORKER), env={"JAXPLAY_WORKER_TOKEN": TOKEN})
    server.wait_ready(workers=0)
    short = remote_worker(server, TOKEN, "short-grace", tmp_path, "--slots", "2",
                          env={"JAXPLAY_SHUTDOWN_GRACE_S": "2"})
    later = None
    try:
        server.wait_ready(workers=1, timeout_s=180)

        async def scenario() -> list[tuple[Client, str]]:
            nonlocal later
            async with Client(server) as client:
                long = [await client.run(program(25)) for _ in range(2)]
                for run_id in long:
                    await client.started(run_id)
                waiting = await client.run(program(0.5))  # queued: both slots are busy
                short.send_signal(signal.SIGTERM)
                signalled = time.monotonic()
                ended = await client.all_done(long, 30)
                assert time.monotonic() - signalled < 15  # its 2 s grace, not the runs' 25 s
                for done in ended.values():
                    assert done["status"] == "crashed" and "was stopped" in done["message"], done
                    assert "its 2 s to finish ran out" in done["message"], done
                assert await asyncio.to_thread(short.wait, 30) == 0
                # No worker takes runs now: the queued one waits (readiness says so), and runs once one joins.
                assert client.done(waiting) is None
                assert (await asyncio.to_thread(readiness, server))[0] == 503
                later = remote_worker(server, TOKEN, "later", tmp_path, "--slots", "2")
                [done] = (await client.all_done([waiting], 180)).values()
                assert done["status"] == "ok" and worker_of(client, waiting) == "later", done
                # Stopped twice: the runs end at once, saying so.
                twice = [await client.run(program(25)) for _ in range(2)]
                for run_id in twice:
                    await client.started(run_id)
                later.send_signal(signal.SIGTERM)
                await asyncio.sleep(0.5)
                later.send_signal(signal.SIGTERM)
                signalled = time.monotonic()
                for done in (await client.all_done(twice, 30)).values():
                    assert done["status"] == "crashed" and "a second stop signal" in done["message"], done
                assert time.monotonic() - signalled < 10
                assert await asyncio.to_thread(later.wait, 30) == 0
                runs = [(client, r) for r in [*long, waiting, *twice]]
                for c, run_id in runs:
                    check_run_contract(c.events[run_id])
                return runs

        runs = asyncio.run(scenario())
        assert_metrics_match([server], runs)
        assert metric_total(server, "jaxplay_sandbox_crashes_total") == 0  # no sandbox was blamed for the stops
    finally:
        for process in (short, later):
            if process is not None:
                stop_process(process)
        server.stop()
