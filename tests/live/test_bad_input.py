"""Bad input over /ws gets a clear answer, and the connection keeps working."""

from __future__ import annotations

import asyncio
import json

import websockets

from tests.conftest import collect, collect_many, done_of, output_text


async def exchange(live, frames, *, expect: int):
    async with websockets.connect(live.ws_url) as ws:
        for frame in frames:
            await ws.send(frame)
        answers = [json.loads(await asyncio.wait_for(ws.recv(), 30)) for _ in range(expect)]
        # the same connection still runs code afterwards
        await ws.send(json.dumps({"type": "run", "id": "after", "code": "print('still here')"}))
        after = await collect(ws, "after", 60)
        assert done_of(after)["status"] == "ok" and output_text(after) == "still here\n"
        return answers


def one(live, frame):
    return asyncio.run(exchange(live, [frame], expect=1))[0]


def test_malformed_json(live):
    answer = one(live, "{not json")
    assert answer["type"] == "notice" and "Malformed JSON" in answer["message"]


def test_binary_frame(live):
    answer = one(live, b"\x00\x01binary")
    assert answer["type"] == "notice" and "Binary frames" in answer["message"]


def test_unknown_type(live):
    answer = one(live, json.dumps({"type": "explode", "id": "u1"}))
    assert answer["type"] == "notice" and "'run', 'cancel' or 'passes'" in answer["message"]


def test_missing_and_wrong_typed_fields(live):
    assert "'code' is required" in one(live, json.dumps({"type": "run", "id": "f1"}))["message"]
    answer = one(live, json.dumps({"type": "run", "id": "f2", "code": 5}))
    assert answer["type"] == "done" and answer["status"] == "rejected" and "'code'" in answer["message"]
    answer = one(live, json.dumps({"type": "run", "id": "f3", "code": "1", "timeout_s": "soon"}))
    assert answer["status"] == "rejected" and "timeout_s" in answer["message"]
    assert "'id' is required" in one(live, json.dumps({"type": "run", "code": "1"}))["message"]


def test_code_over_the_size_limit(live):
    answer = one(live, json.dumps({"type": "run", "id": "big", "code": "#" * (256 * 1024 + 1)}))
    assert answer["status"] == "rejected" and "256 KiB" in answer["message"]


def test_unknown_backend(live):
    answer = one(live, json.dumps({"type": "run", "id": "b1", "code": "1", "backend": "quantum"}))
    assert answer["status"] == "rejected" and "'quantum'" in answer["message"] and "cpu" in answer["message"]


def test_timeout_over_the_server_limit(live):
    answer = one(live, json.dumps({"type": "run", "id": "t1", "code": "1", "timeout_s": 10_000}))
    assert answer["status"] == "rejected" and "at most" in answer["message"]


def test_duplicate_run_id(live):
    slow = json.dumps({"type": "run", "id": "dup", "code": "import time; time.sleep(1)"})

    async def scenario():
        async with websockets.connect(live.ws_url) as ws:
            await ws.send(slow)
            await ws.send(slow)
            events = await collect(ws, "dup", 30)
            return events

    events = asyncio.run(scenario())
    notices = [e for e in events if e["type"] == "notice"]
    assert notices and "already in flight" in notices[0]["message"]
    assert [e["type"] for e in events].count("done") == 1 and done_of(events)["status"] == "ok"


def test_more_than_four_runs_in_flight(live):
    async def scenario():
        async with websockets.connect(live.ws_url) as ws:
            for i in range(5):
                await ws.send(json.dumps({"type": "run", "id": f"r{i}", "code": "import time; time.sleep(0.5)"}))
            return await collect_many(ws, [f"r{i}" for i in range(5)], 60)

    runs = list(asyncio.run(scenario()).values())
    assert [done_of(r)["status"] for r in runs[:4]] == ["ok"] * 4
    assert done_of(runs[4])["status"] == "rejected" and "4 runs in flight" in done_of(runs[4])["message"]


def test_cancel_of_an_unknown_run(live):
    answer = one(live, json.dumps({"type": "cancel", "id": "nobody"}))
    assert answer["type"] == "notice" and "No run with id 'nobody'" in answer["message"]


def test_only_this_servers_pages_may_open_the_socket(live):
    async def opens(origin: str | None) -> bool:
        headers = {"Origin": origin} if origin else {}
        try:
            async with websockets.connect(live.ws_url, additional_headers=headers) as ws:
                await ws.send(json.dumps({"type": "cancel", "id": "x"}))
                return "notice" in await ws.recv()
        except websockets.InvalidStatus as exc:
            assert exc.response.status_code == 403
            return False

    assert asyncio.run(opens(None))
    assert asyncio.run(opens(live.http_url))
    assert not asyncio.run(opens("null"))
    assert not asyncio.run(opens("http://evil.example"))
