"""The Starlette application: routes, and the lifespan that owns the local workers.

Shutdown, in order: stop accepting (uvicorn), stop local workers (their
sandboxes die with them), and let the open sockets close.
"""

from __future__ import annotations

import contextlib
import logging
import secrets
from collections.abc import AsyncIterator
from dataclasses import dataclass, field

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Mount, Route, WebSocketRoute
from starlette.staticfiles import StaticFiles
from starlette.websockets import WebSocket

from jaxplay import __version__
from jaxplay.settings import Settings
from server import pages
from server.api_index import ApiIndex
from server.browser_socket import RunInterceptor, handle_browser_socket
from server.local_workers import LocalWorkers
from server.room_pages import room_routes
from server.room_store import RoomStore
from server.rooms import RoomHub
from server.scheduler import Scheduler
from server.sessions import SessionKeys, SessionMiddleware
from server.sharing import Sharing
from server.worker_socket import handle_worker_socket

log = logging.getLogger("jaxplay.server")


@dataclass
class AppState:
    settings: Settings
    scheduler: Scheduler
    local_token: str = field(default_factory=lambda: secrets.token_urlsafe(32))
    interceptors: list[RunInterceptor] = field(default_factory=list)
    sharing: Sharing | None = None
    rooms: RoomHub | None = None


def create_app(settings: Settings) -> Starlette:
    session_keys = SessionKeys.load_or_create(settings.data_dir)
    state = AppState(settings=settings, scheduler=Scheduler(settings, session_keys))
    state.sharing = sharing = Sharing(settings, state.scheduler)
    state.interceptors.append(sharing.cache.intercept)
    state.rooms = rooms = RoomHub(settings, RoomStore(sharing.storage), sharing.snippets)

    async def healthz(request: Request) -> JSONResponse:
        return JSONResponse({"ok": True, "version": __version__, "workers": len(state.scheduler.workers),
                             "backends": [b["name"] for b in state.scheduler.backends()]})

    async def backends(request: Request) -> JSONResponse:
        return JSONResponse({"version": __version__, "backends": state.scheduler.backends()})

    async def browser_socket(websocket: WebSocket) -> None:
        await handle_browser_socket(websocket, state.scheduler, state.interceptors, rooms)

    async def worker_socket(websocket: WebSocket) -> None:
        await handle_worker_socket(websocket, state.scheduler, state.local_token, settings)

    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        if settings.sandbox == "none":
            log.warning("!" * 72)
            log.warning("SANDBOX DISABLED (--sandbox none): user code runs with this server's privileges.")
            log.warning("Use this only for development on a machine you do not care about.")
            log.warning("!" * 72)
        sharing.open()
        rooms.start()
        workers = LocalWorkers(settings, state.local_token)
        workers.start()
        try:
            yield
        finally:
            await workers.stop()
            await rooms.stop()
            await sharing.close()

    routes = [
        Route("/", pages.editor_page),
        Route("/healthz", healthz),
        Route("/api/backends", backends),
        *sharing.routes(),
        *room_routes(rooms),
        *ApiIndex(settings).routes(),
        WebSocketRoute("/ws", browser_socket),
        Mount("/assets", app=StaticFiles(directory=pages.ASSETS_DIR, check_dir=False), name="assets"),
    ]
    app = Starlette(routes=routes, lifespan=lifespan)
    # Workers dial a listener of their own (loopback by default), never the public port.
    app.state.worker_app = Starlette(routes=[WebSocketRoute("/worker", worker_socket)])
    app.state.playground = state
    app.add_middleware(pages.SecurityHeaders)
    app.add_middleware(SessionMiddleware, keys=session_keys)
    return app
