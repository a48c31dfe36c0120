"""A connection's outbox is bounded for every kind of frame: dropped, replaced by a newer snapshot, or overflowed."""

from __future__ import annotations

import asyncio
import json

from jaxplay import browser_protocol as bp
from jaxplay import worker_protocol as wp
from jaxplay.server.clients.outbox import STUCK_S, NetworkBytes, NetworkBytesByNetwork, Outbox
from jaxplay.server.rooms.hub import RoomHub
from jaxplay.server.rooms.state import MAX_KEPT_RUN_BYTES
from jaxplay.server.rooms.store import RoomStore
from jaxplay.server.runs.run import Run, before_dispatch
from jaxplay.server.sharing.snippets import SnippetStore
from jaxplay.server.storage.factory import open_storage
from jaxplay.settings import Settings


def test_droppable_frames_beyond_the_limit_are_dropped_and_counted():
    outbox = Outbox(limit_bytes=100, headroom_bytes=50)
    assert outbox.put("x" * 60, droppable=True) and not outbox.put("y" * 60, droppable=True)
    assert outbox.dropped == 1 and outbox.bytes == 60
    assert outbox.put("z" * 60, droppable=False)  # a done still fits, in the headroom
    assert not outbox.overflowed and outbox.bytes == 120


def test_a_frame_past_the_headroom_overflows_and_releases_everything():
    async def scenario():
        outbox = Outbox(limit_bytes=100, headroom_bytes=50)
        outbox.put("a" * 100, droppable=False)
        assert not outbox.put("b" * 60, droppable=False)
        assert outbox.overflowed and outbox.empty() and outbox.bytes == 0
        assert not outbox.put("c", droppable=False)  # closed: nothing more is held
        assert await outbox.get() is None
    asyncio.run(scenario())


def test_a_networks_connections_share_one_bound_counting_the_frame_being_written():
    async def scenario():
        networks = NetworkBytesByNetwork()
        first, second = (Outbox(100, 50, networks.take("10.0.0.1", 120)) for _ in range(2))
        other = Outbox(100, 50, networks.take("10.0.0.2", 120))
        assert first.put("a" * 80, droppable=False)
        assert await first.get() == "a" * 80  # taken, not yet written: its socket may never read it
        assert not second.put("b" * 60, droppable=True) and second.dropped == 1  # output: dropped
        assert not second.put("c" * 60, droppable=False) and second.overflowed  # the rest: closed, to resync
        assert other.put("d" * 80, droppable=False)  # another network has its own bound
        first.written()
        third = Outbox(100, 50, networks.take("10.0.0.1", 120))
        assert third.put("e" * 100, droppable=False)
        first.close(), third.close()
        networks.give_back("10.0.0.1"), networks.give_back("10.0.0.1"), networks.give_back("10.0.0.1")
        assert "10.0.0.1" not in networks.networks and networks.networks["10.0.0.2"].bytes == 80
    asyncio.run(scenario())


def test_a_socket_stuck_on_its_frame_gives_way_to_its_networks_others():
    """One member of a classroom's network that never reads cannot hold the network's budget against the
    rest: once its frame has been in flight for STUCK_S, a classmate's frame that needs room overflows it."""
    async def scenario():
        now = [0.0]
        network = NetworkBytes(100, clock=lambda: now[0])
        hostile, classmate = Outbox(100, 50, network), Outbox(100, 50, network)
        told: list[str] = []
        hostile.on_overflow = lambda: told.append("hostile")
        assert hostile.put("h" * 80, droppable=False) and await hostile.get() == "h" * 80
        now[0] = STUCK_S / 2  # writing for a moment: any socket may be
        assert not classmate.put("a" * 60, droppable=True)  # not yet given way: dropped as before
        now[0] = STUCK_S + 1
        assert classmate.put("b" * 60, droppable=False)
        assert told == ["hostile"] and hostile.overflowed and network.bytes == 60
    asyncio.run(scenario())


