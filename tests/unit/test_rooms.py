"""Rooms against real SQLite and PostgreSQL: codes, guessing limits, access rules, one broadcast run, counts, expiry.

Members are plain recorders of what the hub sends them (the browser socket's
``emit`` and ``send_encoded``); runs are driven through ``Run.send``, the
path worker events take.
"""

from __future__ import annotations

import asyncio
import json
import time

import pytest

from jaxplay import browser_protocol as bp
from jaxplay import worker_protocol as wp
from jaxplay.server.rooms.codes import ALPHABET, CODE_PATTERN, AddressLimit, new_code, normalize_code, secret_digest
from jaxplay.server.rooms.edits import EDIT_EVERY_S
from jaxplay.server.rooms.hub import RoomError, RoomHub, TooManyCodeTries
from jaxplay.server.rooms.store import RoomRecord, RoomStore
from jaxplay.server.runs.run import Run, before_dispatch
from jaxplay.server.sharing.snippets import SnippetStore, parse_content
from jaxplay.server.storage.factory import open_storage
from jaxplay.server.storage.interface import Storage
from jaxplay.settings import Settings


class Member:
    def __init__(self, session_id: str = "s", network: str = "10.0.0.1") -> None:
        self.session_id, self.network = session_id, network
        self.runs: dict[str, Run] = {}
        self.frames: list[str] = []  # broadcasts, as encoded once for everyone
        self.events: list[dict] = []  # what it was sent, in order, decoded; snapshots (room_state) only here

    def emit(self, event: dict) -> None:
        self.events.append(event)

    def send_encoded(self, frame: str, droppable: bool, *, snapshot: bool = False, **coalescing: object) -> None:
        self.events.append(json.loads(frame))
        if not snapshot:
            self.frames.append(frame)

    def received(self, kind: str) -> list[dict]:
        return [e for e in self.events if e["type"] == kind]


@pytest.fixture
def with_storage(database_url, tmp_path):
    """Runs ``scenario(storage)`` against freshly opened storage, in one event loop."""
    def run(scenario):
        async def main():
            storage = open_storage(database_url, tmp_path)
            await storage.open()
            try:
                return await scenario(storage)
            finally:
                await storage.close()
        return asyncio.run(main())
    return run


def make_hub(storage: Storage, **settings) -> RoomHub:
    return RoomHub(Settings(local_workers=0, **settings), RoomStore(storage), SnippetStore(storage))


async def join(hub: RoomHub, room_code: str, secret: str | None = None, session_id: str = "s",
               network: str = "10.0.0.1") -> Member:
    member = Member(session_id, network)
    await hub.handle(member, bp.RoomJoin(room=room_code, secret=secret))  # type: ignore[arg-type]
    return member


def test_codes_are_human_long_enough_and_typed_forgivingly():
    codes = {new_code() for _ in range(200)}
    assert len(codes) == 200 and all(CODE_PATTERN.fullmatch(c) for c in codes)
    assert all(len(c.replace("jax-", "").replace("-", "")) == 10 for c in codes)  # 31**10: docs/security.md
    for typed in (" jax-7q4km-2xp9r ", "7Q4KM2XP9R", "JAX 7Q4KM 2XP9R", "jax7q4km2xp9r"):
        assert normalize_code(typed) == "jax-7Q4KM-2XP9R", typed
    assert normalize_code(" jax-7q4km2 ") == normalize_code("7Q4KM2") == "jax-7Q4KM2"  # an older room's code
    assert normalize_code("jax-7Q4KO-2XP9R") is None  # O looks like 0: not in the alphabet
    assert normalize_code("jax-7Q4K") is None and normalize_code("") is None


def test_the_address_limit_refuses_after_the_budget_and_forgets_after_the_window():
    limiter = AddressLimit(per_minute=3, window_s=0.2)
    for _ in range(3):
        assert limiter.allowed("a")
        limiter.record("a")
    assert not limiter.allowed("a") and limiter.allowed("b")
    time.sleep(0.25)
    assert limiter.allowed("a")


class Socket:
    """A /ws connection, as the join limits key on it."""


