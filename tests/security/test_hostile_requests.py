"""A hostile web client's crafted requests and frames against a real server (no worker needed).

Each test is one class: frames far larger than any message, other sites spending an address's
budgets through the visitor's browser, and request bodies built to break the parser.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator

import pytest
import websockets

from tests.live_server import LiveServer
from tests.security.test_client_attacks import http, rss_mib, server, waiting_events

MAX_CODE_BYTES = 256 * 1024  # the shipped --max-code-bytes


@pytest.fixture(scope="module")
def bare() -> Iterator[LiveServer]:
    """As shipped, without a worker: everything here is answered before a run would be queued."""
    with server(["--new-sessions-per-address-per-hour", "5"], workers=0) as live:
        yield live


# --- oversized frames --------------------------------------------------------------------------

@pytest.mark.attack("exhaust the server")
def test_a_frame_far_larger_than_any_message_is_refused_before_it_is_held(bare):
    """Three sockets each send a 48 MiB run frame (the largest legal frame is ~1.5 MiB)."""
    huge = json.dumps({"type": "run", "id": "huge", "code": "#" * (48 << 20)})
    # Just over the code limit, every byte escaped (six bytes of frame each): still answered by its id.
    escaped = json.dumps({"type": "run", "id": "escaped", "code": "\x01" * (MAX_CODE_BYTES + 1)})

    async def scenario() -> tuple[list[int | None], dict, float]:
        before = rss_mib(bare.process.pid)
        grown = 0.0
        sockets = [await websockets.connect(bare.ws_url, max_size=None, write_limit=1 << 30) for _ in range(3)]
        closes: list[int | None] = []

        async def send_huge(ws: websockets.ClientConnection) -> None:
            try:
                await ws.send(huge)
                closes.append(json.loads(await asyncio.wait_for(ws.recv(), 60)).get("type"))
            except websockets.ConnectionClosed as closed:
                closes.append(closed.rcvd.code if closed.rcvd else None)

        sending = asyncio.gather(*(send_huge(ws) for ws in sockets))
        while not sending.done():
            grown = max(grown, rss_mib(bare.process.pid) - before)
            await asyncio.sleep(0.05)
        await sending
        async with websockets.connect(bare.ws_url, max_size=None) as ws:
            await ws.send(escaped)
            answer = json.loads(await asyncio.wait_for(ws.recv(), 60))
        return closes, answer, grown

    closes, answer, grown = asyncio.run(scenario())
    print(f"server RSS grew {grown:.1f} MiB while three sockets sent 48 MiB frames")
    assert closes == [1009] * 3, closes  # "message too big": closed unread
    assert grown < 64, grown  # held in full, three frames cost ~150 MiB of text, and as much again parsed
    assert (answer["type"], answer["id"], answer["status"]) == ("done", "escaped", "rejected"), answer
    assert "Shorten the program" in answer["message"]


# --- other sites spending a network's budgets ------------------------------------------------------

@pytest.mark.attack("cross-site requests")
def test_another_sites_images_and_frames_do_not_spend_the_networks_new_sessions():
    """A page elsewhere, open in one browser of a classroom, loads the playground as images and frames: a
    script does that a thousand times a second. The class's newcomers must still get sessions of their own."""
    with server(["--new-sessions-per-address-per-hour", "5"], workers=0) as live:
        own_host = f"127.0.0.1:{live.port}"
        foreign = [
            {"sec-fetch-site": "cross-site", "sec-fetch-mode": "no-cors", "sec-fetch-dest": "image"},
            {"sec-fetch-site": "cross-site", "sec-fetch-mode": "navigate", "sec-fetch-dest": "iframe"},
            {"sec-fetch-site": "cross-site", "sec-fetch-mode": "cors", "sec-fetch-dest": "empty"},
        ]
        given = [http(live, "GET", "/", headers={"host": own_host, **headers})[1].get("set-cookie")
                 for headers in foreign * 3]
        cookies = []
        for visit in ({"sec-fetch-site": "none", "sec-fetch-mode": "navigate", "sec-fetch-dest": "document"},
                      {"sec-fetch-site": "cross-site", "sec-fetch-mode": "navigate", "sec-fetch-dest": "document"},
                      {}):  # typed in, a link followed from elsewhere, a browser that sends no Sec-Fetch-*
            _, answer, _ = http(live, "GET", "/", headers={"host": own_host, **visit})
            cookies.append(answer.get("set-cookie", ""))
    assert all(c.startswith("jaxplay_session=") for c in cookies), cookies
    assert given == [None] * 9, given  # a cookie in such an answer never comes back (SameSite=Lax) anyway


