"""What one browser connection has waiting to be written, bounded in bytes whatever its kind.

Tasks: any code on the event loop puts frames (``put``, never blocks); the
connection's one writer task takes them (``get``) and writes them to the
socket. A browser that reads slowly, or never, cannot make the server hold
more than the bound:

- *droppable* frames (a run's output, a room's edits and relayed output)
  beyond ``limit_bytes`` are dropped and counted; the page is told at the
  run's end, and the next edit carries the whole program again;
- a *snapshot* (``room_state``: a room's whole view) makes every room frame
  still waiting moot, earlier snapshots included: they are taken out, so a
  client that joins and leaves a room again and again holds one snapshot
  here, not one per join;
- any other frame may use ``limit_bytes + headroom_bytes``. Past that the
  connection has overflowed: everything waiting is released, nothing more is
  queued, and the connection is ended. The page reconnects and rejoins its
  room, which is the resync.

So a connection holds at most ``limit_bytes + headroom_bytes`` of waiting
frames, plus the one frame its writer is sending. A network may open many
connections, so they also share one ``NetworkBytes``: what all of them have
waiting *or being written* (a socket nobody reads keeps its frame in the
server's buffers) counts against one limit, and a frame that would pass it
is dropped or overflows its connection as above.
"""

from __future__ import annotations

import asyncio
from collections import deque

# A frame's text, until the writer takes it or a snapshot voids it (then None).
Entry = list[str | None]


class NetworkBytes:
    """Bytes the connections of one network have waiting or being written, against one limit."""

    def __init__(self, limit_bytes: int) -> None:
        self.limit_bytes = limit_bytes
        self.bytes = 0
        self.connections = 0

    def full(self, size: int) -> bool:
        return self.bytes + size > self.limit_bytes


class NetworkBytesByNetwork:
    """One ``NetworkBytes`` per network with connections open; forgotten with its last connection."""

    def __init__(self) -> None:
        self.networks: dict[str, NetworkBytes] = {}

    def take(self, network: str, limit_bytes: int) -> NetworkBytes:
        shared = self.networks.setdefault(network, NetworkBytes(limit_bytes))
        shared.connections += 1
        return shared

    def give_back(self, network: str) -> None:
        shared = self.networks.get(network)
        if shared is not None:
            shared.connections -= 1
            if shared.connections <= 0:
                del self.networks[network]


class Outbox:
    def __init__(self, limit_bytes: int, headroom_bytes: int, network: NetworkBytes | None = None) -> None:
        self.limit_bytes = limit_bytes
        self.hard_limit_bytes = limit_bytes + headroom_bytes
        self.network = network or NetworkBytes(1 << 62)
        self.writing = 0  # bytes of the frame the writer took and has not finished writing
        self.bytes = 0
        self.dropped = 0  # droppable frames dropped since the page was last told
        self.overflowed = False
        self._entries: deque[Entry] = deque()
        self._room_entries: deque[Entry] = deque()  # room frames a snapshot may void, oldest first
        self._live = 0
        self._closed = False
        self._ready = asyncio.Event()

    def empty(self) -> bool:
        return self._live == 0

    def put(self, text: str, *, droppable: bool, room: bool = False, snapshot: bool = False) -> bool:
        """Queue ``text``; False if it was not queued (dropped, overflowed, or the outbox is closed)."""
        if self._closed:
            return False
        if snapshot:
            self._void_room_frames()
        size = len(text)  # frames are json.dumps output: ASCII, one byte a character
        network_full = self.network.full(size)
        if droppable and (self.bytes + size > self.limit_bytes or network_full):
            self.dropped += 1
            return False
        if self.bytes + size > self.hard_limit_bytes or network_full:
            self.overflowed = True
            self.close()
            return False
        entry: Entry = [text]
        self._entries.append(entry)
        if room or snapshot:
            while self._room_entries and self._room_entries[0][0] is None:
                self._room_entries.popleft()  # already written: nothing to void
            self._room_entries.append(entry)
        self.bytes += size
        self.network.bytes += size
        self._live += 1
        self._ready.set()
        return True

    def _void_room_frames(self) -> None:
        for entry in self._room_entries:
            text = entry[0]
            if text is not None:
                entry[0] = None
                self.bytes -= len(text)
                self.network.bytes -= len(text)
                self._live -= 1
        self._room_entries.clear()

    async def get(self) -> str | None:
        """The next frame to write, waiting for one; None once the outbox is closed. The frame counts
        against the network until ``written``."""
        self.written()
        while True:
            while self._entries and not self._closed:
                entry = self._entries.popleft()
                text, entry[0] = entry[0], None  # taken: a later snapshot has nothing to void here
                if text is None:
                    continue  # voided by a later snapshot
                self.bytes -= len(text)
                self._live -= 1
                self.writing = len(text)
                return text
            if self._closed:
                return None
            self._ready.clear()
            await self._ready.wait()

    def written(self) -> None:
        """The frame ``get`` gave has been written (or will never be): the network no longer holds it."""
        self.network.bytes -= self.writing
        self.writing = 0

    def close(self) -> None:
        """Release everything waiting; ``get`` answers None from now on."""
        self._closed = True
        for entry in self._entries:
            entry[0] = None
        self._entries.clear()
        self._room_entries.clear()
        self.network.bytes -= self.bytes
        self.written()
        self.bytes = self._live = 0
        self._ready.set()
