"""Operating the server: /metrics counts what really happened, /readyz, and the phased shutdown."""

from __future__ import annotations

import asyncio
import json
import signal
import time
import urllib.error
import urllib.request

import pytest
import websockets
from prometheus_client.parser import text_string_to_metric_families

from tests.live_server import LiveServer, collect, done_of

pytestmark = pytest.mark.live

OOM_CODE = "import numpy as np\nblocks = [np.ones(256 * 2**20 // 8) for _ in range(12)]\nprint('unreachable')"


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    server = LiveServer(tmp_path_factory.mktemp("ops"), ["--shutdown-grace-s", "30"])
    try:
        server.wait_ready()
        yield server
    finally:
        server.stop()


def scrape(server: LiveServer, headers: dict[str, str] | None = None) -> dict[tuple[str, tuple], float]:
    request = urllib.request.Request(server.http_url + "/metrics", headers=headers or {})
    with urllib.request.urlopen(request, timeout=10) as response:
        assert response.headers["content-type"].startswith("text/plain")
        text = response.read().decode()
    samples = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            samples[(sample.name, tuple(sorted(sample.labels.items())))] = sample.value
    return samples


def value(samples: dict, name: str, **labels: str) -> float:
    return samples.get((name, tuple(sorted(labels.items()))), 0.0)


def test_the_scrape_counts_runs_cache_snippets_rejections_and_sandbox_faults(server):
    before = scrape(server)
    assert value(before, "jaxplay_workers_connected", backend="cpu") == 1
    assert value(before, "jaxplay_slots_total", backend="cpu") == 2

    for _ in range(2):  # a second browser's run agrees with the first: the result answers anyone
        assert done_of(server.run("print(1)"))["status"] == "ok"
    # The cache stores a result after its done is sent; on a loaded machine a repeat may arrive first.
    # Two entries: the first browser's own, and the shared one.
    deadline = time.monotonic() + 10
    while value(scrape(server), "jaxplay_result_cache_entries") < 2 and time.monotonic() < deadline:
        time.sleep(0.05)
    assert done_of(server.run("print(1)")).get("cached") is True
    assert done_of(server.run("1/0"))["status"] == "error"
    crash = done_of(server.run("import os, signal\nos.kill(os.getpid(), signal.SIGKILL)"))
    assert crash["status"] == "crashed"
    oom = done_of(server.run(OOM_CODE))
    assert done_of(server.run("print(2)", timeout_s=10_000))["status"] == "rejected"
    body = json.dumps({"code": "print('shared')"}).encode()
    request = urllib.request.Request(server.http_url + "/api/snippets", data=body, method="POST",
                                     headers={"content-type": "application/json"})
    with urllib.request.urlopen(request, timeout=10) as response:
        assert json.load(response)["created"] is True
    # The worker's slots report after the last run may trail its finished message by a moment.
    time.sleep(0.5)

    after = scrape(server)

    def grew(name: str, **labels: str) -> float:
        return value(after, name, **labels) - value(before, name, **labels)

    assert grew("jaxplay_runs_total", backend="cpu", kind="run", status="ok") == 3
    assert grew("jaxplay_runs_total", backend="cpu", kind="run", status="error") == 1 + (oom["status"] == "error")
    assert grew("jaxplay_runs_total", backend="cpu", kind="run", status="crashed") == 1
    assert grew("jaxplay_runs_rejected_total", reason="timeout_too_long", kind="run") == 1
    assert grew("jaxplay_result_cache_hits_total") == 1
    assert grew("jaxplay_result_cache_misses_total") >= 5
    assert grew("jaxplay_snippets_created_total") == 1
    assert value(after, "jaxplay_result_cache_entries") >= 1 and value(after, "jaxplay_result_cache_bytes") > 0
    assert grew("jaxplay_sandbox_crashes_total", backend="cpu") == 1
    # The OOM killer ends the run where the memory cgroup is available; elsewhere an rlimit raises MemoryError.
    killed = oom.get("message", "").startswith("Out of memory")
    if killed:  # the slot counts OOM kills: the run's own SIGKILL, which it did not count, is not blamed on memory
        assert crash["message"] == "The Python process ended abruptly (signal 9).", crash
    assert grew("jaxplay_sandbox_oom_kills_total", backend="cpu") == (1 if killed else 0)
    # Five runs reached a worker (the cached and the rejected ones did not): each waited and each ran.
    assert grew("jaxplay_queue_wait_seconds_count", backend="cpu", kind="run") == 5
    assert grew("jaxplay_run_duration_seconds_count", backend="cpu", kind="run") == 5
    assert value(after, "jaxplay_slots_busy", backend="cpu") == 0
    assert value(after, "jaxplay_queue_depth", backend="cpu") == 0


