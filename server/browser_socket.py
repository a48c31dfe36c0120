"""The browser's websocket, ``/ws``: parse client messages, submit and cancel runs.

Tasks and ownership per connection::

    handle_browser_socket
      ├─ receive loop: parses each frame; bad input gets a ``notice`` or a
      │  ``done`` with status ``rejected``, and the connection keeps working
      └─ writer task: sends every event from ``outbox`` in order, so a slow
         browser never blocks a worker's event stream

When the browser goes away its runs in flight are cancelled and it leaves
its workshop room. Room messages (``room_*``) are handed to the ``RoomHub``
(server/rooms/hub.py), which may also send pre-encoded frames through ``outbox``
(one ``json.dumps`` for a whole room). Rooms, metrics and shutdown see a connection only as a
``Client`` and watch them all through ``BrowserHooks`` (server/clients/connection.py).
"""

from __future__ import annotations

import asyncio
import json
import logging
import uuid
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from starlette.websockets import WebSocket, WebSocketDisconnect

from jaxplay import browser_protocol as bp
from jaxplay import json_input
from jaxplay.server.clients.connection import BrowserHooks
from jaxplay.server.clients.sessions import SCOPE_KEY
from jaxplay.server.runs.scheduler import Run, Scheduler
from jaxplay.server.storage.interface import StorageUnavailable
from jaxplay.server.storage.outage import outage_message

if TYPE_CHECKING:
    from jaxplay.server.rooms.hub import RoomHub

log = logging.getLogger("jaxplay.server")

# What one connection may have waiting to be sent; beyond it, output-like events are dropped (with a notice).
OUTBOX_LIMIT_BYTES = 32 << 20
DROPPABLE = frozenset({"stdout", "stderr", "display", "compiled", "compiling", "sharding", "fn_timing", "timing",
                       "notice"})
# Hooks that may answer a run before it is queued (the result cache): return True if handled.
RunInterceptor = Callable[[bp.ClientRun, Run], Awaitable[bool]]