# --- bodies built to break the parser ----------------------------------------------------------------

@pytest.mark.attack("malformed input")
def test_bodies_nested_deep_or_holding_half_a_character_get_a_clear_answer(bare):
    """Nesting past any parser's stack, and a lone UTF-16 surrogate (``\\ud800``: valid JSON, no text: no
    database stores it) in a room's program, a run's code and a presenter's edit. (A snippet keeps what it
    is given, surrogates included: a run's recorded output may hold them.)"""
    own = {"host": f"127.0.0.1:{bare.port}", "content-type": "application/json"}
    deep = b'{"program": "x", "deck": ' + b"[" * 100_000 + b"]" * 100_000 + b"}"
    half = rb'"print(\"\ud800\")"'
    for path, body in (("/api/rooms", deep), ("/api/rooms", b'{"program": ' + half + b"}")):
        status, _, answer = http(bare, "POST", path, body, own)
        assert status == 400, (path, body[:40], status, answer[:200])
        assert json.loads(answer)["message"], answer
    room = json.loads(http(bare, "POST", "/api/rooms", b'{"program": "print(1)"}', own)[2])

    async def scenario() -> tuple[dict, dict, dict]:
        async with websockets.connect(bare.ws_url) as ws:
            await ws.send('{"type": "run", "id": "half", "code": ' + half.decode() + "}")
            run = json.loads(await asyncio.wait_for(ws.recv(), 30))
            await ws.send(json.dumps({"type": "room_join", "room": room["room"], "secret": room["secret"]}))
            assert json.loads(await asyncio.wait_for(ws.recv(), 30))["type"] == "room_state"
            await ws.send('{"type": "room_edit", "code": ' + half.decode() + "}")
            edit = json.loads(await asyncio.wait_for(ws.recv(), 30))
        async with websockets.connect(bare.ws_url) as ws:
            await ws.send(json.dumps({"type": "room_join", "room": room["room"]}))
            seen = json.loads(await asyncio.wait_for(ws.recv(), 30))
        return run, edit, seen

    run, edit, seen = asyncio.run(scenario())
    assert (run["type"], run["id"], run["status"]) == ("done", "half", "rejected"), run
    assert "surrogate" in run["message"], run
    assert edit["type"] == "notice" and "surrogate" in edit["message"], edit
    assert seen["code"] == "print(1)", seen  # the room kept what it could store
    assert "saving a room failed" not in bare.log_path.read_text()


# --- run frames whose run must still end ----------------------------------------------------------------

@pytest.mark.attack("malformed input")
def test_a_run_frame_with_an_overlong_id_or_in_binary_is_still_answered_by_its_id(bare):
    """The id can be read, so the client's run must end: a ``done`` (rejected) for that id, not an id-less notice."""
    overlong, other = "L" * 129, "M" * 300
    frames: list[str | bytes] = [
        json.dumps({"type": "run", "id": overlong, "code": "print(1)"}),
        '{"type": "run", "id": "' + other + '", "code": "print(1)", "timeout_s": NaN}',
        json.dumps({"type": "passes", "id": "binary", "code": "print(1)", "key": "1.0", "fn": "f"}).encode(),
        b'{"type": "run", "id": "not-utf-8", "code": "print(\xe9)"}',  # a byte of latin-1, outside the id
        '\ufeff{"type": "run", "id": "bom", "code": "print(1)"}',  # a byte-order mark before the object
    ]

    async def exchange() -> list[dict]:
        async with websockets.connect(bare.ws_url) as ws:
            replies = []
            for frame in frames:
                await ws.send(frame)
                replies.append(json.loads(await asyncio.wait_for(ws.recv(), 30)))
            return replies

    replies = asyncio.run(exchange())
    assert [(r["type"], r.get("id"), r.get("status")) for r in replies] == [
        ("done", overlong, "rejected"), ("done", other, "rejected"), ("done", "binary", "rejected"),
        ("done", "not-utf-8", "rejected"), ("done", "bom", "rejected")], replies
    assert "must be 1 to 128 characters" in replies[0]["message"] and "Binary frames" in replies[2]["message"]