@pytest.mark.attack("room code guessing")
def test_a_guessers_tries_are_bounded_before_any_lookup_so_a_right_code_tells_it_nothing(with_storage):
    """One socket: 5 tries, then none until they come back; the planted right code among the refused tries is
    refused the same (the lookup never happens). New sockets of the same browser: its 10 tries. Its misses
    spent, its right code is refused too."""
    async def scenario(storage):
        hub = make_hub(storage)
        room, _ = await hub.create("", [], None)
        socket = Socket()
        answers = []
        for i in range(200):
            code = room.code if i == 150 else f"jax-{ALPHABET[i % 31]}{ALPHABET[i // 31]}AAA-AAAAA"
            try:
                answers.append(await hub.find(code, "guesser", "1.2.3.4", socket=socket))
            except TooManyCodeTries:
                answers.append("refused")
            except RoomError:
                answers.append("unknown")
        assert answers.count("unknown") == 5 and answers.count("refused") == 195 and room not in answers
        for _ in range(5):  # fresh sockets of the same browser: its own 10 tries at once
            with pytest.raises(RoomError, match="There is no room"):
                await hub.find("jax-BBBBB-BBBBB", "guesser", "1.2.3.4", socket=Socket())
        with pytest.raises(TooManyCodeTries, match="This browser tried room codes too often"):
            await hub.find(room.code, "guesser", "1.2.3.4", socket=Socket())
        # Its misses spent (30 an hour), not even its right code is looked up: the lookup is the oracle.
        hub = make_hub(storage, room_code_misses_per_client_per_hour=3)
        for _ in range(3):
            with pytest.raises(RoomError, match="There is no room"):
                await hub.find("jax-CCCCC-CCCCC", "guesser", "1.2.3.4", socket=Socket())
        with pytest.raises(TooManyCodeTries, match="unknown room codes were tried from this browser"):
            await hub.find(room.code, "guesser", "1.2.3.4", socket=Socket())
        assert (await hub.find(room.code, "classmate", "1.2.3.4", socket=Socket())).code == room.code
    with_storage(scenario)


