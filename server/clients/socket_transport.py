"""What a websocket's peer has not yet read: the socket's transport, handed to the app in its ASGI scope.

ASGI has no word for a send buffer. A frame sent to a peer that never reads
stays in the server's memory all the same: uvicorn writes the whole frame
into the socket's transport, and its ``send`` returns, before the peer has
read a byte (it waits only before the *next* frame). So the bytes a browser
connection holds (server/clients/outbox.py) include the transport's buffer,
and a connection that overflows is aborted, not closed: a closed transport
keeps its buffer until the peer reads it, which such a peer never does.

``TransportInScope`` is uvicorn's websocket protocol with the transport
added as ``scope["extensions"]["jaxplay.transport"]`` (``jaxplay serve``
uses it for the public listener). Served any other way, a connection has no
transport to read, and only what waits in its outbox counts.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from typing import Any

from uvicorn.protocols.websockets.websockets_sansio_impl import WebSocketsSansIOProtocol

TRANSPORT_EXTENSION = "jaxplay.transport"


class TransportInScope(WebSocketsSansIOProtocol):
    async def run_asgi(self) -> None:
        self.scope.setdefault("extensions", {})[TRANSPORT_EXTENSION] = self.transport  # type: ignore[typeddict-item]
        await super().run_asgi()


def transport_of(scope: Mapping[str, Any]) -> asyncio.WriteTransport | None:
    transport = (scope.get("extensions") or {}).get(TRANSPORT_EXTENSION)
    is_one = all(callable(getattr(transport, name, None)) for name in ("get_write_buffer_size", "abort"))
    return transport if is_one else None
