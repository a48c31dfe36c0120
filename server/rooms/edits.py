"""A presenter's edits on their way to the followers: the room's latest state, at most every ``EDIT_EVERY_S``.

A follower needs the room's latest program and selection, not every keystroke. The page sends a presenter's
edits at most every 40 ms; a script may send thousands at once, and each broadcast is a frame for every
follower. So an edit goes out at once when the room sent none in the last ``EDIT_EVERY_S``, and otherwise
one broadcast of the room's state as it then is follows when that time is up (trailing edge): a flood
costs 25 broadcasts a second, whatever its rate. Each follower's outbox then keeps only the latest edit
waiting (server/clients/outbox.py), for a follower that reads slower still.

All on the server's event loop: one timer per room with an edit waiting, owned here, cancelled when a
deck move's full state supersedes it (``drop``).
"""

from __future__ import annotations

import asyncio
import weakref
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from jaxplay import browser_protocol as bp

if TYPE_CHECKING:
    from jaxplay.server.clients.connection import Client
    from jaxplay.server.rooms.state import Room

EDIT_EVERY_S = 0.04


@dataclass(eq=False)
class _Waiting:
    sent_at: float = float("-inf")
    timer: asyncio.TimerHandle | None = None
    code_changed: bool = False  # since the last broadcast: the next one carries the program
    origin: Client | None = None  # the presenter connection that made the latest edit: it has it


class FollowerEdits:
    def __init__(self, sent: Callable[[Room, str | None], None]) -> None:
        # Told after each broadcast (the room, and its program when it changed): other replicas, the save.
        self.sent = sent
        self._rooms: weakref.WeakKeyDictionary[Room, _Waiting] = weakref.WeakKeyDictionary()

    def edited(self, room: Room, origin: Client, code_changed: bool) -> None:
        """``origin`` changed ``room``'s program (``code_changed``) or its selection: the followers get it now or
        with the room's next broadcast."""
        waiting = self._rooms.setdefault(room, _Waiting())
        waiting.code_changed |= code_changed
        waiting.origin = origin
        if waiting.timer is not None:
            return  # a broadcast is due: it sends the state as it will be then
        loop = asyncio.get_running_loop()
        wait = waiting.sent_at + EDIT_EVERY_S - loop.time()
        if wait <= 0:
            self._broadcast(room)
        else:
            waiting.timer = loop.call_later(wait, self._broadcast, room)

    def drop(self, room: Room) -> None:
        """The room's whole state was just sent (a slide move): nothing of an edit is left to send."""
        waiting = self._rooms.pop(room, None)
        if waiting is not None and waiting.timer is not None:
            waiting.timer.cancel()

    def _broadcast(self, room: Room) -> None:
        waiting = self._rooms.get(room)
        if waiting is None:
            return
        waiting.timer = None
        waiting.sent_at = asyncio.get_running_loop().time()
        code = room.record.program if waiting.code_changed else None
        waiting.code_changed = False
        room.broadcast(bp.room_edit_event(room.code, room.version, code, room.selection), skip=waiting.origin)
        self.sent(room, code)
