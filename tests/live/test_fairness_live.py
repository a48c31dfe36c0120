"""Fairness on the real server: a flooding client does not hold up another, and limits answer clearly."""

from __future__ import annotations

import asyncio
import contextlib
import json

import websockets

from tests.live_server import collect, collect_many, flood_then_one, running_server

FLOOD = 12


def test_a_flood_from_one_client_lets_another_start_after_at_most_one_of_its_runs():
    args = ["--max-runs-per-connection", str(FLOOD), "--max-runs-per-client", str(FLOOD), "--slots", "1"]
    with running_server(args) as server:
        mine, flood_events, flood_still_running = asyncio.run(flood_then_one(server, FLOOD))
        assert flood_still_running  # the other client's run did not wait for the flood to drain
        assert mine[-1]["status"] == "ok"
        queued = [e for e in mine if e["type"] == "queued"]
        # Told it is next but one (one flood run is ahead in the round), with a wait from measured runs.
        assert queued[0]["position"] == 2, queued
        assert queued[0]["estimated_wait_s"] is not None and queued[0]["estimated_wait_s"] > 0
        assert all(done[-1]["status"] == "ok" for done in flood_events.values())
        assert [e["position"] for e in queued] == sorted((e["position"] for e in queued), reverse=True)


def test_per_client_limit_message():
    with running_server(["--max-runs-per-client", "2", "--max-runs-per-connection", "4"]) as server:
        async def scenario():
            async with websockets.connect(server.ws_url) as ws:
                for i in range(3):
                    await ws.send(json.dumps({"type": "run", "id": f"r{i}", "fresh": True,
                                              "code": f"import time\ntime.sleep(1)\nprint({i})"}))
                return await collect_many(ws, ["r0", "r1", "r2"], 120)

        events = asyncio.run(scenario())
        assert events["r2"][-1]["status"] == "rejected"
        assert "runs waiting or running (the limit is 2 per browser)" in events["r2"][-1]["message"]
        assert events["r0"][-1]["status"] == events["r1"][-1]["status"] == "ok"


def test_limits_count_a_browser_session_over_all_its_connections():
    args = ["--max-runs-per-client", "2", "--max-connections-per-client", "2"]
    with running_server(args) as server:
        cookie = server.session_cookie()

        async def scenario():
            headers = {"cookie": cookie}
            async with websockets.connect(server.ws_url, additional_headers=headers) as one, \
                    websockets.connect(server.ws_url, additional_headers=headers) as two:
                third = await websockets.connect(server.ws_url, additional_headers=headers)
                refused = json.loads(await third.recv())
                with contextlib.suppress(websockets.ConnectionClosed):
                    await third.recv()
                assert third.close_code == 1008
                for ws, run_id in ((one, "a"), (two, "b"), (two, "c")):
                    await ws.send(json.dumps({"type": "run", "id": run_id, "fresh": True,
                                              "code": f"import time\ntime.sleep(1)\nprint('{run_id}')"}))
                # Another browser is not affected by this one's limits.
                async with websockets.connect(server.ws_url, additional_headers=server.browser_headers()) as stranger:
                    await stranger.send(json.dumps({"type": "run", "id": "s", "code": "print('s')", "fresh": True}))
                    stranger_events = await collect(stranger, "s", 120)
                return refused, await collect(one, "a", 120), await collect_many(two, ["b", "c"], 120), stranger_events

        refused, a, bc, stranger = asyncio.run(scenario())
        assert "already has 2 connections open" in refused["message"]
        assert a[-1]["status"] == bc["b"][-1]["status"] == "ok"
        assert bc["c"][-1]["status"] == "rejected" and "the limit is 2 per browser" in bc["c"][-1]["message"]
        assert stranger[-1]["status"] == "ok"
