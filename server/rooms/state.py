"""A workshop room's live state on one server: its record, members, selection, last run and round.

``server/rooms/hub.py`` (the hub) changes it for this server's members, and
``server/rooms/room_runs.py`` for their runs; ``server/rooms/sync.py`` applies
what other replicas change.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from jaxplay import browser_protocol as bp
from jaxplay.server.rooms.store import RoomRecord

if TYPE_CHECKING:
    from jaxplay.server.clients.connection import Client

# The presenter's last run kept for late joiners; beyond this its events are sent live only.
MAX_KEPT_RUN_BYTES = 4 << 20
# Room frames a follower that cannot keep up may lose (server/browser_socket.py); the rest always go out.
DROPPABLE = frozenset({"room_edit", "room_run", "room_counts"})


def encode(event: dict[str, Any]) -> str:
    return json.dumps(event, separators=(",", ":"))


def coalescing(event: dict[str, Any]) -> tuple[str | None, tuple[str, ...]]:
    """How a member's outbox may coalesce ``event`` (server/clients/outbox.py): of a presenter's edits only the
    latest matters. One with the program takes the place of the one still waiting and makes a waiting
    selection-only edit moot; a selection-only one takes the place of a waiting selection-only one."""
    if event["type"] != "room_edit":
        return None, ()
    if event.get("code") is not None:
        return "room_edit", ("room_selection",)
    return "room_selection", ()


@dataclass(eq=False)
class Room:
    record: RoomRecord
    members: dict[Client, bool] = field(default_factory=dict)  # connection -> is presenter
    selection: tuple[int, int] | None = None
    version: int = 0
    run_events: list[dict[str, Any]] = field(default_factory=list)
    run_bytes: int = 0
    run_id: str | None = None
    # Attendees' latest run status since the presenter last ran or changed slide, by session.
    round_statuses: dict[str, str] = field(default_factory=dict)
    save_pending: bool = False
    counts_pending: bool = False
    emptied_at: float = field(default_factory=time.monotonic)
    # Other replicas' members of this room (server/rooms/sync.py): replica -> (attendees, presenters).
    remote_members: dict[str, tuple[int, int]] = field(default_factory=dict)
    # The six-character code it answered to until a presenter moved it to this one (its short code ended).
    moved_from: str | None = None
    # ``run_events`` encoded once each, for the list they were encoded from: a join then costs a copy of
    # the kept run, not a fresh encoding of up to MAX_KEPT_RUN_BYTES.
    _encoded_run: list[str] = field(default_factory=list)
    _encoded_from: list[dict[str, Any]] | None = None

    @property
    def code(self) -> str:
        return self.record.code

    def attendees(self) -> int:
        local = sum(1 for presenter in self.members.values() if not presenter)
        return local + sum(attendees for attendees, _ in self.remote_members.values())

    @property
    def presenter_online(self) -> bool:
        return any(self.members.values()) or any(presenters for _, presenters in self.remote_members.values())

    def counts(self) -> dict[str, Any]:
        errors = sum(1 for status in self.round_statuses.values() if status != "ok")
        return bp.room_counts_event(self.code, self.attendees(), len(self.round_statuses), errors)

    def state(self, presenter: bool, reason: str) -> dict[str, Any]:
        """Everything a member needs to show the room now (a late joiner's or a reconnected one's view).

        ``reason``: "join" (the answer to room_join), "deck" (the presenter moved to another slide) or
        "moved" (the room left its six-character code for ``code``, named in ``moved_from``).
        """
        counts = self.counts()
        moved = {"moved_from": self.moved_from} if self.moved_from else {}
        return {"type": "room_state", "room": self.code, **moved, "reason": reason,
                "role": "presenter" if presenter else "attendee",
                "code": self.record.program, "selection": list(self.selection) if self.selection else None,
                "version": self.version, "deck": self.record.deck, "position": self.record.position,
                "attendee_timeout_s": self.record.attendee_timeout_s,
                "presenter_online": self.presenter_online, "run": self.run_events or None,
                "people": counts["people"], "ran": counts["ran"], "errors": counts["errors"]}

    def state_frame(self, presenter: bool, reason: str) -> str:
        """``state(presenter, reason)`` encoded, its run events spliced in from their encodings kept."""
        view = self.state(presenter, reason)
        if not self.run_events:
            return encode(view)
        if self._encoded_from is not self.run_events:  # a new run (or a replica's copy) replaced the list
            self._encoded_from, self._encoded_run = self.run_events, []
        self._encoded_run.extend(encode(event) for event in self.run_events[len(self._encoded_run):])
        del view["run"]
        return encode(view)[:-1] + ',"run":[' + ",".join(self._encoded_run) + "]}"

    def broadcast(self, event: dict[str, Any], *, skip: Client | None = None,
                  followers_only: bool = False) -> None:
        frame = encode(event)
        droppable = event["type"] in DROPPABLE
        latest, voids = coalescing(event)
        for member, presenter in self.members.items():
            if member is not skip and not (followers_only and presenter):
                member.send_encoded(frame, droppable, latest=latest, voids=voids)

    def send_states(self, reason: str) -> None:
        """Each member's whole view of the room again (after a slide move)."""
        frames = {role: self.state_frame(role, reason) for role in (False, True)}
        for member, presenter in self.members.items():
            member.send_encoded(frames[presenter], False, snapshot=True)

    def new_round(self) -> None:
        self.round_statuses.clear()


def recode(rooms: dict[str, Room], room: Room, code: str) -> None:
    """``room`` answers to ``code`` from now on (its six-character code ended), in ``rooms`` and in every member's
    view: each is sent the room's state naming the code it left."""
    old = room.code
    rooms.pop(old, None)
    room.record.code, room.moved_from = code, old
    rooms[code] = room
    room.send_states("moved")
