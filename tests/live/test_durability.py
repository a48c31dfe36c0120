"""Links outlive the server: 1000 snippets survive a SIGKILL byte for byte, and so does the result cache."""

from __future__ import annotations

import http.client
import json
import os
import signal
import sqlite3
import time
import uuid
from pathlib import Path

import pytest

from tests.conftest import done_of
from tests.live_server import LiveServer

pytestmark = pytest.mark.live

SNIPPETS = 1000


def kill_hard(server: LiveServer) -> None:
    """SIGKILL the server's whole process group: no shutdown code runs, no WAL checkpoint."""
    os.killpg(server.process.pid, signal.SIGKILL)
    server.process.wait(10)
    server.log.close()


class Client:
    """One keep-alive HTTP connection, as a browser would hold."""

    def __init__(self, server: LiveServer) -> None:
        self.connection = http.client.HTTPConnection("127.0.0.1", server.port, timeout=30)

    def post(self, path: str, payload: dict) -> tuple[int, dict]:
        self.connection.request("POST", path, json.dumps(payload), {"content-type": "application/json"})
        response = self.connection.getresponse()
        return response.status, json.loads(response.read())

    def get(self, path: str) -> tuple[int, bytes]:
        self.connection.request("GET", path)
        response = self.connection.getresponse()
        return response.status, response.read()

    def close(self) -> None:
        self.connection.close()


def snippet_payload(i: int, previous: str | None) -> dict:
    """Varied content: unicode, recorded runs, forks, settings."""
    payload: dict = {"code": f"# snippet {i} · λ ünïcode\nimport jax.numpy as jnp\nprint(jnp.arange({i}).sum())\n",
                     "backend": "cpu", "settings": {"inspect": i % 2 == 0}}
    if i % 3 == 0:
        payload["recorded_run"] = [{"type": "stdout", "text": f"{i * (i - 1) // 2}\n"},
                                   {"type": "done", "status": "ok", "elapsed_ms": float(i)}]
        payload["recorded_at"] = "2025-05-01T12:00:00Z"
    if i % 7 == 0 and previous is not None:
        payload["forked_from"] = previous
    return payload


def test_a_thousand_snippets_survive_sigkill_byte_identical(tmp_path: Path):
    server = LiveServer(tmp_path, ["--local-workers", "0"])
    stored: dict[str, bytes] = {}
    payloads: dict[str, dict] = {}
    try:
        server.wait_ready(workers=0)
        client = Client(server)
        previous = None
        for i in range(SNIPPETS):
            status, created = client.post("/api/snippets", snippet_payload(i, previous))
            assert status == 201, created
            previous = created["id"]
            payloads[created["id"]] = snippet_payload(i, None)
        for snippet_id in payloads:
            status, body = client.get(f"/api/snippets/{snippet_id}")
            assert status == 200
            stored[snippet_id] = body
        client.close()
    finally:
        kill_hard(server)
    assert len(stored) == SNIPPETS

    server = LiveServer(tmp_path, ["--local-workers", "0"])
    try:
        server.wait_ready(workers=0)
        client = Client(server)
        for snippet_id, body in stored.items():
            status, again = client.get(f"/api/snippets/{snippet_id}")
            assert status == 200 and again == body, snippet_id
        # Ids are still derived from content: the same content finds its old link, new content a new one.
        some_id = next(iter(stored))
        document = json.loads(stored[some_id])
        resend = {k: document[k] for k in ("code", "backend", "settings", "recorded_run", "recorded_at", "forked_from")}
        status, again_created = client.post("/api/snippets", resend)
        assert status == 201 and again_created["id"] == some_id and again_created["created"] is False
        status, created = client.post("/api/snippets", {"code": f"print('{uuid.uuid4()}')"})
        assert status == 201 and created["id"] not in stored
        client.close()
    finally:
        server.stop()


def test_the_result_cache_survives_sigkill(tmp_path: Path):
    code = f"# {uuid.uuid4().hex}\nprint('kept across restarts')"
    server = LiveServer(tmp_path)
    try:
        server.wait_ready()
        for _ in range(2):  # a second browser's run agrees with the first: the result answers anyone
            assert "cached" not in done_of(server.run(code))
        database = sqlite3.connect(f"file:{tmp_path / 'jaxplay.sqlite3'}?mode=ro", uri=True)
        deadline = time.monotonic() + 10
        while database.execute("SELECT COUNT(*) FROM result_cache WHERE key = program").fetchone()[0] == 0:
            assert time.monotonic() < deadline, "the run's result was never written"
            time.sleep(0.05)
        database.close()
    finally:
        kill_hard(server)

    server = LiveServer(tmp_path)
    try:
        server.wait_ready()
        done = done_of(server.run(code))
        assert done["status"] == "ok" and done["cached"] is True
    finally:
        server.stop()
