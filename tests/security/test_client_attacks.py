"""A hostile web client against a real server: it lies about who and where it is, or leaves it out.

Each test is one class of attack: cookie-less sockets multiplying a client, forged proxy headers,
guessing room codes (and locking a classroom out), room joins that amplify memory, other sites'
posts, DNS-rebinding Host headers, and a session cookie sent in the clear.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import http.client as http_client
import json
import os
import socket
import struct
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import websockets

from jaxplay.server.rooms.codes import ALPHABET
from tests.live_server import LiveServer, collect, done_of


@contextlib.contextmanager
def server(args: list[str], workers: int = 1) -> Iterator[LiveServer]:
    with tempfile.TemporaryDirectory() as data_dir:
        live = LiveServer(Path(data_dir), [*args, *([] if workers else ["--local-workers", "0"])])
        try:
            live.wait_ready(workers=workers)
            yield live
        finally:
            live.stop()


@pytest.fixture(scope="module")
def plain() -> Iterator[LiveServer]:
    """As shipped, but a run may print enough to fill a room's kept run (4 MiB)."""
    with server(["--output-limit-bytes", str(8 << 20)]) as live:
        yield live


def http(live: LiveServer, method: str, path: str, body: bytes | None = None,
         headers: dict[str, str] | None = None) -> tuple[int, dict[str, str], bytes]:
    """One request with exactly these headers (``Host`` included, when given)."""
    connection = http_client.HTTPConnection("127.0.0.1", live.port, timeout=30)
    try:
        connection.request(method, path, body=body, headers=headers or {})
        response = connection.getresponse()
        return response.status, {k.lower(): v for k, v in response.getheaders()}, response.read()
    finally:
        connection.close()


def create_room(live: LiveServer, headers: dict[str, str] | None = None) -> tuple[int, dict[str, Any]]:
    status, _, body = http(live, "POST", "/api/rooms", b'{"program": "print(1)"}',
                           {"content-type": "application/json", **(headers or {})})
    return status, json.loads(body)


class RawSocket:
    """A websocket client that writes frames and reads nothing after the handshake, as a hostile script would."""

    def __init__(self, live: LiveServer, host: str | None = None, cookie: str | None = None) -> None:
        self.sock = socket.socket()
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)  # fills at once: the server must hold
        self.sock.connect(("127.0.0.1", live.port))
        key = base64.b64encode(os.urandom(16)).decode()
        lines = ["GET /ws HTTP/1.1", f"Host: {host or f'127.0.0.1:{live.port}'}", "Upgrade: websocket",
                 "Connection: Upgrade", f"Sec-WebSocket-Key: {key}", "Sec-WebSocket-Version: 13"]
        if cookie:
            lines.append(f"Cookie: {cookie}")
        self.sock.sendall(("\r\n".join(lines) + "\r\n\r\n").encode())
        answer = b""
        while b"\r\n\r\n" not in answer:
            chunk = self.sock.recv(1)
            if not chunk:
                break
            answer += chunk
        self.status = int(answer.split(b" ", 2)[1]) if answer else 0

    def send(self, message: dict[str, Any]) -> None:
        payload = json.dumps(message).encode()
        mask = os.urandom(4)
        header = bytes([0x81]) + (bytes([0x80 | len(payload)]) if len(payload) < 126
                                  else bytes([0x80 | 126]) + struct.pack("!H", len(payload)))
        self.sock.sendall(header + mask + bytes(b ^ mask[i % 4] for i, b in enumerate(payload)))

    def close(self) -> None:
        self.sock.close()


async def waiting_events(sockets: list[Any], kind: str, wait_s: float) -> list[dict[str, Any]]:
    """The events of ``kind`` that ``sockets`` have waiting, reading each one for ``wait_s``."""
    found = []
    for ws in sockets:
        with contextlib.suppress(TimeoutError, websockets.ConnectionClosed):
            async with asyncio.timeout(wait_s):
                while True:
                    event = json.loads(await ws.recv())
                    if event["type"] == kind:
                        found.append(event)
    return found


