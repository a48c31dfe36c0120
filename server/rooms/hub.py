"""Workshop rooms: a presenter's editor and runs, followed live by everyone in the room.

All on the server's event loop (no locks). Ownership::

    RoomHub (one per server, created by server/app.py)
      ├─ rooms: code -> Room, loaded from the ``rooms`` table on first use
      │    └─ members: Client -> is presenter; a connection is in one room at most
      ├─ sweep task: every minute, closes rooms idle past ``room_idle_expiry_s``
      │  and forgets empty ones from memory (their state stays stored)
      └─ saves: a changed room is written at most once a second (``RoomStore``)

Flow: a presenter's ``room_edit`` goes to every other member as one encoded
frame, at most every 40 ms a room (the room's latest state: server/rooms/edits.py).
A presenter's run is the one execution, relayed to the room and kept for late
joiners; a deck move makes the slide's recorded run, or none, the room's run;
attendees' own runs get the room's shorter timeout and are counted: the hub
watches its members' runs as a ``RoomRuns`` (server/rooms/room_runs.py).

Only a connection that joined with the presenter secret may edit or move
the deck; anything else gets a ``notice`` and nothing reaches followers.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections import Counter
from typing import TYPE_CHECKING, Any

from jaxplay import browser_protocol as bp
from jaxplay.server.rooms.codes import (
    is_short,
    new_code,
    new_secret,
    normalize_code,
    secret_digest,
    secret_matches,
    short_codes_end,
)
from jaxplay.server.rooms.edits import FollowerEdits
from jaxplay.server.rooms.join_limits import JoinLimits, TooManyTries
from jaxplay.server.rooms.room_runs import RoomRuns, show_slide_run
from jaxplay.server.rooms.state import Room, recode
from jaxplay.server.rooms.store import RoomRecord, RoomStore
from jaxplay.server.rooms.sync import RoomSync, local_members, snapshot
from jaxplay.server.sharing.snippets import SnippetStore
from jaxplay.settings import Settings

if TYPE_CHECKING:
    from jaxplay.server.clients.connection import Client

log = logging.getLogger("jaxplay.rooms")

SAVE_DELAY_S = 1.0
COUNTS_DELAY_S = 0.5
SWEEP_EVERY_S = 60.0
# An empty room stays in memory this long after its last member left (rejoining is then instant).
FORGET_EMPTY_AFTER_S = 600.0


class RoomError(ValueError):
    """A room request we refuse; the message says what to change."""


class TooManyCodeTries(RoomError):
    """Codes tried faster than a bound allows (server/rooms/join_limits.py): refused before any lookup."""


class RoomHub(RoomRuns):
    def __init__(self, settings: Settings, store: RoomStore, snippets: SnippetStore) -> None:
        super().__init__()  # the members' runs it watches (server/rooms/room_runs.py)
        self.settings = settings
        self.store = store
        self.snippets = snippets
        self.rooms: dict[str, Room] = {}
        self.joined: dict[Client, Room] = {}
        # Codes tried, per socket, client and network, and unknown ones (server/rooms/join_limits.py).
        self.limits = JoinLimits(settings)
        self.short_codes_end = short_codes_end(settings.room_short_codes_until)  # unix time, or None
        self._tasks: set[asyncio.Task[Any]] = set()
        self._sweeper: asyncio.Task[None] | None = None
        self.sync = RoomSync()  # server/app.py sets RedisRoomSync with --broker
        self.edits = FollowerEdits(self._edit_sent)  # a presenter's edits, coalesced for the followers

    # --- lifecycle -----------------------------------------------------------

    def start(self) -> None:
        self.sync.start(self)
        self._sweeper = asyncio.create_task(self._sweep_forever())

    async def stop(self) -> None:
        if self._sweeper is not None:
            self._sweeper.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._sweeper
        for room in self.rooms.values():
            if room.save_pending:
                await self.store.save(room.record)
        if self._tasks:
            await asyncio.gather(*list(self._tasks), return_exceptions=True)
        await self.sync.stop()

    # --- creating and finding ------------------------------------------------

    async def create(self, program: str, deck: list[str], attendee_timeout_s: float | None) -> tuple[Room, str]:
        """A new room and its presenter secret (shown once, stored only as a digest)."""
        limit = self.settings.room_attendee_timeout_s
        if attendee_timeout_s is not None and not 0 < attendee_timeout_s <= limit:
            raise RoomError(f"Field 'attendee_timeout_s' must be more than 0 and at most {limit:g} seconds.")
        await self._check_deck(deck)
        code = new_code()
        while code in self.rooms or await self.store.exists(code):
            code = new_code()
        secret = new_secret()
        record = RoomRecord(code=code, secret_digest=secret_digest(secret), program=program, deck=list(deck),
                            attendee_timeout_s=attendee_timeout_s or limit)
        slide = await self.snippets.load(deck[0]) if deck else None
        if slide is not None:
            record.program = slide["code"]
        await self.store.save(record)
        room = self.rooms[code] = Room(record=record)
        show_slide_run(room, slide)
        log.info("room %s created (%d slides)", code, len(deck))
        return room, secret

    async def _check_deck(self, deck: list[str]) -> None:
        missing = await self.snippets.missing(deck)
        if missing:
            raise RoomError(f"The deck names {missing[0]!r}, which is no snippet on this server; share it first.")

    async def find(self, text: str, client: str, network: str, *, socket: object | None = None,
                   secret: str | None = None) -> Room:
        """The room a code names. Each try is paid for before any lookup, and one over a bound is refused
        (``TooManyCodeTries``) whatever the code. With ``secret`` (a presenter's join) only the room whose
        secret it is answers; anything else is told as an unknown code. A six-character code past its end
        finds its room only with the secret, which moves the room to a new 10-character code."""
        code = normalize_code(text)
        try:
            self.limits.admit(client, network, socket, presenting=secret is not None)
        except TooManyTries as exc:
            raise TooManyCodeTries(str(exc)) from None
        ended = code is not None and self.short_code_ended(code)
        if ended and secret is None:
            raise RoomError(f"Six-character room codes like {code} ended on {self.settings.room_short_codes_until}: "
                            "ask whoever is presenting for the room's new code (it looks like jax-7Q4KM-2XP9R).")
        room = await self._load(code) if code is not None else None
        if room is not None and (secret is None or secret_matches(secret, room.record.secret_digest)):
            if ended:
                await self._move_to_long_code(room)
            return room
        self.limits.missed(client, network)
        shown = code or text.strip()[:32]
        if secret is not None:
            raise RoomError(f"No room {shown!r} has that presenter secret: open the presenter link again, or "
                            "follow the room without it.")
        raise RoomError(f"There is no room {shown!r} on this server: check the code (it looks like jax-7Q4KM-2XP9R) "
                        "with whoever is presenting. Rooms close after a while without use.")

    def short_code_ended(self, code: str) -> bool:
        """``code`` (as ``normalize_code`` writes it) is a six-character code past its end."""
        return is_short(code) and self.short_codes_end is not None and time.time() >= self.short_codes_end

    async def _load(self, code: str) -> Room | None:
        room = self.rooms.get(code)
        if room is None:
            record = await self.store.load(code)
            # Another connection may have loaded it while this one waited for the database.
            room = self.rooms.get(code)
            if room is None and record is not None and \
                    record.last_active >= time.time() - self.settings.room_idle_expiry_s:
                room = self.rooms[code] = Room(record=record)
                await self.sync.catch_up(room)  # another replica may hold it live
        return room

    async def _move_to_long_code(self, room: Room) -> None:
        """Its six-character code ended and its presenter came: it answers to a new 10-character code, which
        its members' pages take up (``room_state`` with ``moved_from``)."""
        old, code = room.code, new_code()
        while code in self.rooms or await self.store.exists(code):
            code = new_code()
        await self.store.rename(old, code)
        recode(self.rooms, room, code)
        self.sync.publish(room, "moved", {"from": old, "to": code})
        log.info("room %s moved to %s: its short code ended", old, code)

    # --- the socket's hooks ----------------------------------------------------

    async def handle(self, connection: Client, message: bp.RoomMessage) -> None:
        try:
            if isinstance(message, bp.RoomJoin):
                await self.join(connection, message)
            elif isinstance(message, bp.RoomLeave):
                self.leave(connection)
            elif isinstance(message, bp.RoomEdit):
                self.edit(self._presenting(connection, "edit the code"), connection, message)
            elif isinstance(message, bp.RoomDeck):
                await self.move(self._presenting(connection, "move the deck"), message)
        except RoomError as exc:
            connection.emit(bp.notice_event(str(exc)))

    async def join(self, connection: Client, message: bp.RoomJoin) -> None:
        room = await self.find(message.room, connection.session_id, connection.network, socket=connection,
                               secret=message.secret)
        presenter = message.secret is not None
        if room.members.get(connection) == presenter and connection in room.members:
            # Already there: answering again would resend the whole state (up to MAX_KEPT_RUN_BYTES).
            raise RoomError(f"This connection already follows room {room.code}; its state was sent when it joined.")
        if connection not in room.members and len(room.members) >= self.settings.max_room_followers:
            self._make_place(room, connection, presenter)
        self.leave(connection)
        room.members[connection] = presenter
        self.joined[connection] = room
        room.record.last_active = time.time()
        connection.send_encoded(room.state_frame(presenter, "join"), False, snapshot=True)
        if presenter:
            room.broadcast({"type": "room_presence", "room": room.code, "presenter_online": True},
                           skip=connection, followers_only=True)
        self._members_changed(room)

    def _make_place(self, room: Room, newcomer: Client, presenter: bool) -> None:
        """A full room lets in its presenter always, and anyone whose network holds fewer of its places than
        the network holding the most (within one network: whose client holds fewer than its heaviest client):
        that one's newest follower is let go, with a notice. A room's code is public, so one network's sockets
        may fill the room, but never lock its presenter or another network's attendees out (as a full run
        queue sheds: server/runs/scheduler.py)."""
        full = f"Room {room.code} is full ({self.settings.max_room_followers} people)."
        followers = [member for member, presents in room.members.items() if not presents]  # in order of joining
        if not followers:
            raise RoomError(full)
        networks = Counter(member.network for member in followers)
        heaviest, holds = networks.most_common(1)[0]
        would_hold = networks[newcomer.network] + 1
        if heaviest == newcomer.network:
            clients = Counter(member.session_id for member in followers if member.network == heaviest)
            heaviest_client, holds = clients.most_common(1)[0]
            would_hold = clients[newcomer.session_id] + 1
            candidates = [m for m in followers if m.network == heaviest and m.session_id == heaviest_client]
        else:
            candidates = [m for m in followers if m.network == heaviest]
        if not presenter and holds <= would_hold:
            raise RoomError(full)
        let_go = candidates[-1]
        self.leave(let_go)
        let_go.emit(bp.notice_event(f"{full} Your network held the most places in it, so this connection was let "
                                    "go to make room for someone else's."))

    def leave(self, connection: Client) -> None:
        room = self.joined.pop(connection, None)
        if room is None:
            return
        presenter = room.members.pop(connection, False)
        if presenter and not room.presenter_online:
            room.broadcast({"type": "room_presence", "room": room.code, "presenter_online": False})
        if not room.members:
            room.emptied_at = time.monotonic()
        self._members_changed(room)

    def _members_changed(self, room: Room) -> None:
        self.sync.publish(room, "members", local_members(room))
        self.counts_soon(room)

    def _presenting(self, connection: Client, what: str) -> Room:
        room = self.joined.get(connection)
        if room is None:
            raise RoomError(f"Join a room with its presenter link before you {what}.")
        if not room.members.get(connection):
            raise RoomError(f"Only the presenter of room {room.code} may {what}; you are following it.")
        return room

    def edit(self, room: Room, connection: Client, message: bp.RoomEdit) -> None:
        if message.code is not None:
            room.record.program = message.code
        if message.selection is not None:
            size = len(room.record.program)
            room.selection = (min(message.selection[0], size), min(message.selection[1], size))
        room.version += 1
        self.edits.edited(room, connection, message.code is not None)

    def _edit_sent(self, room: Room, code: str | None) -> None:
        """An edit broadcast to this server's followers (server/rooms/edits.py): the other replicas' too."""
        self.sync.publish(room, "edit", {"version": room.version, "code": code,
                                         "selection": list(room.selection) if room.selection else None})
        if code is not None:
            self._touch(room)

    async def move(self, room: Room, message: bp.RoomDeck) -> None:
        """Move every member to a slide: its code, and its recorded run or an empty output, the same for all.

        Setting the deck keeps the slide on screen (its code as edited, its run) when the new deck
        has that snippet at the given position; anything else loads the slide afresh."""
        record = room.record
        if message.action == "set":
            deck = list(message.snippets or ())
            await self._check_deck(deck)
            position = min(message.position or 0, max(len(deck) - 1, 0))
            on_screen = record.deck[record.position] if record.position < len(record.deck) else None
            reload = bool(deck) and deck[position] != on_screen
        elif not record.deck:
            raise RoomError(f"Room {room.code} has no deck: set one (a list of snippet ids) first.")
        else:
            deck = record.deck
            step = {"next": 1, "prev": -1}.get(message.action, 0)
            target = message.position if message.action == "goto" else record.position + step
            position = min(max(target or 0, 0), len(deck) - 1)
            reload = True
        record.deck, record.position = deck, position
        if reload:
            slide = await self.snippets.load(deck[position])
            if slide is not None:
                record.program = slide["code"]
            room.version += 1
            room.selection = None
            show_slide_run(room, slide)
            room.new_round()
        room.send_states("deck")
        self.edits.drop(room)
        self.sync.publish(room, "deck", snapshot(room))
        self._touch(room)

    # --- counts, saves, expiry -------------------------------------------------

    def counts_soon(self, room: Room) -> None:
        """At most one counts message per room every COUNTS_DELAY_S (200 joins make one message, not 200)."""
        if room.counts_pending:
            return
        room.counts_pending = True

        def send() -> None:
            room.counts_pending = False
            room.broadcast(room.counts())

        asyncio.get_running_loop().call_later(COUNTS_DELAY_S, send)

    def _touch(self, room: Room) -> None:
        room.record.last_active = time.time()
        if room.save_pending:
            return
        room.save_pending = True

        def save() -> None:
            room.save_pending = False
            self._spawn(self.store.save(room.record))

        asyncio.get_running_loop().call_later(SAVE_DELAY_S, save)

    def _spawn(self, work: Any) -> None:
        task = asyncio.ensure_future(work)
        self._tasks.add(task)
        task.add_done_callback(self._settled)

    def _settled(self, task: asyncio.Task[Any]) -> None:
        self._tasks.discard(task)
        if not task.cancelled() and task.exception() is not None:
            log.error("saving a room failed: %s", task.exception())

    async def _sweep_forever(self) -> None:
        while True:
            await asyncio.sleep(SWEEP_EVERY_S)
            try:
                await self.sweep()
            except Exception:  # a failed sweep must not end sweeping
                log.exception("room sweep failed")

    async def sweep(self) -> list[str]:
        """Close rooms idle past the expiry; forget empty ones from memory. Returns the closed codes."""
        cutoff = time.time() - self.settings.room_idle_expiry_s
        closed = [code for code, room in self.rooms.items() if room.record.last_active < cutoff]
        for code in closed:
            room = self.rooms.pop(code)
            room.broadcast(bp.room_closed_event(code, f"Room {code} closed after "
                                                      f"{self.settings.room_idle_expiry_s / 3600:g} h without use."))
            for member in list(room.members):
                self.joined.pop(member, None)
        closed += [c for c in await self.store.delete_idle(cutoff) if c not in closed]
        now = time.monotonic()
        for code, room in list(self.rooms.items()):
            if not room.members and not room.save_pending and now - room.emptied_at > FORGET_EMPTY_AFTER_S:
                del self.rooms[code]
        if closed:
            log.info("closed %d idle room(s)", len(closed))
        return closed
