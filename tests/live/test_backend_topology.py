"""GPU-only, mixed and CPU-only hosts: the backends offered, the default, readiness, and runs.

A GPU host's worker is played by tests/gpu_double.py (the real worker and
protocol announcing a ``gpu`` backend with one device), so these run on
machines without a GPU.
"""

from __future__ import annotations

import json
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest

from tests import gpu_double
from tests.live_server import LiveServer, done_of, output_text

TOKEN = "gpu-double-token"
GALLERY = Path(__file__).resolve().parents[2] / "frontend" / "src" / "examples" / "gallery"


def readyz(server: LiveServer) -> tuple[int, dict]:
    try:
        with urllib.request.urlopen(server.http_url + "/readyz", timeout=10) as response:
            return response.status, json.load(response)
    except urllib.error.HTTPError as error:
        return error.code, json.load(error)


def serve_with_double(tmp_path: Path, *extra: str) -> tuple[LiveServer, object]:
    server = LiveServer(tmp_path / "data", list(extra), env={"JAXPLAY_WORKER_TOKEN": TOKEN})
    double = gpu_double.start(server.worker_url, TOKEN)
    return server, double


def stop(server: LiveServer, double) -> None:
    double.terminate()
    double.wait(20)
    server.stop()


@pytest.fixture(scope="module")
def gpu_only(tmp_path_factory):
    server, double = serve_with_double(tmp_path_factory.mktemp("gpu-only"), "--no-local-worker")
    try:
        server.wait_ready(workers=1, timeout_s=180)
        yield server
    finally:
        stop(server, double)


def test_a_gpu_only_host_offers_gpu_first_and_is_ready(gpu_only):
    listed = gpu_only.get_json("/api/backends")
    assert [b["name"] for b in listed["backends"]] == ["gpu"]  # no phantom cpu backend with 0 workers
    assert listed["default"] == "gpu" and listed["problems"] == []
    status, body = readyz(gpu_only)
    assert status == 200 and body["ready"], body


def test_a_run_that_names_no_backend_runs_on_the_gpu(gpu_only):
    events = gpu_only.run("import jax\nprint(jax.device_count())")
    assert done_of(events)["status"] == "ok", events[-3:]
    started = next(e for e in events if e["type"] == "started")
    assert started["backend"] == "gpu" and "test double" in started["devices"]["kind"]
    assert output_text(events) == "1\n"


@pytest.mark.parametrize("example", sorted(p.name for p in GALLERY.glob("sharding_*.py")))
def test_the_sharding_examples_run_on_one_gpu(gpu_only, example):
    events = gpu_only.run((GALLERY / example).read_text(), timeout=120, backend="gpu")
    assert done_of(events)["status"] == "ok", [e for e in events if e["type"] in ("error", "done")]


def test_a_mixed_host_keeps_cpu_as_default_unless_told(tmp_path):
    server, double = serve_with_double(tmp_path)
    try:
        server.wait_ready(workers=2, timeout_s=180)
        listed = server.get_json("/api/backends")
        assert sorted(b["name"] for b in listed["backends"]) == ["cpu", "gpu"]
        assert listed["default"] == "cpu"
        assert readyz(server)[0] == 200
        events = server.run("print('on the gpu')", backend="gpu")
        assert done_of(events)["status"] == "ok"
        assert next(e for e in events if e["type"] == "started")["backend"] == "gpu"
    finally:
        stop(server, double)


def test_default_backend_setting_picks_the_gpu_on_a_mixed_host(tmp_path):
    server, double = serve_with_double(tmp_path, "--default-backend", "gpu")
    try:
        server.wait_ready(workers=2, timeout_s=180)
        assert server.get_json("/api/backends")["default"] == "gpu"
        events = server.run("print(1)")
        assert next(e for e in events if e["type"] == "started")["backend"] == "gpu"
    finally:
        stop(server, double)


def test_a_local_worker_that_cannot_start_is_named_not_looped(tmp_path):
    # No bubblewrap on the PATH: the local worker refuses to start, naming the cause. The server stays
    # up and unready, saying why on /readyz and /api/backends, and does not restart the worker.
    server = LiveServer(tmp_path / "data", [], env={"PATH": "/nonexistent"})
    try:
        server.wait_ready(workers=0)
        for _ in range(150):
            status, body = readyz(server)
            if body.get("problems"):
                break
            time.sleep(0.2)
        assert status == 503 and not body["ready"], body
        assert "bubblewrap" in body["problems"][0] and "local-0" in body["problems"][0]
        assert body["checks"]["local_workers"]["joined"] == 0
        assert "bubblewrap" in server.get_json("/api/backends")["problems"][0]
        time.sleep(3)  # a restart loop would have tried again by now (its first delay is 1 s)
        log = server.log_path.read_text()
        assert log.count("cannot start, and is not restarted") == 1 and "restarting" not in log
        assert "Event loop is closed" not in log
    finally:
        server.stop()


def test_a_cpu_only_host_is_as_before(tmp_path):
    server = LiveServer(tmp_path / "data")
    try:
        server.wait_ready()
        listed = server.get_json("/api/backends")
        assert [b["name"] for b in listed["backends"]] == ["cpu"] and listed["default"] == "cpu"
        assert readyz(server)[0] == 200
        assert server.get_json("/readyz")["checks"]["local_workers"] == {"started": 1, "joined": 1, "refused": {}}
    finally:
        server.stop()
