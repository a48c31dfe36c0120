"""A browser's run ids colliding across its tabs, against the session entries a returning browser is told from
(server/runs/broker_sessions.py). Run ids are the browser's to choose: two tabs of one browser session may send
the same one.

What must hold: when the replica that had both tabs dies, a tab that reconnects
elsewhere is told how its run ended, even though the other tab's run of the same
id ended before (its end used to delete the one entry both ids shared).
"""

from __future__ import annotations

import asyncio
import json
import signal

import pytest
import websockets

from jaxplay.server.runs.broker_sessions import ORIGIN_GONE
from tests.live.faults import Client, readiness, replica, sleeper, wait_until
from tests.live_server import collect
from tests.redis_server import RedisServer

pytestmark = pytest.mark.live


def test_a_tab_whose_run_id_another_tab_reused_is_told_its_run_ended_after_its_replica_died(
        redis_server: RedisServer, tmp_path):
    a = replica(tmp_path, "a", redis_server.url)
    b = None
    try:
        a.wait_ready()
        b = replica(tmp_path, "b", redis_server.url, key_from=tmp_path / "a")
        b.wait_ready()
        for server in (a, b):
            wait_until(lambda s=server: readiness(s)[0] == 200, 30, f"{server.http_url} ready")
        cookie = b.session_cookie()

        async def scenario() -> dict:
            headers = {"cookie": cookie}
            async with websockets.connect(b.ws_url, additional_headers=headers) as tab1, \
                    websockets.connect(b.ws_url, additional_headers=headers) as tab2:
                await tab1.send(json.dumps({"type": "run", "id": "dup", "code": sleeper(60), "fresh": True}))
                await asyncio.sleep(0.5)
                await tab2.send(json.dumps({"type": "run", "id": "dup", "code": "print('quick')", "fresh": True}))
                assert (await collect(tab2, "dup", 90))[-1]["status"] == "ok"
                await asyncio.sleep(1)  # the end of a run deletes its entry just after its done is sent
                b.process.send_signal(signal.SIGKILL)  # tab 1's run is still in flight on B
                b.process.wait(10)
            async with Client(a, cookie, expect=["dup"]) as returning:  # tab 1, back through the load balancer
                return (await returning.all_done(["dup"], 30))["dup"]

        done = asyncio.run(scenario())
        assert (done["status"], done["message"]) == ("crashed", ORIGIN_GONE), done
    finally:
        a.stop()
        if b is not None:
            b.stop()
