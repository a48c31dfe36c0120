"""The workers' websocket, ``/worker``: authenticate, register, relay events.

A web page may not connect (a handshake with ``Origin`` is refused). A
worker speaks first (``hello`` with its token); a wrong token gets a
``refused`` message naming what to change and the socket is closed with
``REFUSED_CLOSE_CODE``. After ``welcome`` every frame is an ``event`` or a
``finished`` for a run the scheduler gave this worker, its ``slots``, or its
``draining`` (it was told to stop: the scheduler gives it no new run).
"""

from __future__ import annotations

import contextlib
import hmac
import logging

from starlette.websockets import WebSocket, WebSocketDisconnect

from jaxplay import worker_protocol as wp
from jaxplay.server.runs.scheduler import Scheduler, WorkerLink
from jaxplay.settings import Settings

log = logging.getLogger("jaxplay.server")

NO_REMOTE_WORKERS = (
    "This server accepts no remote workers: set JAXPLAY_WORKER_TOKEN in the server's environment "
    "and start the worker with the same value in --token."
)
WRONG_TOKEN = (
    "Worker token refused: --token must equal the JAXPLAY_WORKER_TOKEN the server was started with."
)


def token_accepted(offered: str, accepted: str) -> bool:
    return bool(accepted) and hmac.compare_digest(offered.encode(), accepted.encode())


async def _receive_text(websocket: WebSocket) -> str:
    """The next text frame; a binary frame or a close ends the conversation (ValueError / disconnect)."""
    frame = await websocket.receive()
    if frame["type"] == "websocket.disconnect":
        raise WebSocketDisconnect(frame.get("code", 1000))
    text = frame.get("text")
    if not isinstance(text, str):
        raise ValueError("binary frames are not part of the worker protocol; send JSON text frames")
    return text


async def handle_worker_socket(websocket: WebSocket, scheduler: Scheduler, local_token: str,
                               settings: Settings) -> None:
    if "origin" in websocket.headers:
        # A web page (browsers always send Origin; workers never do). Websockets have no CORS, so any page
        # open in a browser on this host reaches the loopback listener, where frames may be 256 MiB.
        log.info("refused a /worker connection from the page %r", websocket.headers["origin"])
        await websocket.close(code=1008)  # before accept: the handshake is answered 403
        return
    await websocket.accept()
    try:
        hello = wp.decode(await _receive_text(websocket))
    except (ValueError, WebSocketDisconnect) as exc:
        log.info("worker handshake failed: %s", exc)
        with contextlib.suppress(Exception):
            await websocket.close(code=1002, reason=str(exc)[:120])
        return
    local = isinstance(hello, wp.WorkerHello) and token_accepted(hello.token, local_token)
    remote = isinstance(hello, wp.WorkerHello) and token_accepted(hello.token, settings.worker_token)
    if not (local or remote):
        reason = WRONG_TOKEN if settings.worker_token else NO_REMOTE_WORKERS
        log.warning("refused a worker (%s): wrong token", getattr(hello, "name", "?"))
        await websocket.send_text(wp.encode(wp.ServerRefused(message=reason)))
        await websocket.close(code=wp.REFUSED_CLOSE_CODE, reason="token refused")
        return
    await websocket.send_text(wp.encode(wp.ServerWelcome()))
    link = WorkerLink(hello=hello, send=websocket.send_text, trusted=local or settings.trust_remote_results,
                      local=local)
    scheduler.add_worker(link)
    try:
        while True:
            message = wp.decode(await _receive_text(websocket))
            if isinstance(message, wp.WorkerEvent):
                scheduler.worker_event(link, message)
            elif isinstance(message, wp.WorkerFinished):
                scheduler.worker_finished(link, message)
            elif isinstance(message, wp.WorkerSlots):
                scheduler.worker_slots(link, message)
            elif isinstance(message, wp.WorkerDraining):
                scheduler.worker_draining(link, message)
    except WebSocketDisconnect:
        pass
    except ValueError as exc:
        log.warning("worker %s sent a malformed frame (%s); dropping it", hello.name, exc)
        with contextlib.suppress(Exception):
            await websocket.close(code=1002, reason=str(exc)[:120])
    finally:
        scheduler.remove_worker(link)