# --- a room filled by one network ----------------------------------------------------------------------

@pytest.mark.attack("clients multiplied")
def test_one_network_filling_a_room_locks_out_neither_its_presenter_nor_another_network():
    """A room's code is public (it is on the projector). One network fills the room's places with sockets before
    the class arrives; the presenter and the attendees of another network must still get in."""
    with server(["--trusted-proxies", "127.0.0.1", "--max-room-followers", "6"], workers=0) as live:
        _, _, body = http(live, "POST", "/api/rooms", b'{"program": "print(1)"}',
                          {"host": f"127.0.0.1:{live.port}", "content-type": "application/json"})
        room = json.loads(body)

        async def join(network: str, secret: str | None = None) -> tuple[websockets.ClientConnection, dict]:
            ws = await websockets.connect(live.ws_url, additional_headers={"x-forwarded-for": network})
            await ws.send(json.dumps({"type": "room_join", "room": room["room"], "secret": secret}))
            return ws, json.loads(await asyncio.wait_for(ws.recv(), 30))

        async def scenario() -> tuple[list[dict], dict, dict, dict, list[dict]]:
            flood = [await join("198.51.100.7") for _ in range(6)]
            presenter = await join("203.0.113.9", room["secret"])
            attendee = await join("203.0.113.5")
            more = await join("198.51.100.7")  # the flooding network, now holding the most: no place for it
            let_go = await waiting_events([ws for ws, _ in flood], "notice", 0.5)
            for ws, _ in [*flood, presenter, attendee, more]:
                await ws.close()
            return [answer for _, answer in flood], presenter[1], attendee[1], more[1], let_go

        flood, presenter, attendee, more, let_go = asyncio.run(scenario())
    assert all(a["type"] == "room_state" for a in flood), flood
    assert (presenter["type"], presenter.get("role")) == ("room_state", "presenter"), presenter
    assert attendee["type"] == "room_state", attendee
    assert more["type"] == "notice" and "is full" in more["message"], more
    assert len(let_go) == 2 and all("is full" in n["message"] for n in let_go), let_go


# --- the workers' listener, from a web page ------------------------------------------------------------

@pytest.mark.attack("cross-site requests")
def test_a_web_page_cannot_open_the_workers_listener(bare):
    """Websockets have no CORS: any page open in a browser on the server's host reaches the workers' loopback
    listener, whose frames may be 256 MiB before the token is read. Browsers always send ``Origin``; workers
    never do."""
    async def scenario() -> tuple[int | None, float]:
        before = rss_mib(bare.process.pid)
        try:
            async with websockets.connect(bare.worker_url, max_size=None, write_limit=1 << 30,
                                          additional_headers={"origin": "http://evil.example"}) as ws:
                await ws.send(json.dumps({"type": "hello", "token": "guess", "padding": "#" * (48 << 20)}))
                await asyncio.wait_for(ws.recv(), 60)
        except websockets.InvalidStatus as refused:
            return refused.response.status_code, rss_mib(bare.process.pid) - before
        except websockets.ConnectionClosed:
            pass
        return None, rss_mib(bare.process.pid) - before

    status, grown = asyncio.run(scenario())
    print(f"server RSS grew {grown:.1f} MiB")
    assert status == 403, (status, grown)