def rss_mib(pid: int) -> float:
    for row in Path(f"/proc/{pid}/status").read_text().splitlines():
        if row.startswith("VmRSS:"):
            return int(row.split()[1]) / 1024
    raise AssertionError("no VmRSS")


# --- 1. one client, however many sockets without the cookie ------------------------------------

@pytest.mark.attack("clients multiplied")
def test_cookieless_sockets_are_one_client_and_a_flood_delays_another_browser_by_at_most_one_run(plain):
    """30 connections without the session cookie queue 4 runs of 2 s each; another browser runs print(1)."""
    async def scenario() -> tuple[int, list[dict], list[dict]]:
        flood, refused = [], 0
        for _ in range(30):
            ws = await websockets.connect(plain.ws_url, max_queue=None)  # reads on: closes at once
            try:
                first = json.loads(await asyncio.wait_for(ws.recv(), 0.5))
                refused += "connections open" in first.get("message", "")
                await ws.close()
            except TimeoutError:
                flood.append(ws)  # accepted, and nothing to say
            except websockets.ConnectionClosed:
                refused += 1
        for c, ws in enumerate(flood):
            for r in range(4):
                await ws.send(json.dumps({"type": "run", "id": f"f{c}-{r}", "fresh": True,
                                          "code": f"import time\ntime.sleep(2)\nprint({c}, {r})"}))
        await asyncio.sleep(1.0)  # the flood is queued and running
        async with websockets.connect(plain.ws_url, additional_headers=plain.browser_headers()) as browser:
            await browser.send(json.dumps({"type": "run", "id": "mine", "code": "print(1)", "fresh": True}))
            mine = await collect(browser, "mine", 240)
        flood_dones = await waiting_events(flood, "done", 1.0)
        await asyncio.gather(*(ws.close() for ws in flood))
        return refused, mine, flood_dones

    refused, mine, flood_dones = asyncio.run(scenario())
    assert done_of(mine)["status"] == "ok"
    positions = [e["position"] for e in mine if e["type"] == "queued"]
    assert not positions or positions[0] <= 2, positions  # behind at most one run of the flood
    assert refused >= 22, refused  # one client: 8 connections at most
    limited = [e for e in flood_dones if e["status"] == "rejected"]
    assert limited and all("limit is 8 per browser" in e["message"] for e in limited)


@pytest.mark.attack("clients multiplied")
def test_sessions_minted_in_bulk_on_one_network_delay_another_network_by_at_most_one_run():
    """Behind a trusted proxy (so two networks can be told apart here), one network starts 40 sessions."""
    with server(["--trusted-proxies", "127.0.0.1"]) as live:
        def cookie(network: str) -> str:
            _, headers, _ = http(live, "GET", "/", headers={"host": f"127.0.0.1:{live.port}",
                                                              "x-forwarded-for": network})
            return headers["set-cookie"].split(";")[0]

        minted = [cookie("198.51.100.7") for _ in range(40)]
        victim = cookie("203.0.113.5")

        async def scenario() -> list[dict]:
            flood = [await websockets.connect(live.ws_url, max_queue=None, additional_headers={
                         "cookie": c, "x-forwarded-for": "198.51.100.7"}) for c in minted]
            try:
                for i, ws in enumerate(flood):
                    for r in range(2):
                        await ws.send(json.dumps({"type": "run", "id": f"m{i}-{r}", "fresh": True,
                                                  "code": f"import time\ntime.sleep(1)\nprint({i}, {r})"}))
                await asyncio.sleep(1.0)
                async with websockets.connect(live.ws_url, additional_headers={
                        "cookie": victim, "x-forwarded-for": "203.0.113.5"}) as ws:
                    await ws.send(json.dumps({"type": "run", "id": "mine", "code": "print(1)", "fresh": True}))
                    return await collect(ws, "mine", 240)
            finally:
                await asyncio.gather(*(ws.close() for ws in flood))

        mine = asyncio.run(scenario())
    assert done_of(mine)["status"] == "ok"
    positions = [e["position"] for e in mine if e["type"] == "queued"]
    assert not positions or positions[0] <= 2, positions  # not behind 40 sessions' runs: behind one at most


