"""One browser connection as the rest of the server sees it, and the hooks that watch them all.

The websocket itself lives at the top (server/browser_socket.py). Rooms, metrics
and shutdown hold connections only as ``Client``, so none of them imports the
socket module, and the socket module may import all of them.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any, Protocol

from jaxplay.server.clients.outbox import NetworkBytesByNetwork, Outbox


class Client(Protocol):
    """A browser connection: who it counts as, and how to send it something."""

    session_id: str  # the client it counts against (fairness, limits, room counts): server/clients/identity.py
    network: str  # the client's address (an IPv6 /48), for per-address limits
    outbox: Outbox  # frames not yet written, bounded; shutdown waits for it to empty

    def emit(self, event: dict[str, Any]) -> None:
        """Encode and queue one event (droppable output is dropped when the browser cannot keep up)."""

    def send_encoded(self, frame: str, droppable: bool, *, snapshot: bool = False, latest: str | None = None,
                     voids: tuple[str, ...] = ()) -> None:
        """Queue a room frame already encoded once for many connections (a room broadcast); a ``snapshot``
        (``room_state``) replaces the room frames still waiting; a ``latest`` frame the waiting one of its
        kind, and ``voids`` kinds it makes moot (``Outbox.put``)."""

    def spawn(self, work: Awaitable[Any]) -> None:
        """Run ``work`` beside the connection, kept referenced until it ends."""


# How a run ended, as its asker was told: (its backend, or None for one refused before it had one; its
# status; for a rejected run, its reason from browser_protocol.REJECTION_REASONS, else None; its kind, one of
# worker_protocol.RUN_KINDS).
RunTold = Callable[[str | None, str, str | None, str], None]


@dataclass
class BrowserHooks:
    """What the server as a whole watches: open connections (told of a shutdown, counted in the
    metrics), the outcome of every run its asker is told, once per run (the metrics count them), and
    new connections (a broker tells them of runs their browser had in flight on a replica that stopped)."""

    open: set[Client] = field(default_factory=set)
    run_told: list[RunTold] = field(default_factory=list)
    connected: list[Callable[[Client], None]] = field(default_factory=list)
    # What each network's connections have waiting or being written, against one limit (clients/outbox.py).
    network_bytes: NetworkBytesByNetwork = field(default_factory=NetworkBytesByNetwork)

    def told(self, backend: str | None, status: str, reason: str | None = None, kind: str = "run") -> None:
        for listener in self.run_told:
            listener(backend, status, reason, kind)
