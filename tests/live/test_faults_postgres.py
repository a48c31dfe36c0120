"""The fault suite, storage side: PostgreSQL stopped under a running server, then started again; and
a server started while PostgreSQL is down or full of connections.

While it is down, what needs it answers 503 naming it (JSON for the API), runs
go on without the result cache and always end with ``done``, the websocket
stays open, ``/metrics`` answers, and ``/readyz`` stays 200 (runs can be
served) while it names the database as degraded. Once it is back, the very
first probe finds storage writable and nothing stored is lost. A server
started during the outage does not exit: it serves runs, and links once the
database can be reached.
"""

from __future__ import annotations

import asyncio
import json

import psycopg
import pytest

from tests.live.faults import Client, check_run_contract, http_status, metric, readiness, wait_until
from tests.live_server import LiveServer

pytestmark = pytest.mark.live

NOT_LOADED = "jax-22222-2222Z"  # a room code no replica holds in memory
CACHED = "print('answered from the cache when the database is up')"


def test_postgres_stopped_and_started_under_a_running_server(own_postgres, tmp_path):
    server = LiveServer(tmp_path, ["--database-url", own_postgres.new_database()])
    try:
        server.wait_ready()
        status, snippet = http_status(server, "/api/snippets", "POST", {"code": "print('kept')"})
        assert status == 201
        stored = http_status(server, f"/api/snippets/{snippet['id']}")[1]
        unread = http_status(server, "/api/snippets", "POST", {"code": "print('never read')"})[1]
        status, room = http_status(server, "/api/rooms", "POST", {"program": "print('room')"})
        assert status == 201
        # Two browsers' runs that agree: the result answers anyone (the first browser its own at once).
        for _ in range(2):
            assert asyncio.run(one_run(server, CACHED, fresh=True))["status"] == "ok"
        wait_until(lambda: metric(server, "jaxplay_result_cache_entries") == 2, 10, "the result written to the cache")

        own_postgres.pause()
        # A link read before is kept in memory (it never changes), and is served on.
        assert http_status(server, f"/api/snippets/{snippet['id']}") == (200, stored)
        for path, method, body in (("/api/snippets", "POST", {"code": "print('new')"}),
                                   (f"/api/snippets/{unread['id']}", "GET", None),
                                   ("/api/rooms", "POST", {"program": ""})):
            status, answer = http_status(server, path, method, body)
            assert status == 503 and "database is unavailable" in answer["message"], (path, answer)
            assert "PostgreSQL" in answer["message"]  # names the cause
        for page in (f"/s/{snippet['id']}", f"/r/{NOT_LOADED}"):  # a room not in memory must be read
            status, text = http_status(server, page)
            assert status == 503 and "Database unavailable" in text, page
        assert http_status(server, f"/r/{room['room']}")[0] == 200  # a live room goes on from memory
        status, ready = readiness(server)  # runs can be served: this replica stays in the load balancer
        assert status == 200 and ready["checks"]["storage"].startswith("not writable"), ready
        assert ready["degraded"] == ["storage"] and ready["serving"] == {"runs": True, "links": False}, ready
        assert http_status(server, "/healthz")[0] == 200
        assert metric(server, "jaxplay_dependency_up", dependency="storage") == 0.0  # /metrics answers, and says
        events = asyncio.run(runs_and_a_room_join(server, NOT_LOADED))
        for run in events[:2]:  # the cache cannot be asked: the program runs, and the socket lives on
            done = check_run_contract(run)
            assert done["status"] == "ok" and "cached" not in done
        notice = events[2]
        assert notice["type"] == "notice" and "database is unavailable" in notice["message"]

        own_postgres.resume()
        status, ready = readiness(server)  # the first probe after the restart: no stale report
        assert status == 200 and ready["checks"]["storage"] == "writable" and "degraded" not in ready, ready
        assert http_status(server, f"/api/snippets/{snippet['id']}")[1] == stored  # nothing stored was lost
        assert http_status(server, f"/s/{snippet['id']}")[0] == 200
        assert http_status(server, "/api/snippets", "POST", {"code": "print('after')"})[0] == 201
        assert asyncio.run(one_run(server, CACHED, fresh=False)).get("cached") is True
        assert metric(server, "jaxplay_dependency_up", dependency="storage") == 1.0
        assert "Traceback" not in server.log_path.read_text()
    finally:
        server.stop()


async def one_run(server: LiveServer, code: str, **fields) -> dict:
    async with Client(server) as client:
        run_id = await client.run(code, **fields)
        return (await client.all_done([run_id], 60))[run_id]


async def runs_and_a_room_join(server: LiveServer, room: str) -> list:
    """Two runs that look up the cache, on one socket, then a room join: what each got."""
    async with Client(server) as client:
        first = await client.run(CACHED, fresh=False)
        await client.all_done([first], 60)
        second = await client.run(CACHED, fresh=False)
        await client.all_done([second], 60)
        notices: list[dict] = []
        client.events[None] = notices  # notices name no run
        await client.ws.send(json.dumps({"type": "room_join", "room": room}))
        async with asyncio.timeout(20):
            while not notices:
                await asyncio.sleep(0.05)
        assert not client.closed
        return [client.events[first], client.events[second], notices[0]]


def fill_connections(url: str) -> list[psycopg.Connection]:
    """Open connections until PostgreSQL refuses one for having too many; the caller holds them."""
    held: list[psycopg.Connection] = []
    while True:
        try:
            held.append(psycopg.connect(url, connect_timeout=5))
        except psycopg.OperationalError as refused:
            assert "too many clients" in str(refused), refused
            return held
        assert len(held) < 50, "PostgreSQL took 50 connections: max_connections was not applied"


@pytest.mark.parametrize("outage", ["full of connections", "down"])
def test_a_server_started_while_postgres_is_out_serves_runs_then_links(own_postgres, tmp_path, outage):
    database = own_postgres.new_database()
    held: list[psycopg.Connection] = []
    own_postgres.pause()
    if outage == "down":
        server = LiveServer(tmp_path, ["--database-url", database])
    else:
        own_postgres.resume("max_connections=6")
        held = fill_connections(database)
        server = LiveServer(tmp_path, ["--database-url", database])
    try:
        server.wait_ready()  # it did not exit ("Application startup failed"): it is up, its worker joined
        status, ready = wait_until(lambda: (r := readiness(server))[0] == 200 and r, 60, "ready for runs")
        assert ready["checks"]["storage"].startswith("not writable") and ready["degraded"] == ["storage"], ready
        assert ready["serving"] == {"runs": True, "links": False}, ready
        done = asyncio.run(one_run(server, "print('a run needs no database')", fresh=True))
        assert done["status"] == "ok", done
        status, answer = http_status(server, "/api/snippets", "POST", {"code": "print('during')"})
        assert status == 503 and "database is unavailable" in answer["message"], answer
        assert metric(server, "jaxplay_dependency_up", dependency="storage") == 0.0

        for connection in held:
            connection.close()
        if outage == "down":
            own_postgres.resume()
        created = wait_until(lambda: (r := http_status(server, "/api/snippets", "POST", {"code": "print('back')"}))[0]
                             == 201 and r[1], 60, "links once the database can be reached")
        assert http_status(server, f"/api/snippets/{created['id']}")[1]["code"] == "print('back')"
        status, ready = readiness(server)
        assert status == 200 and ready["checks"]["storage"] == "writable" and "degraded" not in ready, ready
        log = server.log_path.read_text()
        assert "Trying again" in log and "reached after" in log and "Traceback" not in log
    finally:
        for connection in held:
            connection.close()
        server.stop()
