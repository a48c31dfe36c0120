"""A hostile web client against the result cache: another session's result before a second run agreed.

A first run's result answers its own browser session alone (docs/sharing.md, "Who a cached result
answers"). A client tries to be that session, or any session, without its signed cookie: none, a forged
one (the id with a made-up MAC), the id alone, the cookie twice with a forged one first. Each of them
runs the program for real; none is answered with the first run's output.
"""

from __future__ import annotations

import asyncio
import json
import time
import uuid

import pytest
import websockets

from tests.conftest import done_of, output_text
from tests.live_server import LiveServer, collect

# Different in every run (getrandom through ctypes, which no hook sees): a replay shows the first run's.
PRIVATE = """
import ctypes
buffer = ctypes.create_string_buffer(8)
ctypes.CDLL(None).getrandom(buffer, 8, 0)
print(buffer.raw.hex())
"""


def run_with(live: LiveServer, code: str, headers: dict[str, str]) -> list[dict]:
    async def one() -> list[dict]:
        async with websockets.connect(live.ws_url, additional_headers=headers) as ws:
            await ws.send(json.dumps({"type": "run", "id": "r", "code": code}))
            return await collect(ws, "r", 90)

    return asyncio.run(one())


@pytest.mark.attack("result cache")
def test_no_forged_or_missing_cookie_is_answered_with_another_sessions_unverified_result(live):
    code = f"# {uuid.uuid4().hex}\n{PRIVATE}"
    owner = live.session_cookie()  # jaxplay_session=<id>.<mac>
    first = run_with(live, code, {"cookie": owner})
    time.sleep(1.0)  # its entry is written after its done (another run of it now would differ, not wait)
    again = run_with(live, code, {"cookie": owner})
    assert done_of(again).get("cached") is True  # its own session: answered at once
    session_id, mac = owner.split("=", 1)[1].split(".")
    forged_mac = ("0" if mac[0] != "0" else "1") + mac[1:]
    forgeries = {
        "no cookie": {},
        "the id with a forged MAC": {"cookie": f"jaxplay_session={session_id}.{forged_mac}"},
        "the id alone": {"cookie": f"jaxplay_session={session_id}"},
        "the MAC in capitals": {"cookie": f"jaxplay_session={session_id}.{mac.upper()}"},
        "a forged cookie before another session's": {
            "cookie": f"jaxplay_session={session_id}.{forged_mac}; {live.session_cookie()}"},
    }
    for name, headers in forgeries.items():
        events = run_with(live, code, headers)
        assert done_of(events)["status"] == "ok", (name, events[-3:])
        assert not done_of(events).get("cached"), name
        assert output_text(events) != output_text(first), name