def test_every_kind_of_request_that_executes_code_is_counted_and_timed_by_its_kind(server):
    """A passes request, a profiled run and a Compare run each reach jaxplay_runs_total, the queue wait and
    the duration under their own kind, and a refused passes request is counted as one."""
    async def passes(message: dict) -> list[dict]:
        headers = await asyncio.to_thread(server.browser_headers)
        async with websockets.connect(server.ws_url, max_size=None, additional_headers=headers) as ws:
            await ws.send(json.dumps({"type": "passes", "code": "print(3)", "key": "1.1", "fn": "f", **message}))
            return await collect(ws, message["id"], 90)

    before = scrape(server)
    assert done_of(asyncio.run(passes({"id": "p"})))["status"] == "ok"
    assert done_of(asyncio.run(passes({"id": "far", "backend": "tpu"})))["reason"] == "unknown_backend"
    assert done_of(server.run("print(4)", profile=True))["status"] == "ok"
    assert done_of(server.run("print(5)", compare=True, fresh=True))["status"] == "ok"
    after = scrape(server)

    def grew(name: str, **labels: str) -> float:
        return value(after, name, **labels) - value(before, name, **labels)

    for kind in ("passes", "profile", "compare"):
        assert grew("jaxplay_runs_total", backend="cpu", kind=kind, status="ok") == 1, kind
        assert grew("jaxplay_queue_wait_seconds_count", backend="cpu", kind=kind) == 1, kind
        assert grew("jaxplay_run_duration_seconds_count", backend="cpu", kind=kind) == 1, kind
    assert grew("jaxplay_runs_rejected_total", reason="unknown_backend", kind="passes") == 1
    assert sum(grew("jaxplay_runs_total", backend="cpu", kind="run", status=status)
               for status in ("ok", "error", "timeout", "cancelled", "crashed")) == 0


def test_busy_slots_and_browser_connections_are_seen_while_a_run_is_going(server):
    async def scenario() -> dict:
        async with websockets.connect(server.ws_url) as ws:
            await ws.send(json.dumps({"type": "run", "id": "long", "code": "import time\nprint('go')\ntime.sleep(30)"}))
            while json.loads(await ws.recv())["type"] != "stdout":
                pass
            await asyncio.sleep(0.3)
            samples = await asyncio.to_thread(scrape, server)
            await ws.send(json.dumps({"type": "cancel", "id": "long"}))
            await collect(ws, "long", 20)
            return samples

    samples = asyncio.run(scenario())
    assert value(samples, "jaxplay_slots_busy", backend="cpu") == 1
    assert value(samples, "jaxplay_browser_connections") == 1


def test_a_scrape_through_a_proxy_on_this_host_is_refused(server):
    with pytest.raises(urllib.error.HTTPError) as refused:
        scrape(server, {"X-Forwarded-For": "203.0.113.9"})
    assert refused.value.code == 403 and b"--metrics token" in refused.value.read()


def test_readyz_reports_each_check(server):
    ready = server.get_json("/readyz")
    assert ready == {"ready": True, "checks": {"accepting": True, "storage": "writable", "workers": {"cpu": 1},
                                               "local_workers": {"started": 1, "joined": 1, "refused": {}}},
                     "serving": {"runs": True, "links": True}}


def test_shutdown_drains_runs_refuses_new_ones_and_tells_browsers(tmp_path):
    server = LiveServer(tmp_path / "drain", ["--shutdown-grace-s", "30"])
    try:
        server.wait_ready()

        async def scenario() -> tuple[list, list, dict, int, dict, dict]:
            async with websockets.connect(server.ws_url) as ws, websockets.connect(server.ws_url) as other:
                await ws.send(json.dumps({"type": "run", "id": "slow",
                                          "code": "import time\nprint('go', flush=True)\ntime.sleep(3)\nprint('end')"}))
                while json.loads(await ws.recv())["type"] != "stdout":
                    pass
                server.process.send_signal(signal.SIGTERM)
                # Every open socket hears of the drain at once, before anything it asked for is refused.
                draining = json.loads(await asyncio.wait_for(other.recv(), 10))
                assert draining["type"] == "server_draining", draining  # not only the notice as the sockets close
                await asyncio.sleep(0.5)
                try:
                    await asyncio.to_thread(server.get_json, "/readyz")
                    readiness_status = 200
                except urllib.error.HTTPError as exc:
                    readiness_status = exc.code
                await other.send(json.dumps({"type": "run", "id": "late", "code": "print(1)", "fresh": True}))
                late = await collect(other, "late", 20)
                # A socket that opens during the drain hears of it too.
                async with websockets.connect(server.ws_url) as newcomer:
                    told_newcomer = json.loads(await asyncio.wait_for(newcomer.recv(), 10))
                slow = await collect(ws, "slow", 20)
                notice = json.loads(await asyncio.wait_for(ws.recv(), 20))
                with pytest.raises(websockets.ConnectionClosed):
                    await asyncio.wait_for(ws.recv(), 20)
                return slow, late, notice, readiness_status, draining, told_newcomer

        slow, late, notice, readiness_status, draining, told_newcomer = asyncio.run(scenario())
        for told in (draining, told_newcomer):
            assert told["type"] == "server_draining" and "restarting" in told["message"] and told["grace_s"] == 30
        assert readiness_status == 503
        assert done_of(late)["status"] == "rejected" and "shutting down" in done_of(late)["message"]
        assert done_of(slow)["status"] == "ok" and "end\n" in "".join(e.get("text", "") for e in slow)
        assert notice["type"] == "notice" and "reconnects" in notice["message"]
        server.process.wait(30)
        log = server.log_path.read_text()
        assert all(f"shutdown phase {n}/4" in log for n in range(1, 5)) and "shutdown complete" in log
    finally:
        server.stop()
