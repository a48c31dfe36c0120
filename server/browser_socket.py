"""The browser's websocket, ``/ws``: parse client messages, submit and cancel runs.

Tasks and ownership per connection::

    handle_browser_socket
      ├─ receive loop: parses each frame; bad input gets a ``notice`` or a
      │  ``done`` with status ``rejected``, and the connection keeps working
      └─ writer task: sends every event from ``outbox`` in order, so a slow
         browser never blocks a worker's event stream. The outbox is bounded
         for every kind of frame (server/clients/outbox.py); a connection
         that overflows it is closed, and the page reconnects and resyncs.

When the browser goes away its runs in flight are cancelled and it leaves
its workshop room. Room messages (``room_*``) are handed to the ``RoomHub``
(server/rooms/hub.py), which may also send pre-encoded frames through ``outbox``
(one ``json.dumps`` for a whole room). Who the connection counts as comes from
``SessionMiddleware`` (server/clients/identity.py): its browser session, or
its network's address client when it has no session cookie. Rooms, metrics
and shutdown see a connection only as a ``Client`` and watch them all
through ``BrowserHooks`` (server/clients/connection.py).

Every request that executes code (``run``, ``passes``) takes the server's one
path, server/runs/run_path.py: its client message is lowered to a
``RunRequest`` (jaxplay/worker_protocol.py), the run's watchers see it before
it is queued (rooms, metrics, the result cache), and unless one answered it
the scheduler queues it. What is this connection's own (an id in flight, its
runs in flight) is checked here first; every refusal is counted by the path.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
from collections.abc import Awaitable
from typing import TYPE_CHECKING, Any

from starlette.websockets import WebSocket, WebSocketDisconnect

from jaxplay import browser_protocol as bp
from jaxplay import json_input
from jaxplay import worker_protocol as wp
from jaxplay.server.clients.identity import identity_of
from jaxplay.server.clients.outbox import Outbox
from jaxplay.server.clients.same_origin import origin_allowed
from jaxplay.server.clients.socket_transport import transport_of
from jaxplay.server.ops.outage import outage_message
from jaxplay.server.runs.run import Run
from jaxplay.server.runs.run_path import RunPath
from jaxplay.server.storage.interface import StorageUnavailable

if TYPE_CHECKING:
    from jaxplay.server.rooms.hub import RoomHub

log = logging.getLogger("jaxplay.server")

# What one connection may have waiting to be sent; beyond it, output-like events are dropped (with a notice).
OUTBOX_LIMIT_BYTES = 32 << 20
# Beyond the limit, room for frames that are not dropped (a run's done, a room's state); past it the connection
# is closed: a page reconnects and rejoins, a client that never reads holds no more than this.
OUTBOX_HEADROOM_BYTES = 8 << 20
# How long a connection that overflowed its outbox is given to take its close frame.
OVERFLOW_CLOSE_S = 5.0
DROPPABLE = frozenset({"stdout", "stderr", "display", "compiled", "compiling", "sharding", "fn_timing", "timing",
                       "notice", "profile", "roofline"})
# What a ``passes`` request's run sends the page: its answer and its course, not the program's output.
PASSES_EVENTS = frozenset({"queued", "started", "passes", "error", "notice", "done"})


class BrowserConnection:
    def __init__(self, websocket: WebSocket, path: RunPath, rooms: RoomHub | None = None) -> None:
        self.path = path  # of every run this connection starts (server/runs/run_path.py)
        self.hooks = path.hooks
        self.websocket = websocket
        # The client this connection counts against (fairness, limits, room counts), and its network.
        identity = identity_of(websocket.scope)
        self.session_id = identity.key
        self.network = identity.network
        self.scheduler = path.scheduler
        self.settings = path.settings
        self.rooms = rooms
        # Its own bound, and its network's share with every other connection of that network, counting
        # what the socket was given and has not sent.
        self.transport = transport_of(websocket.scope)
        self.outbox = Outbox(OUTBOX_LIMIT_BYTES, OUTBOX_HEADROOM_BYTES, self.hooks.network_bytes.take(
            self.network, self.settings.max_outbox_mb_per_address << 20),
            self.transport.get_write_buffer_size if self.transport is not None else None)
        self.overflowed = asyncio.Event()
        self.outbox.on_overflow = self._overflowed  # also when another connection of its network needs room
        self.runs: dict[str, Run] = {}
        self._tasks: set[asyncio.Future[Any]] = set()

    def send_encoded(self, frame: str, droppable: bool, *, snapshot: bool = False, latest: str | None = None,
                     voids: tuple[str, ...] = ()) -> None:
        """A room frame already encoded as JSON (a room broadcast encodes once for every follower).

        A droppable frame (a room's edit or run output) is dropped when this browser cannot keep up,
        like a run's own output; the next edit carries the whole program again. A snapshot (the room's
        whole state) replaces the room frames still waiting; an edit the edit still waiting (``latest``).
        """
        self.outbox.put(frame, droppable=droppable, room=True, snapshot=snapshot, latest=latest, voids=voids)

    def emit(self, event: dict[str, Any]) -> None:
        kind = event.get("type")
        text = json.dumps(event, separators=(",", ":"))
        if self.outbox.dropped and kind == "done":
            self._put(json.dumps(bp.notice_event(
                f"{self.outbox.dropped} events were dropped because this connection could not keep up with the "
                "run's output.", event.get("id")) | {"level": "warning"}, separators=(",", ":")), droppable=False)
            self.outbox.dropped = 0
        # A browser that cannot keep up loses output, never the server's memory.
        self._put(text, droppable=kind in DROPPABLE, room=str(kind).startswith("room_"), snapshot=kind == "room_state")
        if kind == "done":
            run = self.runs.get(event.get("id", ""))
            if run is not None and run.state == "done":  # its one done (counted by the run's path)
                del self.runs[event["id"]]

    def _put(self, text: str, *, droppable: bool, room: bool = False, snapshot: bool = False) -> None:
        self.outbox.put(text, droppable=droppable, room=room, snapshot=snapshot)

    def _overflowed(self) -> None:
        if not self.overflowed.is_set():
            log.info("closing a /ws connection of %s: it let more wait unread than it or its network may",
                     self.network)
            self.overflowed.set()

    async def write_loop(self) -> None:
        while (text := await self.outbox.get()) is not None:  # the frame counts until the next get
            await self.websocket.send_text(text)

    def spawn(self, work: Awaitable[Any]) -> None:
        """Run ``work`` alongside this connection (a hook's lookup), keeping it referenced until it ends."""
        task = asyncio.ensure_future(work)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def serve(self) -> None:
        writer = asyncio.create_task(self.write_loop())
        receiver = asyncio.create_task(self.receive_loop())
        overflowed = asyncio.create_task(self.overflowed.wait())
        self.hooks.open.add(self)
        for listener in self.hooks.connected:
            listener(self)
        try:
            done, _ = await asyncio.wait({receiver, overflowed}, return_when=asyncio.FIRST_COMPLETED)
            if receiver in done:
                receiver.result()  # a failure of the receive loop is the handler's failure
        finally:
            self.hooks.open.discard(self)
            if self.rooms is not None:
                self.rooms.leave(self)
            for run in list(self.runs.values()):
                self.scheduler.cancel(run)
            self.outbox.close()
            for task in (writer, receiver, overflowed):
                task.cancel()
        if self.overflowed.is_set():
            await self._close_overflowed()

    async def _close_overflowed(self) -> None:
        """The writer may be stuck on a socket nobody reads; a reader that does read gets the close. A
        closed transport keeps its send buffer until the peer reads it: one that is not read is dropped."""
        deadline = asyncio.get_running_loop().time() + OVERFLOW_CLOSE_S
        with contextlib.suppress(Exception):
            async with asyncio.timeout_at(deadline):
                await self.websocket.close(code=1013, reason="this connection could not keep up; reconnect")
                while self.outbox.send_buffer is not None and self.outbox.send_buffer() > 0:
                    await asyncio.sleep(0.1)
        with contextlib.suppress(Exception):  # a transport already gone has nothing to drop
            if self.transport is not None and self.transport.get_write_buffer_size() > 0:
                self.transport.abort()

    async def receive_loop(self) -> None:
        with contextlib.suppress(WebSocketDisconnect):
            while not self.overflowed.is_set():  # frames already received may not yield to the loop between them
                frame = await self.websocket.receive()
                if frame["type"] == "websocket.disconnect":
                    return
                await self.handle_frame(frame.get("text"), frame.get("bytes"))
                # Frames already received are handed over without a pause: take turns with everyone else's
                # work (a presenter's burst of edits fans out to every follower).
                await asyncio.sleep(0)

    async def handle_frame(self, text: str | None, data: bytes | None) -> None:
        try:
            message = bp.parse_client_message(text if data is None else data,
                                              max_code_bytes=self.settings.max_code_bytes)
        except bp.ProtocolError as exc:
            readable = text if data is None else bp.frame_text(data)
            is_run = _looks_like_run(readable)
            if is_run:
                self.path.refused(_frame_kind(readable), exc)
            self.tell_refusal(exc, is_run)
            return
        if isinstance(message, bp.RoomMessage):
            if self.rooms is None:
                self.emit(bp.notice_event("Workshop rooms are not available on this server."))
                return
            try:
                await self.rooms.handle(self, message)
            except StorageUnavailable as exc:  # rooms are stored: a database outage is told, the socket stays
                self.emit(bp.notice_event(outage_message(exc)))
            return
        if isinstance(message, bp.ClientCancel):
            run = self.runs.get(message.id)
            if run is None:
                self.emit(bp.notice_event(f"No run with id {message.id!r} is in flight on this connection.", message.id))
            else:
                self.scheduler.cancel(run)
            return
        try:
            await self.start(message)
        except bp.ProtocolError as exc:
            self.tell_refusal(exc, is_run=True)

    def tell_refusal(self, exc: bp.ProtocolError, is_run: bool) -> None:
        """A refused request's answer: its ``done`` (rejected) when it names a run not in flight here, else a
        notice. Counted by whoever refused it (``RunPath.refused``)."""
        run_id = exc.run_id
        if is_run and run_id is not None and run_id not in self.runs:
            self.emit(bp.rejected(run_id, str(exc), exc.reason))
        else:
            self.emit(bp.notice_event(str(exc), run_id))

    async def start(self, message: bp.ClientRun | bp.ClientPasses) -> None:
        """A run or a ``passes`` request, through the server's one path once this connection has room for it.

        A ``passes`` request shows XLA's pass pipeline of one compilation: the program runs again, in a fresh
        sandbox, until that compilation, which is compiled once more with per-pass dumps
        (sandbox/capture/pass_pipeline.py). Its page gets the request's answer and course, not the output."""
        emit = self.emit
        if isinstance(message, bp.ClientPasses):
            kind = "passes"
            asked: dict[str, Any] = {"options": wp.RunOptions(
                inspect=True, passes=wp.PassesTarget(key=message.key, fn=message.fn)), "flags": message.flags}

            def emit(event: dict[str, Any]) -> None:
                if event.get("type") in PASSES_EVENTS:
                    self.emit(event)
        else:
            kind = "compare" if message.compare else "profile" if message.profile else "run"
            asked = {"timeout_s": message.timeout_s, "fresh": message.fresh, "compare": message.compare,
                     "options": wp.RunOptions(inspect=message.inspect, profile=message.profile),
                     "flags": message.flags}
        try:
            self._check_room_for_run(message.id)
            request = self.path.request(message.code, backend=message.backend, runtime=message.runtime,
                                        run_id=message.id, **asked)
        except bp.ProtocolError as exc:
            self.path.refused(kind, exc)
            raise
        run = Run(client_id=message.id, request=request, emit=emit, session_id=self.session_id, network=self.network)
        self.runs[run.client_id] = run
        try:
            await self.path.start(run, self)
        except bp.ProtocolError:
            del self.runs[run.client_id]
            raise

    def _check_room_for_run(self, run_id: str) -> None:
        if run_id in self.runs:
            raise bp.ProtocolError(
                f"A run with id {run_id!r} is already in flight on this connection; choose a new id.", run_id,
                reason="duplicate_id")
        if len(self.runs) >= self.settings.max_runs_per_connection:
            raise bp.ProtocolError(
                f"This connection already has {len(self.runs)} runs in flight (the limit is "
                f"{self.settings.max_runs_per_connection}); wait for one to finish or cancel one.", run_id,
                reason="connection_limit")


def _looks_like_run(text: str | None) -> bool:
    """Read even from a frame that is not JSON (a NaN, nesting too deep), so its refusal is counted as a run's."""
    return isinstance(text, str) and json_input.top_level_strings(text, ("type",)).get("type") in bp.RUN_MESSAGE_TYPES


def _frame_kind(text: str | None) -> str:
    """The kind (``wp.RUN_KINDS``) a refused run's frame asked for, as far as it can be read."""
    fields = json_input.top_level_strings(text or "", ("type",))
    return "passes" if fields.get("type") == "passes" else "run"


async def handle_browser_socket(websocket: WebSocket, path: RunPath, rooms: RoomHub | None = None) -> None:
    if not origin_allowed(websocket.headers.get("origin"), websocket.headers.get("host"), websocket.url.scheme == "wss"):
        log.info("refused a /ws connection from origin %r", websocket.headers.get("origin"))
        await websocket.close(code=1008)  # before accept: the handshake is answered 403
        return
    await websocket.accept()
    connection = BrowserConnection(websocket, path, rooms)
    scheduler = path.scheduler
    try:
        try:
            scheduler.attach_client(connection.session_id, connection.network)
        except bp.ProtocolError as exc:
            await websocket.send_text(json.dumps(bp.notice_event(str(exc))))
            await websocket.close(code=1008)
            return
        try:
            await connection.serve()
        finally:
            scheduler.detach_client(connection.session_id, connection.network)
    finally:
        connection.outbox.close()
        connection.hooks.network_bytes.give_back(connection.network)