class BrowserConnection:
    def __init__(self, websocket: WebSocket, scheduler: Scheduler, interceptors: list[RunInterceptor],
                 rooms: RoomHub | None = None, hooks: BrowserHooks | None = None) -> None:
        self.hooks = hooks or BrowserHooks()
        self.websocket = websocket
        # The client this connection counts against (fairness, limits, room counts): its browser session.
        # A socket without a session cookie gets a fresh one from the middleware; "" only in-process.
        self.session_id: str = websocket.scope.get(SCOPE_KEY) or uuid.uuid4().hex
        self.scheduler = scheduler
        self.settings = scheduler.settings
        self.interceptors = interceptors
        self.rooms = rooms
        self.address = websocket.client.host if websocket.client else ""
        self.outbox: asyncio.Queue[str | None] = asyncio.Queue()
        self.outbox_bytes = 0
        self.dropped = 0
        self.runs: dict[str, Run] = {}
        self._tasks: set[asyncio.Future[Any]] = set()

    def send_encoded(self, frame: str, droppable: bool) -> None:
        """A frame already encoded as JSON (a room broadcast encodes once for every follower).

        A droppable frame (a room's edit or run output) is dropped when this browser cannot keep up,
        like a run's own output; the next edit carries the whole program again.
        """
        if droppable and self.outbox_bytes + len(frame) > OUTBOX_LIMIT_BYTES:
            self.dropped += 1
            return
        self.outbox_bytes += len(frame)
        self.outbox.put_nowait(frame)

    def emit(self, event: dict[str, Any]) -> None:
        text = json.dumps(event, separators=(",", ":"))
        if self.outbox_bytes + len(text) > OUTBOX_LIMIT_BYTES and event.get("type") in DROPPABLE:
            self.dropped += 1  # a browser that cannot keep up loses output, never the server's memory
            return
        if self.dropped and event.get("type") == "done":
            self._queue(bp.notice_event(f"{self.dropped} events were dropped because this connection could not "
                                        "keep up with the run's output.", event.get("id")) | {"level": "warning"})
            self.dropped = 0
        self._queue(event, text)
        if event.get("type") == "done":
            run = self.runs.get(event.get("id", ""))
            if run is not None and run.state == "done":
                del self.runs[event["id"]]

    def _queue(self, event: dict[str, Any], text: str | None = None) -> None:
        text = text if text is not None else json.dumps(event, separators=(",", ":"))
        self.outbox_bytes += len(text)
        self.outbox.put_nowait(text)

    async def write_loop(self) -> None:
        while (text := await self.outbox.get()) is not None:
            self.outbox_bytes -= len(text)
            await self.websocket.send_text(text)

    def spawn(self, work: Awaitable[Any]) -> None:
        """Run ``work`` alongside this connection (a hook's lookup), keeping it referenced until it ends."""
        task = asyncio.ensure_future(work)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def serve(self) -> None:
        writer = asyncio.create_task(self.write_loop())
        self.hooks.open.add(self)
        for listener in self.hooks.connected:
            listener(self)
        try:
            while True:
                frame = await self.websocket.receive()
                if frame["type"] == "websocket.disconnect":
                    break
                await self.handle_frame(frame.get("text"), frame.get("bytes"))
        except WebSocketDisconnect:
            pass
        finally:
            self.hooks.open.discard(self)
            if self.rooms is not None:
                self.rooms.leave(self)
            for run in list(self.runs.values()):
                self.scheduler.cancel(run)
            self.outbox.put_nowait(None)
            writer.cancel()

    async def handle_frame(self, text: str | None, data: bytes | None) -> None:
        try:
            message = bp.parse_client_message(text if data is None else data,
                                              max_code_bytes=self.settings.max_code_bytes)
        except bp.ProtocolError as exc:
            self.refuse(exc, is_run=_looks_like_run(text))
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
            await self.start_run(message)
        except bp.ProtocolError as exc:
            self.refuse(exc, is_run=True)

    def refuse(self, exc: bp.ProtocolError, is_run: bool) -> None:
        run_id = exc.run_id
        if is_run:
            for listener in self.hooks.run_rejected:
                listener(exc.reason)
        if is_run and run_id is not None and run_id not in self.runs:
            self.emit(bp.rejected(run_id, str(exc)))
        else:
            self.emit(bp.notice_event(str(exc), run_id))

    async def start_run(self, message: bp.ClientRun) -> None:
        if message.id in self.runs:
            raise bp.ProtocolError(
                f"A run with id {message.id!r} is already in flight on this connection; choose a new id.", message.id,
                reason="duplicate_id")
        if len(self.runs) >= self.settings.max_runs_per_connection:
            raise bp.ProtocolError(
                f"This connection already has {len(self.runs)} runs in flight (the limit is "
                f"{self.settings.max_runs_per_connection}); wait for one to finish or cancel one.", message.id,
                reason="connection_limit")
        limit = self.settings.run_timeout_s
        if message.timeout_s is not None and message.timeout_s > limit:
            raise bp.ProtocolError(f"Field 'timeout_s' may be at most {limit:g} seconds on this server.", message.id,
                                   reason="timeout_too_long")
        try:
            backend = self.scheduler.resolve_backend(message.backend)
        except bp.ProtocolError as exc:
            raise bp.ProtocolError(str(exc), message.id, exc.reason) from None
        run = Run(client_id=message.id, code=message.code, backend=backend,
                  timeout_s=float(message.timeout_s or limit),
                  options={"inspect": message.inspect}, emit=self.emit, session_id=self.session_id)
        if self.rooms is not None:
            self.rooms.prepare_run(self, run)  # presenter lane and broadcast, attendee timeout, room counts
        self.runs[message.id] = run
        for intercept in self.interceptors:
            try:
                if await intercept(message, run):
                    return
            except Exception:  # a hook (the cache, metrics) that fails must never cost the run its done
                log.exception("run %s: a run hook failed; the run goes on without it", run.key)
        try:
            self.scheduler.submit(run)
        except bp.ProtocolError as exc:
            del self.runs[message.id]
            raise bp.ProtocolError(str(exc), message.id, exc.reason) from None


def _looks_like_run(text: str | None) -> bool:
    try:
        return isinstance(text, str) and json_input.loads(text).get("type") == "run"
    except (ValueError, AttributeError):
        return False


def origin_allowed(origin: str | None, host: str | None) -> bool:
    """Pages of this server only (or clients that send no Origin, like scripts and tests).

    A sandboxed frame showing user HTML has the origin "null": refusing it is a
    second wall behind the frame's own isolation.
    """
    if origin is None:
        return True
    return urlsplit(origin).netloc == host and urlsplit(origin).scheme in ("http", "https")


async def handle_browser_socket(websocket: WebSocket, scheduler: Scheduler,
                                interceptors: list[RunInterceptor], rooms: RoomHub | None = None,
                                hooks: BrowserHooks | None = None) -> None:
    if not origin_allowed(websocket.headers.get("origin"), websocket.headers.get("host")):
        log.info("refused a /ws connection from origin %r", websocket.headers.get("origin"))
        await websocket.close(code=1008)  # before accept: the handshake is answered 403
        return
    await websocket.accept()
    connection = BrowserConnection(websocket, scheduler, interceptors, rooms, hooks)
    try:
        scheduler.attach_client(connection.session_id)
    except bp.ProtocolError as exc:
        await websocket.send_text(json.dumps(bp.notice_event(str(exc))))
        await websocket.close(code=1008)
        return
    try:
        await connection.serve()
    finally:
        scheduler.detach_client(connection.session_id)
