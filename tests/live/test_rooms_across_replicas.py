"""A workshop room whose presenter and attendees are connected to different server replicas.

Two real replicas share a real Redis (--broker) and a real PostgreSQL (--database-url), as
behind a load balancer: the presenter is on A, the attendees on B, whose worker runs everything.
"""

from __future__ import annotations

import asyncio
import json

import pytest

from tests.live.test_broker import start_pair
from tests.live.test_rooms_live import create_room, join, next_of
from tests.live_server import collect

pytestmark = pytest.mark.live


@pytest.fixture
def shared_pair(redis_server, postgres, tmp_path):
    a, b = start_pair(redis_server, tmp_path, ("--database-url", postgres.new_database()))
    try:
        yield a, b
    finally:
        a.stop()
        b.stop()


async def counts_until(ws, **wanted) -> dict:
    while True:
        counts = await next_of(ws, "room_counts")
        if all(counts[k] == v for k, v in wanted.items()):
            return counts


def test_a_room_spans_replicas(shared_pair):
    a, b = shared_pair
    room = create_room(a, program="print('start')")

    async def scenario():
        presenter, _ = await join(a, room["room"], room["secret"])
        await presenter.send(json.dumps({"type": "room_edit", "code": "print('live code')", "selection": [0, 5]}))
        await asyncio.sleep(0.3)
        # B loads the room and takes A's live state, not the copy stored a moment ago.
        attendee, state = await join(b, room["room"])
        assert state["role"] == "attendee" and state["presenter_online"]
        assert state["code"] == "print('live code')" and state["selection"] == [0, 5]
        await counts_until(presenter, people=1)  # B's attendee counts at A

        await presenter.send(json.dumps({"type": "room_edit", "code": "print('hello replicas')"}))
        assert (await next_of(attendee, "room_edit"))["code"] == "print('hello replicas')"

        await presenter.send(json.dumps({"type": "run", "id": "p1", "code": "print('hello replicas')", "fresh": True}))
        assert (await collect(presenter, "p1", 60))[-1]["status"] == "ok"
        relayed = []
        while not relayed or relayed[-1]["type"] != "done":
            relayed.append((await next_of(attendee, "room_run"))["event"])
        assert any(e.get("text") == "hello replicas\n" for e in relayed) and relayed[-1]["status"] == "ok"

        await attendee.send(json.dumps({"type": "run", "id": "a1", "code": "print('mine')", "fresh": True}))
        assert (await collect(attendee, "a1", 60))[-1]["status"] == "ok"
        await counts_until(presenter, people=1, ran=1, errors=0)  # B's attendee's run counts at A

        late, late_state = await join(b, room["room"])
        assert late_state["code"] == "print('hello replicas')" and late_state["run"][-1]["type"] == "done"
        await counts_until(presenter, people=2)

        await presenter.close()
        presence = await next_of(attendee, "room_presence")
        assert presence["presenter_online"] is False
        for ws in (attendee, late):
            await ws.close()

    asyncio.run(scenario())