def test_a_snapshot_replaces_the_room_frames_still_waiting():
    async def scenario():
        outbox = Outbox(limit_bytes=1000, headroom_bytes=0)
        outbox.put('{"type":"started"}', droppable=False)
        outbox.put('{"type":"room_state","n":1}', droppable=False, room=True, snapshot=True)
        outbox.put('{"type":"room_run","n":1}', droppable=True, room=True)
        first = await outbox.get()  # the writer has taken the first frame
        outbox.put('{"type":"room_state","n":2}', droppable=False, room=True, snapshot=True)
        outbox.put('{"type":"done"}', droppable=False)
        left = [await outbox.get() for _ in range(2)]
        assert first == '{"type":"started"}'
        assert left == ['{"type":"room_state","n":2}', '{"type":"done"}'] and outbox.empty()
        assert outbox.bytes == 0
    asyncio.run(scenario())


def test_only_the_latest_edit_waits_for_a_follower_and_it_takes_the_place_of_the_one_before():
    """A follower behind a presenter's typing is sent the room's latest edit, not every keystroke: an edit with
    the program takes the place of the waiting one (and makes a waiting selection-only one moot); a
    selection-only edit takes the place of a waiting selection-only one only. A flood leaves one waiting."""
    async def scenario():
        outbox = Outbox(limit_bytes=1 << 20, headroom_bytes=0)
        edit = {"latest": "room_edit", "voids": ("room_selection",)}
        outbox.put('{"type":"room_run","n":0}', droppable=True, room=True)
        for n in range(3300):
            outbox.put(f'{{"type":"room_edit","code":"x = {n}"}}', droppable=True, room=True, **edit)
        outbox.put('{"type":"room_run","n":1}', droppable=True, room=True)
        outbox.put('{"type":"room_edit","selection":[1,1]}', droppable=True, room=True, latest="room_selection")
        outbox.put('{"type":"room_edit","selection":[2,2]}', droppable=True, room=True, latest="room_selection")
        assert len(outbox._entries) == 4 and outbox.bytes == sum(len(e[0]) for e in outbox._entries)
        assert [await outbox.get() for _ in range(4)] == [
            '{"type":"room_run","n":0}', '{"type":"room_edit","code":"x = 3299"}', '{"type":"room_run","n":1}',
            '{"type":"room_edit","selection":[2,2]}']
        outbox.put('{"type":"room_edit","selection":[3,3]}', droppable=True, room=True, latest="room_selection")
        outbox.put('{"type":"room_edit","code":"y = 1"}', droppable=True, room=True, **edit)  # voids the selection
        assert await outbox.get() == '{"type":"room_edit","code":"y = 1"}' and outbox.empty() and outbox.bytes == 0
        # A never-reading follower under an alternating flood holds one live edit of each kind, and few dead ones.
        for n in range(10_000):
            outbox.put(f'{{"type":"room_edit","selection":[{n},{n}]}}', droppable=True, room=True,
                       latest="room_selection")
            outbox.put(f'{{"type":"room_edit","code":"z = {n}"}}', droppable=True, room=True, **edit)
        assert outbox._live == 1 and len(outbox._entries) < 200
    asyncio.run(scenario())


class NeverReads:
    """A room member whose writer is stuck: nothing it is sent ever leaves its outbox."""

    def __init__(self) -> None:
        self.session_id, self.network = "address:192.0.2.66", "192.0.2.66"
        self.outbox = Outbox(limit_bytes=32 << 20, headroom_bytes=8 << 20)

    def emit(self, event: dict) -> None:
        self.outbox.put(json.dumps(event), droppable=event["type"] == "notice")

    def send_encoded(self, frame: str, droppable: bool, *, snapshot: bool = False, **coalescing: object) -> None:
        self.outbox.put(frame, droppable=droppable, room=True, snapshot=snapshot)