@pytest.mark.attack("room code guessing")
def test_a_classroom_joins_with_the_right_code_while_a_guesser_hammers_from_its_address(with_storage):
    """60 browsers behind one address join one after another while a guesser of that address tries codes as
    fast as it can between each two of them: on its socket, on new sockets of its browser, and on sockets
    without the session cookie. Its refused tries cost the class nothing; few of its tries are looked up."""
    async def scenario(storage):
        hub = make_hub(storage)
        room, _ = await hub.create("", [], None)
        guesser = Socket()
        joined, refused, looked_up = 0, 0, 0
        for i in range(60):
            for attempt in range(15):
                who, socket = [("guesser", guesser), ("guesser", Socket()), ("address:10.1.2.3", Socket())][attempt // 5]
                try:
                    await hub.find(f"jax-{ALPHABET[attempt]}{ALPHABET[i % 31]}ZZZ-ZZZZZ", who, "10.1.2.3",
                                   socket=socket)
                except TooManyCodeTries:
                    refused += 1
                except RoomError:
                    looked_up += 1
            member = await join(hub, room.code, session_id=f"student-{i}", network="10.1.2.3")
            joined += member.events[0]["type"] == "room_state"
        assert joined == 60 and room.attendees() == 60
        # Its browser: 10 tries at once (then one a minute); without the cookie: its 30 misses an hour.
        assert looked_up <= 42 and refused >= 858, (looked_up, refused)
    with_storage(scenario)


@pytest.mark.attack("room code guessing")
def test_a_networks_guesses_are_bounded_however_many_sessions_it_starts(with_storage):
    """Each new session has tries of its own: the network's misses bound them, and past those each of its
    clients that missed none gets one try, at the same pace."""
    async def scenario(storage):
        hub = make_hub(storage, room_code_misses_per_address_per_hour=20)
        looked_up = 0
        for i in range(2000):
            try:
                await hub.find("jax-ZZZZZ-ZZZZZ", f"minted-{i}", "10.9.9.9", socket=Socket())
            except TooManyCodeTries:
                continue
            except RoomError as unknown:
                assert "There is no room" in str(unknown)
                looked_up += 1
        assert looked_up == 40  # 20 misses, then 20 first tries
        with pytest.raises(RoomError, match="There is no room"):  # another network is not touched
            await hub.find("jax-ZZZZZ-ZZZZZ", "elsewhere", "10.8.8.8")
    with_storage(scenario)


def test_a_presenter_joins_whatever_the_tries_and_a_wrong_secret_reads_as_an_unknown_code(with_storage):
    async def scenario(storage):
        hub = make_hub(storage)
        room, secret = await hub.create("", [], None)
        socket = Socket()
        for _ in range(5):
            with pytest.raises(RoomError):
                await hub.find("jax-DDDDD-DDDDD", "presenter", "1.2.3.4", socket=socket)
        assert await hub.find(room.code, "presenter", "1.2.3.4", socket=socket, secret=secret) is room
        with pytest.raises(RoomError) as wrong:
            await hub.find(room.code, "other", "1.2.3.4", secret="not-it")
        with pytest.raises(RoomError) as none:
            await hub.find("jax-EEEEE-EEEEE", "other", "1.2.3.4", secret="not-it")
        assert str(wrong.value).replace(room.code, "X") == str(none.value).replace("jax-EEEEE-EEEEE", "X")
        assert int(hub.limits.client_misses.left("other")) == 28  # both counted as misses
    with_storage(scenario)


def test_a_short_code_stops_working_after_its_deadline_and_its_presenter_moves_the_room(with_storage):
    async def scenario(storage):
        short, secret = "jax-7Q4KM2", "the-old-rooms-secret"
        await RoomStore(storage).save(RoomRecord(code=short, secret_digest=secret_digest(secret), program="x = 1"))
        before = make_hub(storage, room_short_codes_until="2999-01-01")
        assert (await before.find(short.lower(), "s", "1.2.3.4")).code == short  # until its day, it works
        hub = make_hub(storage, room_short_codes_until="2000-01-01")
        for code in (short, "jax-ABCDEF"):  # a live one and an unknown one: the same answer, and no lookup
            with pytest.raises(RoomError, match="Six-character room codes like .* ended on 2000-01-01"):
                await hub.find(code, "attendee", "1.2.3.4")
        presenter = await join(hub, short, secret)
        (state,) = presenter.received("room_state")[-1:]
        new = state["room"]
        assert CODE_PATTERN.fullmatch(new) and state["moved_from"] == short and state["code"] == "x = 1"
        assert await RoomStore(storage).load(short) is None and (await RoomStore(storage).load(new)).program == "x = 1"
        attendee = await join(hub, new)
        assert attendee.events[0]["room"] == new and attendee.events[0]["role"] == "attendee"
        with pytest.raises(RoomError, match="ended on"):
            await hub.find(short, "attendee", "1.2.3.4")
        with pytest.raises(ValueError, match="--room-short-codes-until must be a day"):
            make_hub(storage, room_short_codes_until="soon")
    with_storage(scenario)


def test_a_flood_of_edits_reaches_followers_as_the_rooms_latest_state_a_few_times_a_second(with_storage):
    """Each broadcast is a frame for every follower: a presenter's burst goes out at once, then as the room's
    state at most every EDIT_EVERY_S (the page sends no faster), the program with the last of it."""
    async def scenario(storage):
        hub = make_hub(storage)
        room, secret = await hub.create("", [], None)
        presenter = await join(hub, room.code, secret)
        follower = await join(hub, room.code, session_id="f")
        for n in range(3300):
            hub.edit(room, presenter, bp.RoomEdit(code=f"x = {n}", selection=(0, 1)))  # type: ignore[arg-type]
        hub.edit(room, presenter, bp.RoomEdit(selection=(2, 3)))  # type: ignore[arg-type]
        await asyncio.sleep(EDIT_EVERY_S * 2.5)
        edits = [json.loads(f) for f in follower.frames if json.loads(f)["type"] == "room_edit"]
        assert len(edits) == 2 and presenter.frames == []
        assert edits[0]["code"] == "x = 0"
        assert (edits[1]["code"], edits[1]["selection"], edits[1]["version"]) == ("x = 3299", [2, 3], 3301)
        sent = len(follower.frames)
        hub.edit(room, presenter, bp.RoomEdit(selection=(1, 1)))  # type: ignore[arg-type]
        for _ in range(200):  # at once, or (on a loaded host, the last broadcast late) within EDIT_EVERY_S
            if len(follower.frames) > sent:
                break
            await asyncio.sleep(EDIT_EVERY_S / 20)
        assert "code" not in json.loads(follower.frames[-1])  # a selection alone carries no program
    with_storage(scenario)


def test_only_the_secret_presents_and_forged_actions_reach_nobody(with_storage):
    async def scenario(storage):
        hub = make_hub(storage)
        room, secret = await hub.create("x = 1", [], None)
        presenter = await join(hub, room.code, secret)
        attendee = await join(hub, room.code)
        other = await join(hub, room.code)
        assert presenter.events[0]["role"] == "presenter" and attendee.events[0]["role"] == "attendee"
        assert "secret" not in json.dumps(attendee.events[0]) and secret not in json.dumps(attendee.events[0])

        await hub.handle(attendee, bp.RoomEdit(code="evil", selection=None))
        await hub.handle(attendee, bp.RoomDeck(action="next"))
        assert [e["message"].split(";")[0] for e in attendee.received("notice")] == [
            f"Only the presenter of room {room.code} may edit the code",
            f"Only the presenter of room {room.code} may move the deck"]
        assert other.frames == [] and room.record.program == "x = 1"

        forger = await join(hub, room.code, "wrong")
        assert "has that presenter secret" in forger.received("notice")[0]["message"]
        assert forger not in room.members

        await hub.handle(presenter, bp.RoomEdit(code="y = 2", selection=(1, 5)))
        assert attendee.frames == other.frames  # one encoding for everyone
        assert json.loads(other.frames[-1]) == {"type": "room_edit", "room": room.code, "version": 1,
                                                "selection": [1, 5], "code": "y = 2"}
        assert presenter.frames == []  # not echoed to its sender
    with_storage(scenario)


def test_a_presenter_run_is_one_execution_relayed_and_kept_for_late_joiners(with_storage):
    async def scenario(storage):
        hub = make_hub(storage)
        room, secret = await hub.create("", [], None)
        presenter = await join(hub, room.code, secret)
        attendee = await join(hub, room.code)
        run = Run(client_id="p1", request=wp.RunRequest(code="print(1)", backend="cpu", timeout_s=30.0), emit=presenter.emit)
        await before_dispatch(run, presenter, [hub])  # type: ignore[arg-type]
        assert run.priority
        run.send({"type": "stdout", "text": "1\n"})
        run.send(bp.done_event("p1", bp.RunStatus.OK, 12.0))
        relayed = [json.loads(f)["event"] for f in attendee.frames if json.loads(f)["type"] == "room_run"]
        assert [e["type"] for e in relayed] == ["stdout", "done"] and relayed[0]["id"] == "p1"
        late = await join(hub, room.code)
        assert [e["type"] for e in late.events[0]["run"]] == ["stdout", "done"]
    with_storage(scenario)


def test_a_presenters_passes_request_is_not_the_rooms_run(with_storage):
    """It passes the room's watcher like every request that executes code, but only a run of the program is
    relayed: a passes request neither takes the priority lane nor replaces what followers see."""
    async def scenario(storage):
        hub = make_hub(storage)
        room, secret = await hub.create("", [], None)
        presenter = await join(hub, room.code, secret)
        attendee = await join(hub, room.code)
        options = wp.RunOptions(passes=wp.PassesTarget(key="1.1", fn="f"))
        passes = Run(client_id="p1", request=wp.RunRequest(code="print(1)", backend="cpu", timeout_s=30.0,
                                                           options=options), emit=presenter.emit)
        await before_dispatch(passes, presenter, [hub])  # type: ignore[arg-type]
        passes.send({"type": "passes", "key": "1.1", "fn": "f"})
        passes.send(bp.done_event("p1", bp.RunStatus.OK, 12.0))
        assert not passes.priority and room.run_id != "p1"
        assert [f for f in attendee.frames if json.loads(f)["type"] == "room_run"] == []
    with_storage(scenario)


def test_every_kind_of_attendee_request_gets_the_room_timeout_and_only_runs_are_counted(with_storage):
    """A passes request or a Compare run is no way around an attendee's deadline; neither counts as having run
    in the room's round, and a presenter's Compare run is not the room's run."""
    async def scenario(storage):
        hub = make_hub(storage)
        room, secret = await hub.create("", [], 3.0)
        presenter = await join(hub, room.code, secret)
        attendee = await join(hub, room.code, session_id="a")
        asked = {"passes": wp.RunRequest(code="", backend="cpu", timeout_s=30.0, options=wp.RunOptions(
                     passes=wp.PassesTarget(key="1.1", fn="f"))),
                 "compare": wp.RunRequest(code="", backend="cpu", timeout_s=30.0, compare=True),
                 "profile": wp.RunRequest(code="", backend="cpu", timeout_s=30.0,
                                          options=wp.RunOptions(profile=True))}
        for kind, request in asked.items():
            run = Run(client_id=kind, request=request, emit=attendee.emit, session_id="a")
            await before_dispatch(run, attendee, [hub])  # type: ignore[arg-type]
            assert (run.request.kind, run.timeout_s) == (kind, 3.0)
            run.send(bp.done_event(kind, bp.RunStatus.OK if kind != "profile" else bp.RunStatus.ERROR, 5.0))
        assert room.round_statuses == {"a": "error"}  # the profiled run, a run from the editor, alone
        compare = Run(client_id="c", request=asked["compare"], emit=presenter.emit)
        await before_dispatch(compare, presenter, [hub])  # type: ignore[arg-type]
        assert not compare.priority and room.run_id != "c" and compare.timeout_s == 30.0
    with_storage(scenario)


def test_attendee_runs_get_the_room_timeout_and_are_counted_per_browser(with_storage):
    async def scenario(storage):
        hub = make_hub(storage)
        room, secret = await hub.create("", [], 5.0)
        presenter = await join(hub, room.code, secret)
        attendees = [await join(hub, room.code) for _ in range(3)]
        for i, (member, status) in enumerate(zip(attendees, ["ok", "error", "cancelled"], strict=True)):
            run = Run(client_id=f"a{i}", request=wp.RunRequest(code="", backend="cpu", timeout_s=30.0), emit=member.emit,
                      session_id=f"s{i}")
            await before_dispatch(run, member, [hub])  # type: ignore[arg-type]
            assert run.timeout_s == 5.0 and not run.priority
            run.send(bp.done_event(f"a{i}", bp.RunStatus(status), 1.0))
        await asyncio.sleep(0.6)  # counts go out at most every half second
        assert presenter.received("room_counts")[-1] == {"type": "room_counts", "room": room.code,
                                                         "people": 3, "ran": 2, "errors": 1}
    with_storage(scenario)


def test_idle_rooms_close_and_are_deleted(with_storage):
    async def scenario(storage):
        hub = make_hub(storage, room_idle_expiry_s=60.0)
        room, _ = await hub.create("", [], None)
        attendee = await join(hub, room.code)
        room.record.last_active = time.time() - 120
        await hub.store.save(room.record)
        assert await hub.sweep() == [room.code]
        assert attendee.received("room_closed") and not await hub.store.exists(room.code)
        with pytest.raises(RoomError, match="There is no room"):
            await hub.find(room.code, "s", "9.9.9.9")
    with_storage(scenario)


def test_deck_moves_load_the_slide_and_reset_the_round(with_storage):
    async def scenario(storage):
        hub = make_hub(storage)
        snippets = SnippetStore(storage)
        ids = [(await snippets.create(parse_content(json.dumps({"code": f"print({i})"}).encode(), Settings())))[0]
               for i in range(3)]
        room, secret = await hub.create("ignored", ids, None)
        assert room.record.program == "print(0)"
        presenter = await join(hub, room.code, secret)
        room.round_statuses["someone"] = "ok"
        await hub.handle(presenter, bp.RoomDeck(action="goto", position=2))
        assert room.record.position == 2 and room.record.program == "print(2)" and not room.round_statuses
        await hub.handle(presenter, bp.RoomDeck(action="next"))
        assert room.record.position == 2  # the last slide stays the last
        await hub.handle(presenter, bp.RoomDeck(action="prev"))
        states = [s for s in presenter.received("room_state") if s["reason"] == "deck"]
        assert [(s["reason"], s["position"]) for s in states] == [("deck", 2), ("deck", 2), ("deck", 1)]
        await hub.stop()
        stored = await hub.store.load(room.code)
        assert stored is not None and stored.position == 1 and stored.deck == ids
    with_storage(scenario)


def test_a_deck_is_checked_without_loading_its_slides_and_loads_only_the_one_shown(with_storage):
    """A deck may name one heavy snippet 200 times: loading (and parsing) each entry to check that it
    exists held the server's event loop for a minute, and a deck ending in an unknown id did all that
    before it was refused."""
    async def scenario(storage):
        hub = make_hub(storage)
        snippets = SnippetStore(storage)
        heavy = (await snippets.create(parse_content(recorded("# heavy", "x" * 100_000), Settings())))[0]
        light = (await snippets.create(parse_content(json.dumps({"code": "print(1)"}).encode(), Settings())))[0]
        loads: list[str] = []
        real_load = hub.snippets.load

        async def counted_load(snippet_id: str):
            loads.append(snippet_id)
            return await real_load(snippet_id)

        hub.snippets.load = counted_load  # type: ignore[method-assign]
        with pytest.raises(RoomError, match="zzzzzzzz"):
            await hub.create("", [heavy] * 199 + ["zzzzzzzz"], None)
        assert loads == []
        room, secret = await hub.create("", [heavy] * 199 + [light], None)
        assert loads == [heavy] and room.record.program == "# heavy"
        presenter = await join(hub, room.code, secret)
        loads.clear()
        with pytest.raises(RoomError, match="zzzzzzzz"):
            await hub.move(room, bp.RoomDeck(action="set", snippets=(light, *[heavy] * 198, "zzzzzzzz")))
        await hub.handle(presenter, bp.RoomDeck(action="set", snippets=(light, *[heavy] * 199)))
        assert loads == [light] and room.record.program == "print(1)"
        await hub.stop()
    with_storage(scenario)


def recorded(code: str, text: str) -> bytes:
    events = [{"type": "stdout", "text": text}, {"type": "done", "status": "ok", "elapsed_ms": 5.0}]
    return json.dumps({"code": code, "recorded_run": events}).encode()


def test_after_a_deck_move_every_member_shows_the_slides_recorded_run_or_nothing(with_storage):
    """Followers used to keep the previous program's output under the new slide's code."""
    async def scenario(storage):
        hub = make_hub(storage)
        snippets = SnippetStore(storage)
        with_run = (await snippets.create(parse_content(recorded("print('a')", "a\n"), Settings())))[0]
        bare = (await snippets.create(parse_content(json.dumps({"code": "print('b')"}).encode(), Settings())))[0]
        room, secret = await hub.create("", [with_run, bare], None)
        presenter = await join(hub, room.code, secret)
        attendee = await join(hub, room.code)
        # The first slide's recorded run is the room's from the start, for late joiners too.
        assert [e["type"] for e in attendee.events[0]["run"]] == ["stdout", "done"]
        live = Run(client_id="p1", request=wp.RunRequest(code="print(1)", backend="cpu", timeout_s=30.0), emit=presenter.emit)
        await before_dispatch(live, presenter, [hub])  # type: ignore[arg-type]
        live.send({"type": "stdout", "text": "from the live run\n"})
        await hub.handle(presenter, bp.RoomDeck(action="next"))
        live.send(bp.done_event("p1", bp.RunStatus.OK, 12.0))  # a run of the old slide ends after the move
        for member in (presenter, attendee):
            state = member.received("room_state")[-1]
            assert state["code"] == "print('b')" and state["run"] is None
        relayed = [json.loads(f)["event"]["type"] for f in attendee.frames if json.loads(f)["type"] == "room_run"]
        assert relayed == ["stdout"]  # the old slide's done never reached the followers
        await hub.handle(presenter, bp.RoomDeck(action="prev"))
        for member in (presenter, attendee):
            state = member.received("room_state")[-1]
            run = state["run"]
            assert state["code"] == "print('a')" and [e["type"] for e in run] == ["stdout", "done"]
            assert run[0]["text"] == "a\n" and len({e["id"] for e in run}) == 1
    with_storage(scenario)


def test_setting_the_deck_keeps_the_slide_on_screen_when_it_stays(with_storage):
    async def scenario(storage):
        hub = make_hub(storage)
        snippets = SnippetStore(storage)
        ids = [(await snippets.create(parse_content(json.dumps({"code": f"print({i})"}).encode(), Settings())))[0]
               for i in range(3)]
        room, secret = await hub.create("", ids[:2], None)
        presenter = await join(hub, room.code, secret)
        await hub.handle(presenter, bp.RoomDeck(action="next"))
        await hub.handle(presenter, bp.RoomEdit(code="print(1)  # edited live", selection=None))
        await hub.handle(presenter, bp.RoomDeck(action="set", snippets=(ids[2], ids[1], ids[0]), position=1))
        assert room.record.deck == [ids[2], ids[1], ids[0]] and room.record.position == 1
        assert room.record.program == "print(1)  # edited live"
        await hub.handle(presenter, bp.RoomDeck(action="set", snippets=(ids[0],), position=5))
        assert room.record.position == 0 and room.record.program == "print(0)"
    with_storage(scenario)


def test_the_priority_lane_holds_one_presenter_run_at_a_time(with_storage):
    async def scenario(storage):
        hub = make_hub(storage)
        room, secret = await hub.create("", [], None)
        presenter = await join(hub, room.code, secret)
        runs = [Run(client_id=f"p{i}", request=wp.RunRequest(code="", backend="cpu", timeout_s=30.0), emit=presenter.emit)
                for i in range(3)]
        await before_dispatch(runs[0], presenter, [hub])  # type: ignore[arg-type]
        await before_dispatch(runs[1], presenter, [hub])  # type: ignore[arg-type]
        assert runs[0].priority and not runs[1].priority
        runs[0].state = "done"
        await before_dispatch(runs[2], presenter, [hub])  # type: ignore[arg-type]
        assert runs[2].priority
    with_storage(scenario)


def test_one_network_presenting_many_rooms_holds_one_place_in_the_priority_lane(with_storage):
    """Rooms cost nothing to create: a lane per room would let one network put a run ahead of everyone
    for each room it presents, and hold every slot. Another network's presenter still goes first."""
    async def scenario(storage):
        hub = make_hub(storage)
        runs = []
        for i in range(4):
            room, secret = await hub.create("", [], None)
            presenter = await join(hub, room.code, secret, session_id="flood", network="10.0.0.9")
            run = Run(client_id=f"r{i}", request=wp.RunRequest(code="", backend="cpu", timeout_s=30.0), emit=presenter.emit,
                      session_id="flood", network="10.0.0.9")
            await before_dispatch(run, presenter, [hub])  # type: ignore[arg-type]
            runs.append(run)
        assert [r.priority for r in runs] == [True, False, False, False]
        room, secret = await hub.create("", [], None)
        teacher = await join(hub, room.code, secret, session_id="teacher", network="10.0.0.1")
        theirs = Run(client_id="t", request=wp.RunRequest(code="", backend="cpu", timeout_s=30.0), emit=teacher.emit,
                     session_id="teacher", network="10.0.0.1")
        await before_dispatch(theirs, teacher, [hub])  # type: ignore[arg-type]
        assert theirs.priority
        runs[0].state = "done"
        again = Run(client_id="r4", request=wp.RunRequest(code="", backend="cpu", timeout_s=30.0), emit=presenter.emit,
                    session_id="flood", network="10.0.0.9")
        await before_dispatch(again, presenter, [hub])  # type: ignore[arg-type]
        assert again.priority
    with_storage(scenario)


def test_a_presenter_run_the_scheduler_refuses_gives_the_priority_lane_back(with_storage):
    """The lane is taken before the run is submitted: one refused (its browser at its limit) held it for
    good, and its whole network's presenters queued like anyone from then on."""
    from jaxplay.server.browser_socket import BrowserConnection
    from jaxplay.server.clients.connection import BrowserHooks
    from jaxplay.server.runs.run_path import RunPath
    from jaxplay.server.runs.scheduler import Scheduler

    class Socket:
        scope: dict = {"client": ("10.0.0.7", 1)}
        headers: dict = {}

    async def scenario(storage):
        hub = make_hub(storage)
        room, secret = await hub.create("", [], None)
        scheduler = Scheduler(Settings(local_workers=0, max_runs_per_client=0, expected_backends="cpu"))
        presenter = BrowserConnection(Socket(), RunPath(scheduler, [hub], BrowserHooks()), hub)  # type: ignore[arg-type]
        await hub.handle(presenter, bp.RoomJoin(room=room.code, secret=secret))
        with pytest.raises(bp.ProtocolError, match="runs waiting or running"):
            await presenter.start(bp.ClientRun(id="refused", code="print(1)"))
        again = Run(client_id="again", request=wp.RunRequest(code="", backend="cpu", timeout_s=30.0), emit=presenter.emit,
                    session_id=presenter.session_id, network=presenter.network)
        await before_dispatch(again, presenter, [hub])
        assert again.priority
        presenter.outbox.close()
    with_storage(scenario)


def test_joining_twice_does_not_resend_the_state(with_storage):
    async def scenario(storage):
        hub = make_hub(storage)
        room, _ = await hub.create("", [], None)
        member = await join(hub, room.code)
        await hub.handle(member, bp.RoomJoin(room=room.code))  # type: ignore[arg-type]
        assert [e["type"] for e in member.events] == ["room_state", "notice"]
        assert "already follows" in member.events[1]["message"]
    with_storage(scenario)
