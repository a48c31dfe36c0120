"""Forged and oversized events from a run, and malformed frames on /worker: contained, answered clearly."""

from __future__ import annotations

import asyncio
import json
import time
import urllib.error
import urllib.request

import pytest
import websockets

from tests import host_processes
from tests.conftest import done_of, output_text
from tests.live_server import LiveServer

FORGE = r"""
import os
from jaxplay.sandbox.output import events
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


@pytest.mark.attack("forged events")
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


CLAIM_ENDED = r"""
import os, time
from jaxplay.sandbox.output import events
fd = events._fd
os.write(fd, b'{{"type":"ended","returncode":0}}\n')  # what an honest program's end once looked like
print("said it ended", flush=True)
null = os.open("/dev/null", os.O_WRONLY)
for target in (1, 2, fd):
    os.dup2(null, target)
{then}
"""


@pytest.mark.attack("forged events")
def test_a_run_that_says_it_ended_gets_the_status_of_its_real_exit(live):
    """The worker reports a run's status from the kernel (its init reaps it), never from the program."""
    code = CLAIM_ENDED.format(then="raise ValueError('and then it failed')")
    events = live.run(code)
    done = done_of(events)
    assert done["status"] == "crashed" and "exit code 1" in done["message"], done
    assert "said it ended" in output_text(events)
    assert "ended" not in [e["type"] for e in events if e["type"] != "notice"]
    again = done_of(live.run(code))  # not cached: an answer from the cache carries cached=true
    assert again["status"] == "crashed" and not again.get("cached"), again
    exits = done_of(live.run(CLAIM_ENDED.format(then="os._exit(3)")))
    assert exits["status"] == "crashed" and "exit code 3" in exits["message"], exits


@pytest.mark.attack("forged events")
def test_a_run_that_says_it_ended_and_runs_on_ends_at_its_deadline(tmp_path):
    # One slot: the next run must wait for the liar's process to be gone, and not for 600 s.
    server = LiveServer(tmp_path / "data", extra_args=["--slots", "1"])
    try:
        server.wait_ready()
        events = server.run(CLAIM_ENDED.format(then="time.sleep(600)"), timeout=60, timeout_s=3)
        assert done_of(events)["status"] == "timeout"
        assert "said it ended" in output_text(events)
        after = server.run("print(6 * 7)", timeout=60)
        assert done_of(after)["status"] == "ok" and output_text(after).strip() == "42"
        again = server.run("import os\nprint([open(f'/proc/{p}/comm').read().strip() for p in os.listdir('/proc') "
                           "if p.isdigit() and int(p) not in (1, os.getpid())])")
        assert output_text(again).strip() == "['jaxplay-holder']"  # nothing of the liar survived
    finally:
        server.stop()


async def _worker_frames(live, frames: list) -> int | None:
    async with websockets.connect(live.worker_url) as ws:
        for frame in frames:
            await ws.send(frame)
        try:
            await asyncio.wait_for(ws.recv(), 5)
        except (websockets.ConnectionClosed, TimeoutError):
            pass
        return ws.close_code


@pytest.mark.attack("malformed input")
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


@pytest.mark.attack("keys and privileges")
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


@pytest.mark.attack("malformed input")
def test_deeply_nested_or_non_finite_json_gets_a_clear_answer(live):
    deep = "[" * 100000 + "]" * 100000
    request = urllib.request.Request(live.http_url + "/api/snippets", data=deep.encode(),
                                     headers={"Content-Type": "application/json"})
    try:
        urllib.request.urlopen(request, timeout=10)
        raise AssertionError("accepted")
    except urllib.error.HTTPError as exc:
        assert exc.code == 400 and "nested deeper" in json.load(exc)["message"]

    async def frames() -> list[dict]:
        async with websockets.connect(live.ws_url) as ws:
            replies = []
            for frame in (deep, '{"type":"run","id":"n","code":"print(1)","timeout_s":NaN}'):
                await ws.send(frame)
                replies.append(json.loads(await asyncio.wait_for(ws.recv(), 10)))
            await ws.send(json.dumps({"type": "run", "id": "ok", "code": "print(1)"}))  # still usable
            while (event := json.loads(await asyncio.wait_for(ws.recv(), 60)))["type"] != "done":
                pass
            return [*replies, event]

    deep_reply, nan_reply, done = asyncio.run(frames())
    assert deep_reply["type"] == "notice" and "nested deeper" in deep_reply["message"]
    assert done["status"] == "ok"
    # A run frame that cannot be parsed but whose id can be read ends that run, so the client's run ends.
    assert nan_reply["type"] == "done" and nan_reply["id"] == "n" and nan_reply["status"] == "rejected", nan_reply
    assert "NaN" in nan_reply["message"]


