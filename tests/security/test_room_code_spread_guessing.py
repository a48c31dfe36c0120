"""A room-code guesser that spreads itself: many sessions it mints, many sockets, the room pages, sockets
without the cookie and the presenter's join, from addresses of one IPv6 site behind a trusted proxy.

docs/security.md bounds one network's lookups of unknown codes at 300 an hour, and then its clients that
missed none at one try each, 300 an hour more: 600 in all, whatever it spreads over. A /48 is one network
(server/clients/identity.py), however many /64s its addresses come from.
"""

from __future__ import annotations

import asyncio
import json
import urllib.request

import pytest
import websockets

from tests.live_server import LiveServer
from tests.security.test_client_attacks import create_room, http, server

SITE = "2001:db8:77:{:x}::{:x}"  # one /48, a new /64 and host for each of the guesser's requests
LOOKED_UP = ("There is no room", "No room ")  # an unknown code's answers (with a secret, the second)


def minted_session(live: LiveServer, address: str) -> str:
    request = urllib.request.Request(live.http_url + "/", headers={"x-forwarded-for": address})
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            cookie = response.headers["set-cookie"]
    except urllib.error.HTTPError as page:  # 503 without a built page is a page too
        cookie = page.headers["set-cookie"]
    return cookie.split(";")[0] if cookie else ""


@pytest.mark.attack("room code guessing")
def test_a_site_spread_over_sessions_sockets_pages_and_its_64s_gets_at_most_600_lookups():
    with server(["--trusted-proxies", "127.0.0.1"], workers=0) as live:
        status, room = create_room(live, {"x-forwarded-for": "198.51.100.9"})
        assert status == 201
        cookies = [minted_session(live, SITE.format(i, i)) for i in range(90)]
        assert all(cookies), cookies[:3]
        wrong = [f"jax-{a}{b}ZZZ-ZZZZZ" for a in "ABCDEFGHJK" for b in "ABCDEFGHJKLMNPQ"]

        async def guesses(cookie: str, first: int, address: str) -> list[str]:
            headers = {"x-forwarded-for": address, **({"cookie": cookie} if cookie else {})}
            answers = []
            for offset in range(0, 12, 4):  # a new socket every four tries
                async with websockets.connect(live.ws_url, additional_headers=headers) as ws:
                    for k in range(4):
                        code = wrong[(first + offset + k) % len(wrong)]
                        secret = {"secret": "guess"} if k == 3 else {}  # a presenter's join, bounded by misses
                        await ws.send(json.dumps({"type": "room_join", "room": code, **secret}))
                        answers.append(json.loads(await ws.recv()).get("message", ""))
            return answers

        async def scenario() -> list[str]:
            answers: list[str] = []
            for i, cookie in enumerate(cookies):
                answers += await guesses(cookie, i * 12, SITE.format(0x1000 + i, i))
            for i in range(10):  # sockets without the cookie: the site's address client
                answers += await guesses("", i * 7, SITE.format(0x2000 + i, i))
            return answers

        answers = asyncio.run(scenario())
        pages = [http(live, "GET", f"/r/{wrong[i % len(wrong)]}",
                      headers={"host": f"127.0.0.1:{live.port}", "cookie": cookies[i % len(cookies)],
                               "x-forwarded-for": SITE.format(0x3000 + i, i)}) for i in range(60)]
        looked_up = sum(answer.startswith(LOOKED_UP) for answer in answers)
        looked_up += sum(b"There is no room" in body for _, _, body in pages)
        assert len(answers) + len(pages) == 1260
        assert 300 <= looked_up <= 600, looked_up
        assert all(status < 500 for status, _, _ in pages)
        # Another site's attendee still joins with the right code.
        classmate = minted_session(live, "2001:db8:99::1")

        async def join() -> dict:
            async with websockets.connect(live.ws_url, additional_headers={
                    "cookie": classmate, "x-forwarded-for": "2001:db8:99::1"}) as ws:
                await ws.send(json.dumps({"type": "room_join", "room": room["room"]}))
                return json.loads(await ws.recv())

        assert asyncio.run(join())["type"] == "room_state"