@pytest.mark.attack("clients multiplied")
def test_one_sites_ipv6_prefixes_are_one_network_and_cannot_fill_the_queue_against_another():
    """A home, an office or a free tunnel is given a /48 (or a /56 of it): 65,536 /64s. One such site sends
    one run from each of eight /64s of its /48 into a queue of six places; another network's run must get in."""
    with server(["--trusted-proxies", "127.0.0.1", "--queue-limit", "6"]) as live:
        async def scenario() -> tuple[list[dict], list[str]]:
            flood = [await websockets.connect(live.ws_url, additional_headers={
                         "x-forwarded-for": f"2001:db8:aaaa:{i:x}::1"}) for i in range(8)]
            try:
                for i, ws in enumerate(flood):
                    await ws.send(json.dumps({"type": "run", "id": f"v6-{i}", "fresh": True,
                                              "code": f"import time\ntime.sleep(3)\nprint({i})"}))
                await asyncio.sleep(1.5)  # two run, six wait: the queue is full
                async with websockets.connect(live.ws_url, additional_headers={
                        **live.browser_headers(), "x-forwarded-for": "203.0.113.5"}) as ws:
                    await ws.send(json.dumps({"type": "run", "id": "mine", "code": "print(1)", "fresh": True}))
                    mine = await collect(ws, "mine", 240)
                return mine, [e.get("message") or "" for e in await waiting_events(flood, "done", 0.2)]
            finally:
                await asyncio.gather(*(ws.close() for ws in flood))

        mine, shed = asyncio.run(scenario())
    assert done_of(mine)["status"] == "ok", done_of(mine).get("message")
    positions = [e["position"] for e in mine if e["type"] == "queued"]
    assert not positions or positions[0] <= 2, positions  # one site's turn at most, not eight networks' turns
    assert any("to let another user's run in" in m for m in shed), shed


@pytest.mark.attack("clients multiplied")
def test_a_forged_x_forwarded_for_is_not_another_address():
    with server([], workers=0) as live:
        answers = [create_room(live, {"x-forwarded-for": f"198.51.100.{i}", "forwarded": f"for=198.51.100.{i}"})
                   for i in range(11)]
    assert [status for status, _ in answers] == [201] * 10 + [429], answers[-1]


def test_a_trusted_proxy_names_the_client_and_its_https():
    with server(["--trusted-proxies", "127.0.0.1"], workers=0) as live:
        for i in range(11):  # eleven browsers behind the proxy: each has its own budget
            assert create_room(live, {"x-forwarded-for": f"198.51.100.{i}"})[0] == 201
        statuses = [create_room(live, {"x-forwarded-for": f"6.6.6.6, 203.0.113.{9}"})[0] for _ in range(11)]
        assert statuses == [201] * 10 + [429]  # what the client wrote left of the proxy's entry changes nothing
        _, headers, _ = http(live, "GET", "/", headers={"host": f"127.0.0.1:{live.port}",
                                                          "x-forwarded-proto": "https"})
        assert "; Secure" in headers["set-cookie"]
        status, room = create_room(live, {"x-forwarded-proto": "https", "x-forwarded-for": "192.0.2.44"})
        assert status == 201 and room["presenter_url"].startswith("https://")
        # Over https, a page of the same host served over http (anyone on the visitor's network can
        # write one) is another site.
        here = f"127.0.0.1:{live.port}"
        downgraded = {"x-forwarded-proto": "https", "x-forwarded-for": "192.0.2.45", "origin": f"http://{here}"}
        assert create_room(live, downgraded)[0] == 403
        assert create_room(live, downgraded | {"origin": f"https://{here}"})[0] == 201


# --- 2. room codes: right codes always work; guessing is bounded -------------------------------