@pytest.mark.attack("malformed input")
def test_an_unparseable_run_frame_with_a_readable_id_is_rejected_by_that_id(live):
    frames = {
        "inf": '{"type":"run","id":"inf","code":"print(1)","timeout_s":Infinity}',
        "deep": '{"type":"run","id":"deep","code":"print(1)","x":' + "[" * 5000 + "]" * 5000 + "}",
        "cut": '{"type":"run","id":"cut","code":"print(',
    }

    async def exchange() -> dict[str, dict]:
        async with websockets.connect(live.ws_url) as ws:
            for frame in frames.values():
                await ws.send(frame)
            replies = {}
            while len(replies) < len(frames):
                reply = json.loads(await asyncio.wait_for(ws.recv(), 10))
                replies[reply.get("id")] = reply
            return replies

    replies = asyncio.run(exchange())
    for run_id in frames:
        assert replies[run_id]["type"] == "done" and replies[run_id]["status"] == "rejected", replies[run_id]
        assert "Malformed JSON" in replies[run_id]["message"]


@pytest.mark.attack("malformed input")
def test_local_workers_do_not_outlive_a_killed_server(tmp_path):
    import os
    import signal

    from tests.live_server import LiveServer

    server = LiveServer(tmp_path)
    try:
        server.wait_ready()
        workers = [proc.pid for proc in host_processes.matching(f"{server.worker_port}/worker")]
        assert workers
        os.kill(server.process.pid, signal.SIGKILL)
        deadline = time.monotonic() + 15
        while time.monotonic() < deadline and any(map(host_processes.is_alive, workers)):
            time.sleep(0.2)
        assert not [pid for pid in workers if host_processes.is_alive(pid)]
    finally:
        server.stop()


JUNK_THEN_AN_ERROR = r"""
import os
from jaxplay.sandbox.output import events
for junk in (b'{"type":"notice","message":1e999}', b'{"type":"notice","m":' + b'[' * 63 + b']' * 63 + b'}',
             b'\xff garbage', b'[[[['):
    os.write(events._fd, junk + b"\n")
print("after the junk", flush=True)
raise ValueError("a legitimate error")
"""


@pytest.mark.attack("forged events")
def test_junk_on_the_event_channel_costs_nothing_that_follows(live):
    events = live.run(JUNK_THEN_AN_ERROR)
    done = done_of(events)
    assert done["status"] == "error", done
    assert output_text(events) == "after the junk\n"
    errors = [e for e in events if e["type"] == "error"]
    assert len(errors) == 1 and errors[0]["message"] == "a legitimate error" and errors[0]["line"] == 8


MANY_REFUSED_KINDS = r"""
import os, time
from jaxplay.sandbox.output import events
os.write(events._fd, b"".join(b'{"type":"t%06d"}\n' % i for i in range(5000)))  # a kind nobody may send, each new
os.write(events._fd, b"".join(b'{"type":"error","x":[%s]}\n' % (b"1," * i + b"1e999") for i in range(2000)))
time.sleep(0.5)
print("after the refusals", flush=True)
"""


@pytest.mark.attack("forged events")
def test_refused_events_cost_one_notice_per_reason_however_they_vary(live):
    """A notice is not output: it bypasses the output cap and reaches a room's every follower. A run that varies
    what it sends (a new type name each line, numbers of new sizes) must still get one notice per reason."""
    events = live.run(MANY_REFUSED_KINDS, timeout=120)
    assert done_of(events)["status"] == "ok"
    assert output_text(events) == "after the refusals\n"
    notices = [e["message"] for e in events if e["type"] == "notice"]
    assert len(notices) <= 3, (len(notices), notices[:3])
    assert any("may not send" in n for n in notices) and any("non-finite" in n for n in notices), notices
