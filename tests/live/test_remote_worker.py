"""A worker on "another host" dials in with the shared token; a wrong token is refused clearly."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import time

import pytest
import websockets

from tests.live_server import PROJECT_ROOT, LiveServer, collect, done_of, output_text

TOKEN = "correct-horse-battery-staple"


@pytest.fixture(scope="module")
def tokened_server(tmp_path_factory):
    server = LiveServer(tmp_path_factory.mktemp("remote"), ["--no-local-worker"], env={"JAXPLAY_WORKER_TOKEN": TOKEN})
    try:
        server.wait_ready(workers=0)
        yield server
    finally:
        server.stop()


def start_worker(server: LiveServer, token: str, *extra: str) -> subprocess.Popen:
    env = {k: v for k, v in os.environ.items() if not k.startswith("JAXPLAY_")}
    return subprocess.Popen([sys.executable, "-m", "jaxplay.cli", "worker", "--server", server.worker_url,
                             "--token", token, "--slots", "1", *extra],
                            cwd=PROJECT_ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)


def test_wrong_token_is_refused_with_a_clear_message(tokened_server):
    worker = start_worker(tokened_server, "wrong")
    output, _ = worker.communicate(timeout=120)
    assert worker.returncode == 2
    assert "refused" in output and "JAXPLAY_WORKER_TOKEN" in output
    assert tokened_server.get_json("/healthz")["workers"] == 0


def test_a_run_naming_its_backend_before_any_worker_joined_waits_and_runs(tokened_server):
    """A page that reconnects to a restarted server of remote workers sends the run it held, naming the
    backend it had, before any worker has joined: it waits for one (it was refused "offers none yet")."""
    async def scenario() -> list[dict]:
        headers = await asyncio.to_thread(tokened_server.browser_headers)
        async with websockets.connect(tokened_server.ws_url, additional_headers=headers) as ws:
            await ws.send(json.dumps({"type": "run", "id": "held", "code": "print('held')", "backend": "cpu"}))
            events = [json.loads(await asyncio.wait_for(ws.recv(), 30))]
            if events[0]["type"] != "queued":
                return events
            worker = start_worker(tokened_server, TOKEN)
            try:
                return events + await collect(ws, "held", timeout=120)
            finally:
                worker.terminate()
                await asyncio.to_thread(worker.wait, 10)

    events = asyncio.run(scenario())
    assert events[0]["type"] == "queued", events[0]
    assert done_of(events)["status"] == "ok" and output_text(events) == "held\n"


def test_worker_with_the_token_joins_and_runs(tokened_server):
    worker = start_worker(tokened_server, TOKEN, "--cpu-devices", "4", "--name", "far-away")
    try:
        tokened_server.wait_ready(workers=1)
        backends = tokened_server.get_json("/api/backends")["backends"]
        assert backends == [b for b in backends if b["name"] == "cpu"]
        assert backends[0]["device_count"] == 4 and backends[0]["slots"] == 1 and backends[0]["jax_version"]
        events = tokened_server.run("import jax; print(jax.device_count())")
        assert done_of(events)["status"] == "ok" and output_text(events) == "4\n"
        assert events[1]["devices"]["worker"] == "far-away"
    finally:
        worker.terminate()
        worker.wait(10)


def test_server_without_a_token_accepts_no_remote_worker(live):
    worker = start_worker(live, "anything")
    output, _ = worker.communicate(timeout=120)
    assert worker.returncode == 2 and "accepts no remote workers" in output


def test_a_restart_before_any_worker_joined_refuses_the_runs_waiting_for_one_at_once(tmp_path):
    """A drain waits for runs that workers can finish; a run waiting for a first worker has none, so a
    restart tells it at once instead of holding the shutdown for its whole grace."""
    server = LiveServer(tmp_path, ["--no-local-worker", "--shutdown-grace-s", "40"], env={"JAXPLAY_WORKER_TOKEN": TOKEN})
    try:
        server.wait_ready(workers=0)

        async def scenario() -> tuple[list[dict], float]:
            headers = await asyncio.to_thread(server.browser_headers)
            async with websockets.connect(server.ws_url, additional_headers=headers) as ws:
                await ws.send(json.dumps({"type": "run", "id": "held", "code": "print('held')", "backend": "cpu"}))
                assert json.loads(await asyncio.wait_for(ws.recv(), 30))["type"] == "queued"
                started = time.monotonic()
                server.process.send_signal(signal.SIGTERM)
                events = await collect(ws, "held", timeout=30)
                await asyncio.to_thread(server.process.wait, 30)
                return events, time.monotonic() - started

        events, stopped_after_s = asyncio.run(scenario())
        done = done_of(events)
        assert (done["status"], done["reason"]) == ("rejected", "shutting_down")
        assert done["message"].startswith("This server is restarting before any worker joined it")
        assert stopped_after_s < 20  # not the 40 s grace
    finally:
        server.stop()