@pytest.mark.attack("room code guessing")
def test_a_guesser_behind_a_classrooms_address_locks_nobody_out(plain):
    """A guesser sends 200 joins as fast as one socket takes them, the room's right code among them, then
    tries new sockets and the room's page; meanwhile 60 browsers behind the same address join with the right
    code. Before, every one of its joins was looked up (900-1,400 a second) and the planted code joined."""
    status, room = create_room(plain)
    assert status == 201
    guesser = plain.session_cookie()
    classmates = [plain.session_cookie() for _ in range(60)]
    guesses = [f"jax-{ALPHABET[i % 31]}{ALPHABET[i // 31]}ZZZ-ZZZZZ" for i in range(200)]
    guesses[150] = room["room"]

    async def hammer() -> list[dict]:
        async with websockets.connect(plain.ws_url, additional_headers={"cookie": guesser}) as ws:
            for code in guesses:
                await ws.send(json.dumps({"type": "room_join", "room": code}))
            return [json.loads(await ws.recv()) for _ in guesses]

    async def more_sockets() -> list[dict]:
        answers = []
        for _ in range(4):
            async with websockets.connect(plain.ws_url, additional_headers={"cookie": guesser}) as ws:
                for _ in range(5):
                    await ws.send(json.dumps({"type": "room_join", "room": "jax-ZZZZZ-ZZZZZ"}))
                    answers.append(json.loads(await ws.recv()))
        return answers

    async def classmate(cookie: str) -> dict:
        async with websockets.connect(plain.ws_url, additional_headers={"cookie": cookie}) as ws:
            await ws.send(json.dumps({"type": "room_join", "room": room["room"]}))
            return json.loads(await ws.recv())

    async def scenario() -> tuple[list[dict], list[dict], list[dict]]:
        hammered, *joined = await asyncio.gather(hammer(), *map(classmate, classmates))
        return hammered, joined, await more_sockets()

    hammered, joined, more = asyncio.run(scenario())
    assert [answer["type"] for answer in joined] == ["room_state"] * 60
    assert all(answer["type"] == "notice" for answer in hammered + more)  # the planted code did not join
    looked_up = [a for a in hammered + more if "There is no room" in a["message"]]
    assert len(looked_up) <= 10, len(looked_up)  # its socket's 5, then its browser's 10 in all
    assert sum("too fast on this page" in a["message"] for a in hammered) >= 195
    page, _, text = http(plain, "GET", f"/r/{room['room']}", headers={"host": f"127.0.0.1:{plain.port}",
                                                                      "cookie": guesser})
    assert page == 429 and b"tried room codes too often" in text, text[:300]
    page, _, text = http(plain, "GET", f"/r/{room['room']}", headers={"host": f"127.0.0.1:{plain.port}",
                                                                      "cookie": classmates[0]})
    assert page == 200, text[:300]


# --- 3. joins that would amplify memory ----------------------------------------------------------

def room_with_a_big_run(live: LiveServer, lines: int) -> dict[str, Any]:
    """A new room whose presenter ran a program printing ``lines`` KB: what every join is sent."""
    status, room = create_room(live)
    assert status == 201

    async def presenter_run() -> None:
        async with websockets.connect(live.ws_url, max_size=None, additional_headers=live.browser_headers()) as ws:
            await ws.send(json.dumps({"type": "room_join", "room": room["room"], "secret": room["secret"]}))
            await ws.send(json.dumps({"type": "run", "id": "big", "fresh": True,
                                      "code": f"for i in range({lines}):\n    print('x' * 999)"}))
            assert done_of(await collect(ws, "big", 240))["status"] == "ok"

    asyncio.run(presenter_run())
    return room


@pytest.mark.attack("exhaust the server")
def test_a_never_reading_socket_that_rejoins_a_room_cannot_grow_the_server(plain):
    room = room_with_a_big_run(plain, lines=5000)
    before = rss_mib(plain.process.pid)
    hostile = RawSocket(plain)
    assert hostile.status == 101
    try:
        for _ in range(150):  # about 12 KB sent
            hostile.send({"type": "room_join", "room": room["room"]})
            hostile.send({"type": "room_leave"})
        time.sleep(3.0)
        grown = rss_mib(plain.process.pid) - before
    finally:
        hostile.close()
    print(f"server RSS grew {grown:.1f} MiB under 150 join/leave pairs of a never-reading socket")
    # Unbounded, each join queued the ~4 MiB state again (150 pairs: ~600 MiB). Bounded: one state waits,
    # one is being written, whatever the count.
    assert grown < 48, grown


