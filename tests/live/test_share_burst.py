"""A workshop burst: identical runs waiting in the queue are answered once a later run agreed with the first.

Each socket is a browser session of its own, as each attendee is: the first run to end answers none of
the others; a run that began after it ended and printed the same verifies it
(server/runs/result_verification.py) and answers every run still waiting."""

from __future__ import annotations

import asyncio
import json

import websockets

from tests.live_server import collect, done_of, output_text

# Deterministic, and long enough (~1 s) that the burst queues behind it.
BURST_CODE = "total = 0\nfor i in range(3_000_000):\n    total += i % 7\nprint('burst', total)"


def run_together(live, code: str, count: int) -> list[list[dict]]:
    """The same code sent at once from ``count`` browsers, as a room pressing Run."""
    async def burst():
        sockets = [await websockets.connect(live.ws_url, additional_headers=live.browser_headers())
                   for _ in range(count)]
        try:
            for i, ws in enumerate(sockets):
                await ws.send(json.dumps({"type": "run", "id": f"w{i}", "code": code}))
            return await asyncio.gather(*(collect(ws, f"w{i}", 60) for i, ws in enumerate(sockets)))
        finally:
            for ws in sockets:
                await ws.close()

    return asyncio.run(burst())


def test_identical_runs_waiting_in_the_queue_get_the_verified_result(live):
    slots = live.get_json("/api/backends")["backends"][0]["slots"]
    count = 2 * slots + 6
    runs = run_together(live, BURST_CODE, count)
    dones = [done_of(r) for r in runs]
    assert all(d["status"] == "ok" for d in dones)
    assert {output_text(r) for r in runs} == {"burst 8999994\n"}
    followers = [d for d in dones if d.get("cached")]
    # At most: the first slots' runs, which end together; the runs started as they end, one of which
    # verifies; and one more per slot started while the verifying run's result was being written.
    assert len(followers) >= count - 3 * slots - 1, dones


def test_a_nondeterministic_leader_leaves_its_followers_to_run(live):
    for events in run_together(live, "import time\ntime.sleep(0.3)\nprint(len('same'))", 2):
        assert done_of(events)["status"] == "ok" and not done_of(events).get("cached")
