"""A hostile web client against the brokered queue: does ``--broker`` keep the fairness and the per-browser
limits that one server gives (docs/security.md, "Who is one client")?

One server serves networks in turn, and a network's clients in turn
(server/runs/fair_queue.py): a browser behind a flood waits for at most one run
of it. With ``--broker`` every run is first pushed onto one shared Redis list per
backend and taken from its head (server/runs/broker_jobs.py): first come, first
served, whoever sent them. And a browser's limit (``--max-runs-per-client``) is
counted by each replica for itself.

These tests state what should hold and fail today (strict xfail): they are the
findings, to pass once the shared queue serves clients in turn and the limit
counts a browser over all replicas.
"""

from __future__ import annotations

import asyncio
import json

import pytest
import websockets

from tests.live.faults import readiness, replica, wait_until
from tests.live_server import collect_many, flood_then_one
from tests.redis_server import RedisServer

pytestmark = pytest.mark.live

FLOOD = 12
SHARED_FIFO = ("with --broker the shared Redis queue is first come, first served: a flood from one browser "
               "(or one network's minted sessions) runs before another browser's run")
LIMIT_PER_REPLICA = "with --broker each replica counts a browser's runs for itself: N replicas allow N times the limit"


@pytest.mark.xfail(strict=True, reason=SHARED_FIFO)
def test_a_flood_from_one_browser_lets_another_start_after_at_most_one_of_its_runs(redis_server: RedisServer,
                                                                                   tmp_path):
    args = ["--max-runs-per-connection", str(FLOOD), "--max-runs-per-client", str(FLOOD), "--slots", "1"]
    server = replica(tmp_path, "a", redis_server.url, *args)
    try:
        server.wait_ready()
        wait_until(lambda: readiness(server)[0] == 200, 30, "ready")

        mine, flood_events, flood_still_running = asyncio.run(flood_then_one(server, FLOOD))
        assert mine[-1]["status"] == "ok" and all(e[-1]["status"] == "ok" for e in flood_events.values())
        assert flood_still_running, "the other browser's run waited for the whole flood"
    finally:
        server.stop()


@pytest.mark.xfail(strict=True, reason=LIMIT_PER_REPLICA)
def test_a_browsers_run_limit_counts_its_runs_on_every_replica(redis_server: RedisServer, tmp_path):
    args = ["--max-runs-per-client", "2"]
    a = replica(tmp_path, "a", redis_server.url, *args)
    b = None
    try:
        a.wait_ready()
        b = replica(tmp_path, "b", redis_server.url, *args, key_from=tmp_path / "a")  # one load balancer's pair
        b.wait_ready()
        cookie = a.session_cookie()

        async def scenario() -> dict[str, list[dict]]:
            headers = {"cookie": cookie}
            async with websockets.connect(a.ws_url, additional_headers=headers) as on_a, \
                    websockets.connect(b.ws_url, additional_headers=headers) as on_b:
                for ws, run_id in ((on_a, "a1"), (on_a, "a2"), (on_b, "b1")):
                    await ws.send(json.dumps({"type": "run", "id": run_id, "fresh": True,
                                              "code": f"import time\ntime.sleep(4)\nprint('{run_id}')"}))
                return {**await collect_many(on_a, ["a1", "a2"], 120), **await collect_many(on_b, ["b1"], 120)}

        events = asyncio.run(scenario())
        assert events["a1"][-1]["status"] == events["a2"][-1]["status"] == "ok"
        assert events["b1"][-1]["status"] == "rejected", "a third run of a browser limited to 2 ran on replica B"
    finally:
        a.stop()
        if b is not None:
            b.stop()