def test_a_join_and_leave_flood_holds_one_room_state(tmp_path):
    async def scenario():
        storage = open_storage("", tmp_path)
        await storage.open()
        try:
            hub = RoomHub(Settings(local_workers=0), RoomStore(storage), SnippetStore(storage))
            room, secret = await hub.create("", [], None)
            presenter = NeverReads()
            await hub.handle(presenter, bp.RoomJoin(room=room.code, secret=secret))  # type: ignore[arg-type]
            run = Run(client_id="big", request=wp.RunRequest(code="", backend="cpu", timeout_s=30), emit=lambda e: None)
            await before_dispatch(run, presenter, [hub])  # type: ignore[arg-type]
            line = "x" * 60_000 + "\n"
            while room.run_bytes < MAX_KEPT_RUN_BYTES - 2 * len(line):
                run.send({"type": "stdout", "text": line})
            run.send(bp.done_event("big", bp.RunStatus.OK, 1.0))
            hostile = NeverReads()
            for _ in range(60):
                await hub.handle(hostile, bp.RoomJoin(room=room.code))  # type: ignore[arg-type]
                await hub.handle(hostile, bp.RoomLeave())  # type: ignore[arg-type]
            state_size = len(room.state_frame(False, "join"))
            assert state_size > 3 << 20
            # Sixty joins, one state waiting (plus the small frames since), never sixty.
            assert hostile.outbox.bytes < state_size + 64 << 10, (hostile.outbox.bytes, state_size)
            assert json.loads(room.state_frame(False, "join"))["run"] == room.run_events
        finally:
            await storage.close()
    asyncio.run(scenario())


class StuckSocket:
    """A websocket whose peer sends ``frames`` and then stays silent, and never reads a byte."""

    def __init__(self, frames: list[str]) -> None:
        self.scope: dict = {}
        self.client = None
        self.headers: dict = {}
        self.frames = frames
        self.close_codes: list[int] = []

    async def receive(self) -> dict:
        if self.frames:
            return {"type": "websocket.receive", "text": self.frames.pop(0)}
        await asyncio.Event().wait()
        raise AssertionError("unreachable")

    async def send_text(self, text: str) -> None:
        await asyncio.Event().wait()  # the peer's window is shut

    async def close(self, code: int = 1000, reason: str | None = None) -> None:
        self.close_codes.append(code)
        await asyncio.Event().wait()  # nor does it take the close frame


def test_a_connection_that_lets_frames_pile_up_unread_is_closed_and_released(monkeypatch):
    from jaxplay.server import browser_socket
    from jaxplay.server.clients.connection import BrowserHooks
    from jaxplay.server.runs.run_path import RunPath
    from jaxplay.server.runs.scheduler import Scheduler

    monkeypatch.setattr(browser_socket, "OUTBOX_LIMIT_BYTES", 2000)
    monkeypatch.setattr(browser_socket, "OUTBOX_HEADROOM_BYTES", 1000)
    monkeypatch.setattr(browser_socket, "OVERFLOW_CLOSE_S", 0.1)
    # Each of these runs is refused with a done (never dropped): the frames this client makes the server send.
    frames = [json.dumps({"type": "run", "id": f"r{i}", "code": "print(1)", "timeout_s": 1e6}) for i in range(200)]

    async def scenario() -> None:
        socket = StuckSocket(frames)
        path = RunPath(Scheduler(Settings(local_workers=0)), [], BrowserHooks())
        connection = browser_socket.BrowserConnection(socket, path)  # type: ignore[arg-type]
        async with asyncio.timeout(10):
            await connection.serve()  # returns: the server does not wait on this peer
        assert connection.overflowed.is_set() and connection.outbox.empty() and connection.outbox.bytes == 0
        assert socket.close_codes == [1013] and len(socket.frames) > 100  # it stopped listening, too
    asyncio.run(scenario())
