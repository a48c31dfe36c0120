"""Two real `jaxplay serve` replicas sharing queues and workers through a real Redis (--broker).

Replica A has no worker; replica B has one. A browser connected to A runs on B's
worker; cancels and deadlines reach it; each run gets exactly one ``done``; a
replica killed mid-run gets its runs ended, and its browsers told, by the other.
"""

from __future__ import annotations

import asyncio
import json
import shutil
import signal
import socket
import time
import uuid

import pytest
import websockets

from tests.live.faults import metric
from tests.live_server import LiveServer, collect, collect_many, done_of, output_text

pytestmark = pytest.mark.live

SLEEPER = "import time\nprint('going', flush=True)\ntime.sleep(60)"


def start_pair(redis_server, tmp_path, extra: tuple[str, ...] = ()) -> tuple[LiveServer, LiveServer]:
    broker = ["--broker", redis_server.url, *extra]
    a = LiveServer(tmp_path / "a", ["--no-local-worker", *broker])
    a.wait_ready(workers=0)
    # Replicas behind one load balancer share the session signing key, so a browser keeps its session.
    (tmp_path / "b").mkdir()
    shutil.copy(tmp_path / "a" / "session.key", tmp_path / "b" / "session.key")
    b = LiveServer(tmp_path / "b", broker)
    b.wait_ready(workers=1)
    deadline = time.monotonic() + 10
    while not any(entry["workers"] for entry in a.get_json("/api/backends")["backends"]):
        assert time.monotonic() < deadline, "replica A never learnt of B's worker"
        time.sleep(0.05)
    return a, b


@pytest.fixture
def pair(redis_server, tmp_path):
    a, b = start_pair(redis_server, tmp_path)
    try:
        yield a, b
    finally:
        a.stop()
        b.stop()


async def no_second_done(ws, run_id: str, wait_s: float = 1.0) -> None:
    try:
        async with asyncio.timeout(wait_s):
            while True:
                event = json.loads(await ws.recv())
                assert not (event.get("id") == run_id and event["type"] == "done"), "a second done"
    except TimeoutError:
        pass


def test_a_run_submitted_on_one_replica_runs_on_the_others_worker(pair):
    a, b = pair
    assert a.get_json("/healthz")["workers"] == 0
    [cpu] = a.get_json("/api/backends")["backends"]
    assert cpu["name"] == "cpu" and cpu["workers"] == 1 and cpu["slots"] == 2 and cpu["device_count"] == 8
    assert a.get_json("/readyz")["checks"]["workers"] == {"cpu": 1}  # B's worker makes A ready too
    events = a.run("import jax\nprint(jax.numpy.arange(3) * 2)", fresh=True)
    started = next(e for e in events if e["type"] == "started")
    assert started["devices"]["worker"] == f"local-0@{socket.gethostname()}:{b.port}"  # unique per replica
    assert done_of(events)["status"] == "ok" and output_text(events) == "[0 2 4]\n"
    assert [e["type"] for e in events].count("done") == 1
    # The result cache works across replicas: A keys it on the environment of B's worker.
    assert done_of(a.run("print(7)"))["status"] == "ok"
    for _ in range(20):  # the result is written just after its done: a run right away may miss it
        time.sleep(0.3)
        again = a.run("print(7)")
        if done_of(again).get("cached"):
            break
    assert done_of(again).get("cached") is True and output_text(again) == "7\n"


def test_cancel_and_deadline_cross_replicas_with_exactly_one_done(pair):
    a, _ = pair

    async def scenario():
        async with websockets.connect(a.ws_url) as ws:
            await ws.send(json.dumps({"type": "run", "id": "c", "code": SLEEPER, "fresh": True}))
            while json.loads(await ws.recv()).get("type") != "stdout":
                pass
            await ws.send(json.dumps({"type": "cancel", "id": "c"}))
            cancelled = await collect(ws, "c", 30)
            await no_second_done(ws, "c")
            await ws.send(json.dumps({"type": "run", "id": "t", "code": SLEEPER, "timeout_s": 3, "fresh": True}))
            timed_out = await collect(ws, "t", 60)
            await no_second_done(ws, "t")
            return cancelled, timed_out

    cancelled, timed_out = asyncio.run(scenario())
    assert done_of(cancelled)["status"] == "cancelled"
    assert done_of(timed_out)["status"] == "timeout" and "3 s" in done_of(timed_out)["message"]


def test_a_run_cancelled_while_waiting_in_redis_never_runs(pair):
    a, _ = pair

    async def scenario():
        async with websockets.connect(a.ws_url) as ws:
            # Two slots on B: two sleepers fill them, the third waits in Redis.
            for run_id in ("s1", "s2", "w"):
                await ws.send(json.dumps({"type": "run", "id": run_id, "code": SLEEPER, "fresh": True}))
            queued = await anext_of(ws, "w", "queued")
            await ws.send(json.dumps({"type": "cancel", "id": "w"}))
            waiting = await collect(ws, "w", 30)
            for run_id in ("s1", "s2"):
                await ws.send(json.dumps({"type": "cancel", "id": run_id}))
            return queued, waiting

    queued, waiting = asyncio.run(scenario())
    assert queued["position"] >= 1
    assert [e["type"] for e in waiting] == ["done"] and waiting[0]["status"] == "cancelled"
    assert waiting[0]["message"] == "Cancelled before it started."


