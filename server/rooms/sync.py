"""Workshop rooms across server replicas: every replica holding a room keeps it in step with the others.

One server (no ``--broker``) holds every member of every room, so ``RoomSync``
itself sends nothing. Behind a load balancer, a room's presenter and its
attendees may be connected to different replicas; ``RedisRoomSync`` then
carries what changes a room between them, on one Redis pub/sub channel::

    replica A (presenter)                 Redis                  replica B (attendees)
    edit / deck / run events ── PUBLISH jaxplay:rooms ──▶ SUBSCRIBE ── applied to B's copy,
    members and statuses    ◀───────────────────────────            sent to B's members

Each replica publishes only what happened on its side: the presenter's edits,
slide moves and run events from the presenter's replica; each replica's own
member counts and its attendees' run statuses. People in a room, and whether
its presenter is online, add up every live replica's counts (a replica whose
heartbeat stopped counts for nothing). A replica that loads a room (its first
member there) asks the others for the live state, so a late joiner sees the
presenter's current code and last run at once, not the stored copy.

Why pub/sub, where run events use streams (server/runs/broker_redis.py): a room
message describes state that the next message or a snapshot supersedes, and a
replica that was away asks for a snapshot when it loads the room again.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import time
from typing import TYPE_CHECKING, Any, Protocol

from redis.exceptions import RedisError

from jaxplay import browser_protocol as bp
from jaxplay.server.rooms.state import encode, recode
from jaxplay.server.runs.broker_keys import listen_forever

if TYPE_CHECKING:
    from jaxplay.server.rooms.state import Room
    from jaxplay.server.runs.broker_redis import RedisBroker

log = logging.getLogger("jaxplay.rooms")


class RoomHost(Protocol):
    """What sync needs of this server's rooms (server/rooms/hub.py's ``RoomHub``)."""

    rooms: dict[str, Room]

    def counts_soon(self, room: Room) -> None: ...

    def relay_presenter_event(self, room: Room, event: dict[str, Any]) -> None: ...

CHANNEL = "jaxplay:rooms"
CATCH_UP_WAIT_S = 0.5  # how long a replica loading a room waits for another's live state
PRUNE_EVERY_S = 2.0


class RoomSync:
    """The embedded default: one server, nothing to send."""

    def start(self, hub: RoomHost) -> None:
        self.hub = hub

    async def stop(self) -> None:
        return None

    def publish(self, room: Room, kind: str, data: dict[str, Any]) -> None:
        return None

    async def catch_up(self, room: Room) -> None:
        return None


def snapshot(room: Room) -> dict[str, Any]:
    record = room.record
    return {"program": record.program, "deck": record.deck, "position": record.position,
            "selection": list(room.selection) if room.selection else None, "version": room.version,
            "run_id": room.run_id, "run_events": room.run_events, "statuses": room.round_statuses}


class RedisRoomSync(RoomSync):
    def __init__(self, broker: RedisBroker) -> None:
        self.broker = broker
        self.outgoing: asyncio.Queue[str] = asyncio.Queue()
        self.tasks: list[asyncio.Task[None]] = []
        self.waiting: dict[str, asyncio.Future[tuple[str, dict[str, Any]]]] = {}

    def start(self, hub: RoomHost) -> None:
        super().start(hub)
        self.tasks = [asyncio.create_task(loop()) for loop in (self._publish_in_order, self._listen, self._prune)]

    async def stop(self) -> None:
        for task in self.tasks:
            task.cancel()
        await asyncio.gather(*self.tasks, return_exceptions=True)

    def publish(self, room: Room, kind: str, data: dict[str, Any]) -> None:
        message = {"origin": self.broker.id, "room": room.code, "kind": kind, "data": data}
        self.outgoing.put_nowait(json.dumps(message, separators=(",", ":")))

    async def catch_up(self, room: Room) -> None:
        """Just loaded from the store: take the live state from a replica that holds the room, if any."""
        future = self.waiting[room.code] = asyncio.get_running_loop().create_future()
        self.publish(room, "want", {})
        try:
            origin, state = await asyncio.wait_for(future, CATCH_UP_WAIT_S)
        except TimeoutError:
            return  # nobody else holds it: the stored copy is the room
        finally:
            self.waiting.pop(room.code, None)
        apply_state(room, state)
        members = state["members"]
        room.remote_members[origin] = (int(members["attendees"]), int(members["presenters"]))

    # --- tasks ------------------------------------------------------------------

    async def _publish_in_order(self) -> None:
        while True:
            message = await self.outgoing.get()
            try:
                assert self.broker.redis is not None
                await self.broker.redis.publish(CHANNEL, message)
            except (RedisError, OSError) as exc:
                log.warning("room update not sent to the other replicas: %s", exc)

    async def _listen(self) -> None:
        assert self.broker.redis is not None
        await listen_forever(self.broker.redis, CHANNEL, self._received, "room updates from other replicas")

    async def _prune(self) -> None:
        """Members of a replica that stopped count for nothing: its browsers reconnect elsewhere."""
        while True:
            await asyncio.sleep(PRUNE_EVERY_S)
            live = set(self.broker.live)
            for room in list(self.hub.rooms.values()):
                gone = [origin for origin in room.remote_members if origin not in live]
                if gone:
                    before = room.presenter_online
                    for origin in gone:
                        del room.remote_members[origin]
                    self._members_moved(room, before)

    # --- applying another replica's word ----------------------------------------

    def _received(self, raw: str) -> None:
        try:
            message = json.loads(raw)
            origin, code, kind, data = message["origin"], message["room"], message["kind"], message["data"]
        except (ValueError, KeyError, TypeError):
            return
        # A move names the code the room leaves; every other message the one it has.
        room = self.hub.rooms.get(data.get("from") if kind == "moved" and isinstance(data, dict) else code)
        if origin == self.broker.id or room is None:
            return
        with contextlib.suppress(KeyError, TypeError, ValueError):
            self._apply(room, origin, kind, data)

    def _apply(self, room: Room, origin: str, kind: str, data: dict[str, Any]) -> None:
        room.record.last_active = time.time()  # active elsewhere: this copy must not expire
        if kind == "moved":
            recode(self.hub.rooms, room, str(data["to"]))
        elif kind == "want":
            self.publish(room, "state", {**snapshot(room), "members": local_members(room)})
        elif kind == "state":
            future = self.waiting.get(room.code)
            if future is not None and not future.done():
                future.set_result((origin, data))
            else:  # another replica's answer: its members count all the same
                room.remote_members[origin] = (int(data["members"]["attendees"]), int(data["members"]["presenters"]))
        elif kind == "members":
            before = room.presenter_online
            room.remote_members[origin] = (int(data["attendees"]), int(data["presenters"]))
            self._members_moved(room, before)
        elif kind == "edit":
            if data["code"] is not None:
                room.record.program = data["code"]
            room.selection = tuple(data["selection"]) if data["selection"] else None  # type: ignore[assignment]
            room.version = int(data["version"])
            room.broadcast(bp.room_edit_event(room.code, room.version, data["code"], room.selection))
        elif kind == "deck":
            apply_state(room, data)
            room.send_states("deck")
        elif kind == "run_start":
            room.run_events, room.run_bytes, room.run_id = [], 0, data["run_id"]
            room.new_round()
            self.hub.counts_soon(room)
        elif kind == "run_event" and data["run_id"] == room.run_id:
            self.hub.relay_presenter_event(room, data["event"])
        elif kind == "status":
            room.round_statuses[str(data["session"])] = str(data["status"])
            self.hub.counts_soon(room)

    def _members_moved(self, room: Room, presenter_was_online: bool) -> None:
        if room.presenter_online != presenter_was_online:
            room.broadcast({"type": "room_presence", "room": room.code, "presenter_online": room.presenter_online},
                           followers_only=True)
        self.hub.counts_soon(room)


def local_members(room: Room) -> dict[str, int]:
    presenters = sum(1 for presenter in room.members.values() if presenter)
    return {"attendees": len(room.members) - presenters, "presenters": presenters}


def apply_state(room: Room, state: dict[str, Any]) -> None:
    """Another replica's view of the room: its code, slide, selection, last run and round."""
    record = room.record
    record.program, record.deck, record.position = state["program"], list(state["deck"]), int(state["position"])
    room.selection = tuple(state["selection"]) if state["selection"] else None  # type: ignore[assignment]
    room.version = int(state["version"])
    room.run_id = state.get("run_id")
    room.run_events = list(state.get("run_events") or [])
    room.run_bytes = sum(len(encode(bp.room_run_event(room.code, event))) for event in room.run_events)
    room.round_statuses = dict(state.get("statuses") or {})