@pytest.mark.attack("exhaust the server")
def test_many_never_reading_sockets_of_one_network_share_one_bound():
    """Each socket's own bound holds, but a network may open many: together they hold no more than the
    network's outbox budget, whatever the number of sockets (the rest are closed, to resync)."""
    with server(["--output-limit-bytes", str(8 << 20), "--max-connections-per-client", "100",
                 "--max-outbox-mb-per-address", "16"]) as live:
        room = room_with_a_big_run(live, lines=4000)
        before = rss_mib(live.process.pid)
        hostile = [RawSocket(live) for _ in range(80)]
        try:
            assert all(socket_.status == 101 for socket_ in hostile)
            for socket_ in hostile:  # each join queues the room's ~4 MiB state for a socket that never reads
                socket_.send({"type": "room_join", "room": room["room"]})
                time.sleep(0.05)  # one at a time: each state is handed to its socket, whose buffer keeps it
            time.sleep(3.0)
            grown = rss_mib(live.process.pid) - before
        finally:
            for socket_ in hostile:
                socket_.close()
    print(f"server RSS grew {grown:.1f} MiB under 80 never-reading sockets of one network in a 4 MiB room")
    # Unbounded by network, each socket held a copy (40 sockets: 211 MiB); counting waiting frames only, the
    # socket buffers' copies were missed (80: 129 MiB). The network's budget is 16 MiB, and the states made and
    # refused on the way leave the allocator's high-water mark 24-42 MiB above the start.
    assert grown < 80, grown


@pytest.mark.attack("exhaust the server")
def test_a_links_page_that_nobody_reads_costs_the_server_a_piece_not_the_page():
    """Any site may frame /e/<id>: twenty requests for a large run's page that never read the answer made the
    server hold twenty copies of it (57 MiB each for a 60 MiB page), each rendered again."""
    with server([], workers=0) as live:
        run = [{"type": "stdout", "text": "x" * 9_000_000}, {"type": "done", "status": "ok"}]
        status, _, answer = http(live, "POST", "/api/snippets", json.dumps({"code": "print(1)", "recorded_run": run}).encode(),
                                 {"host": f"127.0.0.1:{live.port}", "content-type": "application/json"})
        assert status == 201, answer
        snippet_id = json.loads(answer)["id"]
        assert http(live, "GET", f"/e/{snippet_id}")[0] == 200
        before = rss_mib(live.process.pid)
        readers = []
        for _ in range(20):
            reader = socket.socket()
            reader.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
            reader.connect(("127.0.0.1", live.port))
            reader.sendall(f"GET /e/{snippet_id} HTTP/1.1\r\nHost: 127.0.0.1:{live.port}\r\n\r\n".encode())
            readers.append(reader)
        try:
            time.sleep(3.0)
            grown = rss_mib(live.process.pid) - before
            started = time.monotonic()
            assert http(live, "GET", "/healthz")[0] == 200
            health_s = time.monotonic() - started
        finally:
            for reader in readers:
                reader.close()
    print(f"server RSS grew {grown:.1f} MiB under 20 unread requests for a 8.6 MiB page; /healthz in {health_s:.3f} s")
    assert grown < 32 and health_s < 1.0, (grown, health_s)


# --- 4. other sites' posts -----------------------------------------------------------------------

@pytest.mark.attack("cross-site requests")
def test_other_sites_cannot_create_snippets_or_rooms(plain):
    own_host = f"127.0.0.1:{plain.port}"
    bodies = {"/api/snippets": b'{"code": "print(2)"}', "/api/rooms": b'{"program": "print(1)"}'}
    attempts = [
        {"content-type": "text/plain"},  # a "simple" request: no preflight
        {"content-type": "application/x-www-form-urlencoded"},  # an HTML form
        {"content-type": "application/json", "origin": "http://evil.example"},
        {"content-type": "application/json", "origin": "null"},
        {"content-type": "application/json", "sec-fetch-site": "cross-site"},
    ]
    for path in ("/api/snippets", "/api/rooms"):
        for headers in attempts:
            status, _, answer = http(plain, "POST", path, bodies[path], {"host": own_host, **headers})
            assert status in (403, 415), (path, headers, status, answer[:200])
            assert "other sites" in json.loads(answer)["message"]
    # The page's own request (the frontend's fetch) still works.
    status, _, answer = http(plain, "POST", "/api/snippets", b'{"code": "print(\\"mine\\")"}',
                             {"host": own_host, "content-type": "application/json",
                              "origin": f"http://{own_host}", "sec-fetch-site": "same-origin"})
    assert status == 201, answer


