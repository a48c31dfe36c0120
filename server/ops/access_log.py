"""The access log: one line per HTTP request and per websocket connection, on the ``jaxplay.access`` logger.

A line says who (the client's network, as the trusted proxies report it:
server/clients/identity.py), what (method and path), how it ended (the HTTP
status; for a websocket, 101 once accepted or the status its handshake was
refused with, then the close code) and how long it took::

    203.0.113.7 "GET /s/Ab3xY9" 200 3.1ms
    203.0.113.7 "WS /ws" 101 close=1000 35210.4ms

Never a query string, a header, a body or a frame: those may carry a
program, its output, a cookie or a token. The path is written as the client
sent it, percent-encoded, cut at ``MAX_PATH_CHARS``; a link's path holds only
its id. The same fields ride on the record (``extra``) for a structured
formatter. It wraps the whole app, outside every other middleware, so that
what they refuse (a wrong Host, another site's write) is logged too.
``--no-access-log`` (``JAXPLAY_ACCESS_LOG=false``) leaves it out.
"""

from __future__ import annotations

import logging
import time
from typing import Any

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from jaxplay.server.clients.identity import network_of

log = logging.getLogger("jaxplay.access")

MAX_PATH_CHARS = 200
# A websocket closed before it was accepted had its handshake refused: the server answers 403.
REFUSED_HANDSHAKE = 403


class AccessLogMiddleware:
    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] not in ("http", "websocket"):
            await self.app(scope, receive, send)
            return
        started = time.monotonic()
        ending = ConnectionEnding(scope["type"] == "websocket")

        async def watched_send(message: Message) -> None:
            ending.sent(message)
            await send(message)

        async def watched_receive() -> Message:
            message = await receive()
            ending.received(message)
            return message

        try:
            await self.app(scope, watched_receive, watched_send)
        except BaseException:
            ending.failed()
            raise
        finally:
            # Read after the inner layers ran: the trusted-proxy middleware rewrites the scope's client in place.
            log_line(scope, ending, (time.monotonic() - started) * 1000)


class ConnectionEnding:
    """What the app answered and how the connection closed, as seen in the ASGI messages."""

    def __init__(self, websocket: bool) -> None:
        self.websocket = websocket
        self.status: int | None = None
        self.close_code: int | None = None

    def sent(self, message: Message) -> None:
        kind = message["type"]
        if kind in ("http.response.start", "websocket.http.response.start"):
            self.status = message["status"]
        elif kind == "websocket.accept":
            self.status = 101
        elif kind == "websocket.close":
            self.status = self.status or REFUSED_HANDSHAKE
            self.close_code = self.close_code or message.get("code", 1000)

    def received(self, message: Message) -> None:
        if message["type"] == "websocket.disconnect" and self.close_code is None:
            self.close_code = message.get("code", 1005)

    def failed(self) -> None:
        if self.status is None:
            self.status = 500  # what the error middleware outside answers


def log_line(scope: Scope, ending: ConnectionEnding, duration_ms: float) -> None:
    if not log.isEnabledFor(logging.INFO):
        return
    client = scope.get("client")
    network = network_of(client[0] if client else None)
    method = "WS" if ending.websocket else scope.get("method", "?")
    path = path_of(scope)
    status = ending.status if ending.status is not None else 0  # the client left before any answer
    extra: dict[str, Any] = {"client_network": network, "method": method, "path": path, "status": status,
                             "duration_ms": round(duration_ms, 1)}
    if ending.websocket:
        extra["close_code"] = ending.close_code
        log.info('%s "%s %s" %d close=%s %.1fms', network, method, path, status, ending.close_code, duration_ms,
                 extra=extra)
    else:
        log.info('%s "%s %s" %d %.1fms', network, method, path, status, duration_ms, extra=extra)


def path_of(scope: Scope) -> str:
    """The path as sent (percent-encoded: no newline or quote can forge a line), without its query string."""
    raw = scope.get("raw_path")
    if isinstance(raw, bytes):
        text = raw.split(b"?", 1)[0].decode("ascii", "backslashreplace")
    else:
        text = scope.get("path", "").encode("unicode_escape").decode("ascii")
    text = "".join(c if c.isprintable() and c != '"' else f"\\x{ord(c):02x}" for c in text)
    return text if len(text) <= MAX_PATH_CHARS else text[:MAX_PATH_CHARS] + "..."
