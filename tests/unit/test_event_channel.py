"""The worker's gate on a run's event channel: allowed types, budgets, depth, finite numbers, linear cost."""

from __future__ import annotations

import asyncio
import json
import os
import time

import pytest

from jaxplay import worker_protocol as wp
from jaxplay.sandbox.output import event_channel as ec
from jaxplay.sandbox.output.relay import OutputRelay


def line(event) -> bytes:
    return json.dumps(event).encode()


@pytest.mark.attack("forged events")
def test_only_events_a_run_may_send_pass():
    gate = ec.EventGate()
    assert gate.admit(line({"type": "display", "data": "x"}))["type"] == "display"
    for forged in ("done", "started", "queued", "stdout", "exited", "room_state"):
        with pytest.raises(ec.EventRefused):
            gate.admit(line({"type": forged, "status": "ok"}))
    with pytest.raises(ec.EventRefused):
        gate.admit(line({"type": "probe"}))  # only the worker's own probe run may send it
    assert ec.EventGate(allow_probe=True).admit(line({"type": "probe"}))


@pytest.mark.parametrize("text", [b'{"type":"notice","x":NaN}', b'{"type":"notice","x":Infinity}',
                                  b"[" * 5000 + b"]" * 5000, b'{"type":"notice","x":' + b"[" * 100 + b"]" * 100 + b"}",
                                  b"not json", b'"just a string"'])
@pytest.mark.attack("forged events")
def test_malformed_or_hostile_lines_are_refused_not_raised(text):
    with pytest.raises(ec.EventRefused):
        ec.EventGate().admit(text)


@pytest.mark.attack("oversized events")
def test_budgets_per_type_and_in_total():
    gate = ec.EventGate()
    chunk = line({"type": "display", "data": "x" * (4 << 20)})
    admitted = 0
    with pytest.raises(ec.EventRefused):
        for _ in range(10):
            gate.admit(chunk)
            admitted += 1
    assert admitted * len(chunk) <= ec.RUN_EVENT_BUDGETS["display"]
    with pytest.raises(ec.EventRefused):
        ec.EventGate().admit(line({"type": "display", "data": "x" * (ec.MAX_EVENT_BYTES + 1)}))


@pytest.mark.attack("oversized events")
def test_a_flood_of_events_is_rate_limited():
    gate = ec.EventGate()
    small = line({"type": "notice", "message": "x"})
    refused = 0
    for _ in range(ec.EVENT_BURST + 500):
        try:
            gate.admit(small)
        except ec.EventRefused:
            refused += 1
    assert refused > 0


@pytest.mark.attack("oversized events")
def test_one_huge_line_costs_linear_time_and_bounded_memory():
    """96 MiB written in 64 KiB reads: the relay scans each byte once and keeps at most one event's worth."""
    sent: list[dict] = []

    async def scenario() -> float:
        relay = OutputRelay(sent.append, 1 << 20)
        r_out, w_out = os.pipe()
        r_err, w_err = os.pipe()
        r_ev, w_ev = os.pipe()
        relay.start(r_out, r_err, r_ev)
        for fd in (w_out, w_err):
            os.close(fd)
        payload = b'{"type":"display","data":"' + b"x" * (96 << 20) + b'"}\n' + line({"type": "notice", "message": "after"}) + b"\n"
        started = time.perf_counter()

        async def write() -> None:
            view = memoryview(payload)
            while view:
                await asyncio.sleep(0)
                try:
                    written = os.write(w_ev, view[: 1 << 16])
                except BlockingIOError:
                    continue
                view = view[written:]
            os.close(w_ev)

        os.set_blocking(w_ev, False)
        await write()
        await relay.drained(10)
        assert len(relay._event_buffer) == 0
        return time.perf_counter() - started

    elapsed = asyncio.run(scenario())
    kinds = [e["type"] for e in sent]
    assert "display" not in kinds
    assert any(e["type"] == "notice" and "size limit" in e["message"] for e in sent)
    assert any(e.get("message") == "after" for e in sent)  # the line after the huge one still arrives
    assert elapsed < 20  # was ~8 CPU-seconds of rescanning per 96 MiB line before; generous on a loaded host


LEGITIMATE = {"type": "notice", "level": "info", "message": "still heard"}


@pytest.mark.parametrize("junk", [
    b'{"type":"notice","message":1e999}',  # parses as infinity without spelling it
    b'{"type":"notice","message":-1e400}',
    b'{"type":"notice","message":' + b"[" * 63 + b"]" * 63 + b"}",  # within the gate, one level over the server's
    b'{"type":"notice","message":' + b"[" * 5000 + b"]" * 5000 + b"}",
    b"\xff\xfe\x00 not utf-8",
    b'{"type":"notice","message":NaN}',
    b'{"type": "notice", "message": "unterminated',
    b"[[[[",
    b"",
])
@pytest.mark.attack("forged events")
def test_junk_on_the_event_channel_is_skipped_and_what_passes_the_server_accepts(junk):
    """Whatever a run writes, every event the relay passes on is a frame the server parses (a frame it
    refused would end the worker's connection, and with it the run's later events), and a legitimate
    event after the junk still arrives."""
    sent: list[dict] = []

    async def scenario() -> None:
        relay = OutputRelay(sent.append, 1 << 20)
        pipes = [os.pipe() for _ in range(3)]
        relay.start(*(r for r, _ in pipes))
        os.write(pipes[2][1], junk + b"\n" + line(LEGITIMATE) + b"\n")
        for _, w in pipes:
            os.close(w)
        await relay.drained(5)

    asyncio.run(scenario())
    for event in sent:
        frame = wp.encode(wp.WorkerEvent(run_id="r", event=event))
        assert wp.decode(frame).event == event  # the server's own parser takes it
    assert LEGITIMATE in sent