@pytest.mark.attack("exhaust the server")
def test_links_and_rooms_are_budgeted_per_network_attempts_included():
    """Links are kept forever and a large one costs a second of the server's parsing: one address could
    store gigabytes and stall the server. Rooms that fail still count (they cost a lookup of their deck)."""
    with server(["--snippets-per-address-per-hour", "3", "--snippet-mb-per-address-per-hour", "1"],
                workers=0) as live:
        own = {"host": f"127.0.0.1:{live.port}", "content-type": "application/json"}
        statuses = [http(live, "POST", "/api/snippets", json.dumps({"code": f"print({i})"}).encode(), own)[0]
                    for i in range(4)]
        assert statuses == [201, 201, 201, 429], statuses
        status, _, answer = http(live, "POST", "/api/snippets", b'{"code": "print(9)"}',
                                 {**own, "x-forwarded-for": "192.0.2.1"})  # not a trusted proxy's word
        assert status == 429 and "3 links" in json.loads(answer)["message"]

    with server(["--snippet-mb-per-address-per-hour", "1"], workers=0) as live:
        own = {"host": f"127.0.0.1:{live.port}", "content-type": "application/json"}
        big = json.dumps({"code": "print(1)", "recorded_run": [{"type": "stdout", "text": "x" * 700_000},
                                                                {"type": "done", "status": "ok"}]})
        assert http(live, "POST", "/api/snippets", big.encode(), own)[0] == 201
        status, _, answer = http(live, "POST", "/api/snippets", big.replace("print(1)", "print(2)").encode(), own)
        assert status == 429 and "MiB" in json.loads(answer)["message"], answer
        # A room whose deck names an unknown snippet fails, and counts against the minute's rooms all the same.
        failed = [http(live, "POST", "/api/rooms", b'{"deck": ["zzzzzzzz"]}', own)[0] for _ in range(12)]
        assert failed[0] == 400 and failed[-1] == 429, failed


# --- 5. DNS rebinding --------------------------------------------------------------------------

@pytest.mark.attack("dns rebinding")
def test_a_rebinding_host_name_gets_nothing(plain):
    evil = {"host": f"evil.example:{plain.port}"}
    status, _, text = http(plain, "GET", "/metrics", headers=evil)
    assert status == 400 and b"--allowed-hosts" in text
    status, _, _ = http(plain, "POST", "/api/rooms", b'{"program": ""}',
                        {**evil, "content-type": "application/json", "origin": f"http://evil.example:{plain.port}"})
    assert status == 400
    socket_ = RawSocket(plain, host=f"evil.example:{plain.port}")
    socket_.close()
    assert socket_.status == 403
    for host in (f"127.0.0.1:{plain.port}", f"localhost:{plain.port}"):
        assert http(plain, "GET", "/metrics", headers={"host": host})[0] == 200
    accepted = RawSocket(plain, host=f"localhost:{plain.port}")
    accepted.close()
    assert accepted.status == 101


# --- 6. the session cookie and https ----------------------------------------------------------

@pytest.mark.attack("cleartext session")
def test_the_cookie_is_secure_only_when_a_trusted_proxy_says_https(plain):
    _, headers, _ = http(plain, "GET", "/", headers={"host": f"127.0.0.1:{plain.port}", "x-forwarded-proto": "https"})
    assert "HttpOnly" in headers["set-cookie"] and "Secure" not in headers["set-cookie"]  # nobody trusted said so
    with server(["--trusted-proxies", "127.0.0.1/32"], workers=0) as live:
        _, headers, _ = http(live, "GET", "/", headers={"host": f"127.0.0.1:{live.port}",
                                                          "x-forwarded-proto": "https"})
    assert "; Secure" in headers["set-cookie"]
