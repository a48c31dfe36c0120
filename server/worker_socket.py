"""The workers' websocket, ``/worker``: authenticate, register, relay events.

A worker speaks first (``hello`` with its token); a wrong token gets a
``refused`` message naming what to change and the socket is closed with
``REFUSED_CLOSE_CODE``. After ``welcome`` every frame is an ``event`` or a
``finished`` for a run the scheduler gave this worker.
"""

from __future__ import annotations

import hmac
import logging

from starlette.websockets import WebSocket, WebSocketDisconnect

from jaxplay import worker_protocol as wp
from server.scheduler import Scheduler, WorkerLink

log = logging.getLogger("jaxplay.server")

NO_REMOTE_WORKERS = (
    "This server accepts no remote workers: set JAXPLAY_WORKER_TOKEN in the server's environment "
    "and start the worker with the same value in --token."
)
WRONG_TOKEN = (
    "Worker token refused: --token must equal the JAXPLAY_WORKER_TOKEN the server was started with."
)


def token_accepted(offered: str, accepted: list[str]) -> bool:
    return any(t and hmac.compare_digest(offered.encode(), t.encode()) for t in accepted)


async def handle_worker_socket(websocket: WebSocket, scheduler: Scheduler, accepted_tokens: list[str],
                               remote_token: str) -> None:
    await websocket.accept()
    try:
        hello = wp.decode(await websocket.receive_text())
    except (ValueError, KeyError, WebSocketDisconnect) as exc:
        log.info("worker handshake failed: %s", exc)
        await websocket.close(code=1002)
        return
    if not isinstance(hello, wp.WorkerHello) or not token_accepted(hello.token, accepted_tokens):
        reason = WRONG_TOKEN if remote_token else NO_REMOTE_WORKERS
        log.warning("refused a worker (%s): wrong token", getattr(hello, "name", "?"))
        await websocket.send_text(wp.encode(wp.ServerRefused(message=reason)))
        await websocket.close(code=wp.REFUSED_CLOSE_CODE, reason="token refused")
        return
    await websocket.send_text(wp.encode(wp.ServerWelcome()))
    link = WorkerLink(hello=hello, send=websocket.send_text)
    scheduler.add_worker(link)
    try:
        while True:
            message = wp.decode(await websocket.receive_text())
            if isinstance(message, wp.WorkerEvent):
                scheduler.worker_event(link, message)
            elif isinstance(message, wp.WorkerFinished):
                scheduler.worker_finished(link, message)
            elif isinstance(message, wp.WorkerSlots):
                scheduler.worker_slots(link, message)
    except WebSocketDisconnect:
        pass
    except ValueError as exc:
        log.warning("worker %s sent a malformed frame (%s); dropping it", hello.name, exc)
        await websocket.close(code=1002)
    finally:
        scheduler.remove_worker(link)
