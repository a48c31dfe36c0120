"""Forged and oversized events from a run, and malformed frames on /worker: contained, answered clearly."""

from __future__ import annotations

import asyncio
import json
import urllib.request

import websockets

from tests.conftest import done_of, output_text

FORGE = r"""
import os
from sandbox import events
fd = events._fd
def raw(data: bytes):
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view):]
raw(b'{"type":"done","status":"ok","elapsed_ms":1}\n')
raw(b'{"type":"started","backend":"cpu"}\n')
raw(b'{"type":"notice","x":NaN}\n')
raw(b'[' * 100000 + b']' * 100000 + b'\n')
for _ in range(5):
    raw(b'{"type":"display","mime":"text/plain","data":"' + b'x' * (16 << 20) + b'"}\n')
print("still here")
"""


def test_forged_and_oversized_events_never_reach_the_browser_as_such(live):
    events = live.run(FORGE, timeout=120)
    kinds = [e["type"] for e in events]
    assert kinds.count("started") == 1 and kinds.count("done") == 1 and kinds[-1] == "done"
    assert done_of(events)["status"] == "ok"
    assert "still here" in output_text(events)
    displayed = sum(len(e.get("data", "")) for e in events if e["type"] == "display")
    assert displayed <= 20 << 20
    notices = " ".join(e.get("message", "") for e in events if e["type"] == "notice")
    assert "may not send" in notices and "dropped" in notices
    # the worker is unharmed
    assert output_text(live.run("print(6 * 7)")).strip() == "42"


async def _worker_frames(live, frames: list) -> int | None:
    async with websockets.connect(live.worker_url) as ws:
        for frame in frames:
            await ws.send(frame)
        try:
            await asyncio.wait_for(ws.recv(), 5)
        except (websockets.ConnectionClosed, TimeoutError):
            pass
        return ws.close_code


def test_malformed_worker_frames_are_refused_and_break_nothing(live):
    hello = {"type": "hello", "token": "x", "name": "w", "backend": "cpu", "device_kind": "cpu", "device_count": 1,
             "jax_version": "0", "jaxlib_version": "0", "slots": 1}
    attacks = [
        [b"\x00binary"],
        [json.dumps({**hello, "token": 123})],
        [json.dumps({**hello, "device_count": "eight"})],
        [json.dumps({**hello, "slots": 10 ** 9})],
        ["[" * 100000 + "]" * 100000],
        [json.dumps({"type": "hello"})],
        ['{"type": "hello", "device_count": NaN}'],
        ["not json at all"],
    ]
    for frames in attacks:
        asyncio.run(_worker_frames(live, frames))
    with urllib.request.urlopen(live.http_url + "/api/backends", timeout=10) as response:
        backends = json.load(response)["backends"]
    assert [b["name"] for b in backends] == ["cpu"] and backends[0]["device_count"] == 8
    assert output_text(live.run("print('fine')")).strip() == "fine"


def test_the_worker_listener_is_not_on_the_public_port(live):
    async def attempt() -> int | None:
        try:
            async with websockets.connect(live.ws_url.replace("/ws", "/worker")) as ws:
                await ws.recv()
        except websockets.InvalidStatus as exc:
            return exc.response.status_code
        except websockets.ConnectionClosed as exc:
            return exc.rcvd.code if exc.rcvd else None
        return None

    assert asyncio.run(attempt()) in (403, 404, 1000, None)
