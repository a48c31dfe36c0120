"""A room's run: its members' runs as the room sees them, and the run every member shows.

A presenter's run is the one execution: the hub (server/rooms/hub.py's
``RoomHub``, which is a ``RoomRuns``) watches its members' runs (a
``RunWatcher``, server/runs/run.py), sends each event of a presenter's run to
the other members as ``room_run`` and keeps them, so a late joiner's (or a
reloaded presenter's) ``room_state`` carries the output at once. A deck move
makes the slide's recorded run, or none, the room's run (``show_slide_run``):
every member then shows the same. Attendees' own runs get the room's shorter
timeout and are counted (how many ran since the presenter's last run or slide
change, how many failed).

All on the server's event loop, as the hub is.
"""

from __future__ import annotations

import dataclasses
import weakref
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from jaxplay import browser_protocol as bp
from jaxplay.server.rooms.state import MAX_KEPT_RUN_BYTES, Room, encode
from jaxplay.server.runs.run import Asker, Run, RunWatcher

if TYPE_CHECKING:
    from jaxplay.server.clients.connection import Client
    from jaxplay.server.rooms.sync import RoomSync

COUNTED_STATUSES = frozenset({"ok", "error", "timeout", "crashed"})
# The kinds of request (worker_protocol.RUN_KINDS) a member runs from the editor: a presenter's becomes the
# room's run, an attendee's counts in the room's round. A Compare column or a pass pipeline is neither.
ROOM_RUN_KINDS = frozenset({"run", "profile"})


class RoomRuns(RunWatcher):
    """The hub's watch over its members' runs. What it reads of the hub, which sets it: which room each
    connection joined, the rooms' sync across replicas, and the counts and saves the hub schedules."""

    joined: dict[Client, Room]
    sync: RoomSync
    counts_soon: Callable[[Room], None]
    _touch: Callable[[Room], None]

    def __init__(self) -> None:
        # Presenters' runs in the priority lane or running from it, by network (``_may_go_first``).
        self.first_in_line: dict[str, Run] = {}
        # The runs of members it watches: their room, and for a presenter's run the connection that runs it.
        self.watching: weakref.WeakKeyDictionary[Run, tuple[Room, Client | None]] = weakref.WeakKeyDictionary()

    async def before_dispatch(self, run: Run, asker: Asker) -> bool:
        """A member's request that executes code. An attendee's, whatever its kind, gets the room's deadline
        (a ``passes`` or Compare request is no way around it); its runs of the program are counted. A
        presenter's run of the program goes first and becomes the room's run. Answers none."""
        room = self.joined.get(asker)  # type: ignore[call-overload]  # a connection that joined, or none
        if room is None:
            return False
        shown = run.request.kind in ROOM_RUN_KINDS  # what a member runs from the editor: the room shows it
        presenter = room.members.get(asker)  # type: ignore[call-overload]
        if not presenter:
            run.request = dataclasses.replace(run.request, timeout_s=min(run.timeout_s,
                                                                         room.record.attendee_timeout_s))
            if shown:
                self.watching[run] = (room, None)
            return False
        if shown:
            run.priority = self._may_go_first(run)
            room.run_events, room.run_bytes, room.run_id = [], 0, run.client_id
            room.new_round()
            self.sync.publish(room, "run_start", {"run_id": run.client_id})
            self.counts_soon(room)
            self.watching[run] = (room, asker)  # type: ignore[assignment]  # a member: a connection
            self._touch(room)
        return False

    def on_event(self, run: Run, event: dict[str, Any]) -> None:
        watched = self.watching.get(run)
        if watched is not None and watched[1] is not None:
            self._presenter_event(watched[0], watched[1], run, event)

    def on_done(self, run: Run, done: dict[str, Any]) -> None:
        watched = self.watching.pop(run, None)
        if watched is None:
            return
        room, presenter = watched
        if presenter is not None:
            self._presenter_event(room, presenter, run, done)
        else:
            self._attendee_done(room, run, done)

    def _may_go_first(self, run: Run) -> bool:
        """One presenter's run per network at a time goes ahead of the queue, whatever rooms that network
        presents: rooms cost nothing to create, so a lane per room let one network hold every slot."""
        self.first_in_line = {network: r for network, r in self.first_in_line.items() if r.state != "done"}
        if run.network in self.first_in_line:
            return False
        self.first_in_line[run.network] = run
        return True

    def _presenter_event(self, room: Room, origin: Client, run: Run, event: dict[str, Any]) -> None:
        if room.run_id != run.client_id:
            return  # a newer run or a slide change took over: followers moved on
        self.sync.publish(room, "run_event", {"run_id": run.client_id, "event": event})
        self.relay_presenter_event(room, event, origin)

    def relay_presenter_event(self, room: Room, event: dict[str, Any], origin: Client | None = None) -> None:
        """Keep the presenter's run event for late joiners and send it to this server's members but the
        connection that runs it (a presenter's reloaded page, or another tab of theirs, follows it too)."""
        frame = encode(bp.room_run_event(room.code, event))
        if room.run_bytes + len(frame) <= MAX_KEPT_RUN_BYTES:
            room.run_events.append(event)
            room.run_bytes += len(frame)
        for member in room.members:
            if member is not origin:
                member.send_encoded(frame, event.get("type") != "done")  # a lost done would leave followers waiting

    def _attendee_done(self, room: Room, run: Run, done: dict[str, Any]) -> None:
        if done.get("status") in COUNTED_STATUSES:
            room.round_statuses[run.session_id] = str(done["status"])
            self.sync.publish(room, "status", {"session": run.session_id, "status": str(done["status"])})
            self.counts_soon(room)


def show_slide_run(room: Room, slide: dict[str, Any] | None) -> None:
    """The room's run becomes the slide's recorded run (or none): what every member shows after a move.

    The events get a run id of their own, so a presenter run still going on is no longer relayed,
    and a page tells this run from the one it showed before. A recorded run over the kept limit
    is left out whole: an output cut short would look like a run that never ended."""
    room.run_events, room.run_bytes, room.run_id = [], 0, None
    recorded = slide.get("recorded_run") if slide else None
    if not recorded:
        return
    run_id = f"slide-{room.code}-{room.version}"
    events = [{**event, "id": run_id} for event in recorded]
    size = sum(len(encode(bp.room_run_event(room.code, event))) for event in events)
    if size <= MAX_KEPT_RUN_BYTES:
        room.run_events, room.run_bytes, room.run_id = events, size, run_id
