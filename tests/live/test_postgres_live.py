"""A real server on PostgreSQL (--database-url): links, cached results and workshop rooms live there and
outlive the server."""

from __future__ import annotations

import asyncio
import json
import urllib.request

import pytest

from tests.live.faults import run_until_stored
from tests.live.test_rooms_live import create_room, join
from tests.live_server import LiveServer, done_of

pytestmark = pytest.mark.live


def share(server: LiveServer, code: str) -> dict:
    request = urllib.request.Request(server.http_url + "/api/snippets", data=json.dumps({"code": code}).encode(),
                                     method="POST", headers={"content-type": "application/json"})
    with urllib.request.urlopen(request, timeout=10) as response:
        return json.load(response)


def test_a_server_on_postgres_shares_caches_and_is_ready(postgres, tmp_path):
    url = postgres.new_database()
    first = LiveServer(tmp_path / "a", ["--database-url", url])
    try:
        first.wait_ready()
        assert first.get_json("/readyz")["checks"]["storage"] == "writable"
        for _ in range(2):  # a second browser's run agrees with the first: the result answers anyone
            assert done_of(run_until_stored(first, "print(40 + 2)"))["status"] == "ok"
        snippet = share(first, "print('kept in postgres')")
        room = create_room(first, program="print('a room in postgres')", deck=[snippet["id"]])
    finally:
        first.stop()

    # A second server (another replica, or the same after a restart) sees both.
    second = LiveServer(tmp_path / "b", ["--database-url", url])
    try:
        second.wait_ready()
        assert second.get_json(f"/api/snippets/{snippet['id']}")["code"] == "print('kept in postgres')"
        assert done_of(second.run("print(40 + 2)")).get("cached") is True
        state = asyncio.run(follow(second, room["room"]))
        assert state["deck"] == [snippet["id"]] and state["code"] == "print('kept in postgres')"
    finally:
        second.stop()


async def follow(server: LiveServer, code: str) -> dict:
    ws, state = await join(server, code)
    await ws.close()
    return state