async def anext_of(ws, run_id: str, kind: str) -> dict:
    async with asyncio.timeout(30):
        while True:
            event = json.loads(await ws.recv())
            if event.get("id") == run_id and event["type"] == kind:
                return event


def test_killing_the_browsers_replica_mid_run_tells_the_browser_on_the_other(pair):
    a, b = pair
    cookie = a.session_cookie()
    run_id = uuid.uuid4().hex[:8]
    crashed_before = metric(b, "jaxplay_runs_total", backend="cpu", kind="run", status="crashed")

    async def scenario():
        async with websockets.connect(a.ws_url, additional_headers={"cookie": cookie}) as ws:
            await ws.send(json.dumps({"type": "run", "id": run_id, "code": SLEEPER, "fresh": True}))
            while json.loads(await ws.recv()).get("type") != "stdout":
                pass
            a.process.send_signal(signal.SIGKILL)  # the replica dies without a word
            with pytest.raises(websockets.ConnectionClosed):
                async with asyncio.timeout(10):
                    while True:  # frames it sent before it died may still arrive first
                        assert json.loads(await ws.recv()).get("type") != "done"
        # Two tabs of the browser come back before the dead replica is judged: both are told, once counted.
        async with websockets.connect(b.ws_url, additional_headers={"cookie": cookie}) as ws, \
                websockets.connect(b.ws_url, additional_headers={"cookie": cookie}) as other_tab:
            told, told_other_tab = await asyncio.gather(collect(ws, run_id, 20), collect(other_tab, run_id, 20))
            # B cancelled the orphaned run: its slot is free again for new work.
            await ws.send(json.dumps({"type": "run", "id": "after", "code": "print('free')", "fresh": True}))
            after = await collect(ws, "after", 60)
        return told, told_other_tab, after

    told, told_other_tab, after = asyncio.run(scenario())
    assert done_of(told)["status"] == "crashed" and "stopped while this run was in flight" in done_of(told)["message"]
    assert done_of(told_other_tab) == done_of(told)
    assert done_of(after)["status"] == "ok" and output_text(after) == "free\n"
    # The crash B told counts once on B, which told it (the replica that ran the run died with its count).
    assert metric(b, "jaxplay_runs_total", backend="cpu", kind="run", status="crashed") == 1.0
    assert crashed_before == 0.0
    assert metric(b, "jaxplay_runs_total", backend="cpu", kind="run", status="ok") == 1.0


def test_killing_the_workers_replica_mid_run_ends_the_run_on_the_browsers(pair):
    a, b = pair

    async def scenario():
        async with websockets.connect(a.ws_url) as ws:
            await ws.send(json.dumps({"type": "run", "id": "k", "code": SLEEPER, "fresh": True}))
            while json.loads(await ws.recv()).get("type") != "stdout":
                pass
            b.process.send_signal(signal.SIGKILL)
            events = await collect(ws, "k", 30)
            await no_second_done(ws, "k")
            return events

    done = done_of(asyncio.run(scenario()))
    assert done["status"] == "crashed" and "replica running this program stopped" in done["message"]


def test_runs_sent_before_any_replica_had_a_worker_wait_and_an_unoffered_backend_is_refused_when_one_joins(
        redis_server, tmp_path):
    """Every replica just restarted, no worker yet: a page's held runs wait in Redis. When a cpu worker joins
    another replica, the cpu run runs there and the gpu run is refused at once (it waited out its deadline,
    then 'the worker stopped answering')."""
    a = LiveServer(tmp_path / "a", ["--no-local-worker", "--broker", redis_server.url])
    b = None
    try:
        a.wait_ready(workers=0)

        async def scenario() -> tuple[list[dict], list[dict], float]:
            async with websockets.connect(a.ws_url, additional_headers=a.browser_headers()) as ws:
                for run_id, backend in (("on-cpu", "cpu"), ("on-gpu", "gpu")):
                    await ws.send(json.dumps({"type": "run", "id": run_id, "code": "print('held')",
                                              "backend": backend, "timeout_s": 30}))
                    assert (await anext_of(ws, run_id, "queued"))["position"] >= 1
                nonlocal b
                (tmp_path / "b").mkdir()
                shutil.copy(tmp_path / "a" / "session.key", tmp_path / "b" / "session.key")
                b = await asyncio.to_thread(LiveServer, tmp_path / "b", ["--broker", redis_server.url])
                await asyncio.to_thread(b.wait_ready, workers=1)
                joined = time.monotonic()
                events = await collect_many(ws, ["on-cpu", "on-gpu"], timeout=60)
                return events["on-cpu"], events["on-gpu"], time.monotonic() - joined

        cpu, gpu, after_join_s = asyncio.run(scenario())
        assert done_of(cpu)["status"] == "ok" and output_text(cpu) == "held\n"
        refused = done_of(gpu)
        assert (refused["status"], refused["reason"]) == ("rejected", "unknown_backend")
        assert refused["message"] == "Unknown backend 'gpu': this server offers cpu."
        assert after_join_s < 15  # settled by a heartbeat, not by the run's deadline (30 s + grace)
    finally:
        a.stop()
        if b is not None:
            b.stop()
