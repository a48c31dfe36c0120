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
- a frame of which only the *latest* matters (a room's edit: the whole
  program) takes the place of the one of its kind still waiting, and may take
  out waiting frames it makes moot (an edit, the selection that came alone):
  a follower that falls behind a presenter's typing is sent the latest state,
  not every keystroke, so one room's traffic cannot keep the event loop
  writing for another user;
- any other frame may use ``limit_bytes + headroom_bytes``. Past that the
  connection has overflowed: everything waiting is released, nothing more is
  queued, and the connection is ended. The page reconnects and rejoins its
  room, which is the resync.

So a connection holds at most ``limit_bytes + headroom_bytes`` of waiting
frames, plus what its socket has not sent (``unsent``: the frame its writer
is sending, and the socket's send buffer, where a frame a peer never reads
stays; server/clients/socket_transport.py). A network may open many
connections, so they also share one ``NetworkBytes``: what all of them hold,
send buffers included, counts against one limit. When a frame would pass
it, the connection of that network stuck longest (something unsent, and no
frame taken for ``STUCK_S``: a socket that does not read) is overflowed
first, so one member of a classroom's network cannot hold the budget
against the rest; if none is stuck, the frame is dropped or overflows its
own connection as above.
"""

from __future__ import annotations

import asyncio
import time
from collections import deque
from collections.abc import Callable

# A frame's text, until the writer takes it or a snapshot voids it (then None).
Entry = list[str | None]
# Voided entries the queue may hold before it is compacted (a writer that is stuck takes none out).
DEAD_ENTRIES = 64
# Something unsent, and no frame taken for this long while its network is out of budget: a socket that
# does not read.
STUCK_S = 5.0
# Frames from this size on are checked against everything the network holds, send buffers included. A
# smaller frame is written only while its socket's buffer is under the transport's high-water mark
# (64 KiB: the next send waits), so a connection holds at most about this much more than its outbox counts.
LARGE_FRAME_BYTES = 64 << 10


class NetworkBytes:
    """Bytes the connections of one network hold, against one limit."""

    def __init__(self, limit_bytes: int, clock: Callable[[], float] = time.monotonic) -> None:
        self.limit_bytes = limit_bytes
        self.clock = clock
        self.bytes = 0  # waiting in its connections' outboxes, or taken by their writers
        self.connections = 0
        self.outboxes: set[Outbox] = set()

    def fits(self, size: int) -> bool:
        held = self.bytes
        if size >= LARGE_FRAME_BYTES:
            held += sum(outbox.buffered() for outbox in self.outboxes)
        return held + size <= self.limit_bytes

    def make_room(self, size: int, asking: Outbox) -> bool:
        """Overflow the connections stuck longest until ``size`` more fits; False if it still does not."""
        while not self.fits(size):
            now = self.clock()
            stuck = [o for o in self.outboxes if o is not asking and o.stuck(now)]
            if not stuck:
                return False
            min(stuck, key=lambda o: o.taken_at or 0.0).overflow()
        return True


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
    def __init__(self, limit_bytes: int, headroom_bytes: int, network: NetworkBytes | None = None,
                 send_buffer: Callable[[], int] | None = None) -> None:
        self.limit_bytes = limit_bytes
        self.hard_limit_bytes = limit_bytes + headroom_bytes
        self.network = network or NetworkBytes(1 << 62)
        self.network.outboxes.add(self)
        self.send_buffer = send_buffer  # bytes the socket was given and has not sent, where it can be read
        self.writing = 0  # bytes of the frame the writer took and has not finished writing
        self.taken_at: float | None = None  # when the writer last took a frame
        self.on_overflow: Callable[[], None] = lambda: None  # the connection ends itself
        self.bytes = 0
        self.dropped = 0  # droppable frames dropped since the page was last told
        self.overflowed = False
        self._entries: deque[Entry] = deque()
        self._room_entries: deque[Entry] = deque()  # room frames a snapshot may void, oldest first
        self._latest: dict[str, Entry] = {}  # the waiting frame of each kind of which only the latest matters
        self._live = 0
        self._closed = False
        self._ready = asyncio.Event()

    def empty(self) -> bool:
        return self._live == 0

    def put(self, text: str, *, droppable: bool, room: bool = False, snapshot: bool = False,
            latest: str | None = None, voids: tuple[str, ...] = ()) -> bool:
        """Queue ``text``; False if it was not queued (dropped, overflowed, or the outbox is closed).

        ``latest``: only the latest frame of this kind matters; it takes the place (in the queue) of the one
        still waiting. ``voids``: kinds of ``latest`` frames this one makes moot, taken out if waiting."""
        if self._closed:
            return False
        if snapshot:
            self._void_room_frames()
        for kind in voids:
            self._void(self._latest.pop(kind, None))
        waiting = self._latest.get(latest) if latest is not None else None
        if waiting is not None and waiting[0] is not None:
            return self._replace(waiting, text, droppable)
        size = len(text)  # frames are json.dumps output: ASCII, one byte a character
        network_full = not self.network.make_room(size, self)
        if droppable and (self.bytes + size > self.limit_bytes or network_full):
            self.dropped += 1
            return False
        if self.bytes + size > self.hard_limit_bytes or network_full:
            self.overflow()
            return False
        entry: Entry = [text]
        self._entries.append(entry)
        if room or snapshot:
            while self._room_entries and self._room_entries[0][0] is None:
                self._room_entries.popleft()  # already written: nothing to void
            self._room_entries.append(entry)
        if latest is not None:
            self._latest[latest] = entry
        self.bytes += size
        self.network.bytes += size
        self._live += 1
        self._ready.set()
        return True

    def _replace(self, entry: Entry, text: str, droppable: bool) -> bool:
        """``text`` in the place of the waiting frame ``entry``, if it fits where a new frame would; else the
        waiting one is kept. True if replaced."""
        old = entry[0]
        assert old is not None
        grows = len(text) - len(old)
        if grows > 0 and (self.bytes + grows > (self.limit_bytes if droppable else self.hard_limit_bytes)
                          or not self.network.make_room(grows, self)):
            if droppable:
                self.dropped += 1
            return False
        entry[0] = text
        self.bytes += grows
        self.network.bytes += grows
        return True

    def _void(self, entry: Entry | None) -> None:
        text = entry[0] if entry is not None else None
        if entry is None or text is None:
            return
        entry[0] = None
        self.bytes -= len(text)
        self.network.bytes -= len(text)
        self._live -= 1
        if len(self._entries) - self._live > DEAD_ENTRIES + self._live:
            self._entries = deque(e for e in self._entries if e[0] is not None)

    def _void_room_frames(self) -> None:
        for entry in self._room_entries:
            self._void(entry)
        self._room_entries.clear()
        self._latest.clear()

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
                self.writing, self.taken_at = len(text), self.network.clock()
                return text
            if self._closed:
                return None
            self._ready.clear()
            await self._ready.wait()

    def written(self) -> None:
        """The frame ``get`` gave has been handed to the socket (or never will be); its send buffer counts it
        from now on."""
        self.network.bytes -= self.writing
        self.writing = 0

    def buffered(self) -> int:
        if self.send_buffer is None or self._closed:
            return 0
        try:
            return self.send_buffer()
        except Exception:  # a transport already gone holds nothing
            return 0

    def unsent(self) -> int:
        return self.writing + self.buffered()

    def stuck(self, now: float) -> bool:
        return self.taken_at is not None and now - self.taken_at >= STUCK_S and self.unsent() > 0

    def overflow(self) -> None:
        """Too much waits: release everything and tell the connection, which closes (a page reconnects)."""
        if not self._closed:
            self.overflowed = True
            self.close()
            self.on_overflow()

    def close(self) -> None:
        """Release everything waiting; ``get`` answers None from now on."""
        self._closed = True
        for entry in self._entries:
            entry[0] = None
        self._entries.clear()
        self._room_entries.clear()
        self._latest.clear()
        self.network.bytes -= self.bytes
        self.network.outboxes.discard(self)
        self.written()
        self.bytes = self._live = 0
        self._ready.set()
