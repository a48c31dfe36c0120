"""The Starlette application: routes, and the lifespan that owns the local workers.

Shutdown runs in numbered phases (server/ops/shutdown.py): stop accepting, drain,
tell browsers, then this lifespan's exit: stop local workers (their sandboxes
die with them), save rooms and close storage.
"""

from __future__ import annotations

import contextlib
import logging
import secrets
from collections.abc import AsyncIterator
from dataclasses import dataclass, field

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route, WebSocketRoute
from starlette.websockets import WebSocket

from jaxplay import __version__, run_flags
from jaxplay.server.agents.endpoint import AgentEndpoint
from jaxplay.server.agents.links import RunLinks
from jaxplay.server.agents.tokens import TokenStore
from jaxplay.server.agents.tools import AgentTools
from jaxplay.server.browser_socket import handle_browser_socket
from jaxplay.server.clients.connection import BrowserHooks
from jaxplay.server.clients.hosts import AllowedHosts, AllowedHostsMiddleware
from jaxplay.server.clients.proxies import ClientAddressMiddleware, TrustedProxies, parse_networks
from jaxplay.server.clients.same_origin import SameOriginWritesMiddleware
from jaxplay.server.clients.sessions import SessionKeys, SessionMiddleware
from jaxplay.server.ops import metrics_access
from jaxplay.server.ops.access_log import AccessLogMiddleware
from jaxplay.server.ops.health import health_routes, worker_problems
from jaxplay.server.ops.metrics import CONTENT_TYPE, PlaygroundMetrics
from jaxplay.server.ops.outage import storage_unavailable
from jaxplay.server.pages import assets as page_assets
from jaxplay.server.pages import editor as pages
from jaxplay.server.pages.api_index import ApiIndex
from jaxplay.server.rooms.hub import RoomHub
from jaxplay.server.rooms.pages import room_routes
from jaxplay.server.rooms.store import RoomStore
from jaxplay.server.rooms.sync import RedisRoomSync
from jaxplay.server.runs.brokered_scheduler import BrokeredScheduler
from jaxplay.server.runs.local_workers import LocalWorkers
from jaxplay.server.runs.run import RunWatcher
from jaxplay.server.runs.run_path import RunPath
from jaxplay.server.runs.scheduler import Scheduler
from jaxplay.server.runs.worker_socket import handle_worker_socket
from jaxplay.server.sharing import Sharing
from jaxplay.server.storage.interface import Storage, StorageUnavailable, redact
from jaxplay.settings import Settings

log = logging.getLogger("jaxplay.server")


@dataclass
class AppState:
    settings: Settings
    scheduler: Scheduler
    local_token: str = field(default_factory=lambda: secrets.token_urlsafe(32))
    watchers: list[RunWatcher] = field(default_factory=list)  # of every run, in order (server/runs/run.py)
    browser_hooks: BrowserHooks = field(default_factory=BrowserHooks)
    # The one path of every request that executes code, whoever asks (server/runs/run_path.py).
    run_path: RunPath | None = None
    sharing: Sharing | None = None
    metrics: PlaygroundMetrics | None = None
    draining: bool = False
    rooms: RoomHub | None = None
    local_workers: LocalWorkers | None = None

    @property
    def storage(self) -> Storage:
        assert self.sharing is not None
        return self.sharing.storage


def create_app(settings: Settings) -> Starlette:
    metrics_access.check_settings(settings)
    proxies = TrustedProxies(parse_networks(settings.trusted_proxies), settings.trusted_proxy_header)
    hosts = AllowedHosts(settings.allowed_hosts, settings.host)
    session_keys = SessionKeys.load_or_create(settings.data_dir)
    if settings.broker and not settings.broker.startswith(("redis://", "rediss://", "unix://")):
        raise ValueError(f"--broker must be a redis://[USER:PASSWORD@]HOST:PORT/DB or rediss://... URL, not "
                         f"{redact(settings.broker)!r}.")
    scheduler_class = BrokeredScheduler if settings.broker else Scheduler
    state = AppState(settings=settings, scheduler=scheduler_class(settings, session_keys))
    state.metrics = metrics = PlaygroundMetrics(state.scheduler, state.browser_hooks)
    state.sharing = sharing = Sharing(settings, state.scheduler)
    metrics.cache, metrics.snippets = sharing.cache, sharing.snippets
    state.rooms = rooms = RoomHub(settings, RoomStore(sharing.storage), sharing.snippets)
    # Rooms first (an attendee's shorter deadline is the one the cache checks a recorded run against),
    # the cache last: metrics and rooms must see the runs it answers too.
    state.watchers.extend([rooms, metrics, sharing.cache])
    state.run_path = run_path = RunPath(state.scheduler, state.watchers, state.browser_hooks)
    if isinstance(state.scheduler, BrokeredScheduler):  # rooms span the replicas too
        rooms.sync = RedisRoomSync(state.scheduler.broker)

    # Coding assistants (/mcp): clients of the same run path, sandbox, queues and budgets (server/agents/).
    agents = None
    if settings.mcp == "on":
        links = RunLinks(sharing.snippets, settings, sharing.link_budgets)
        tools = AgentTools(run_path, links)
        agents = AgentEndpoint(settings, tools, TokenStore(sharing.storage))

    async def backends(request: Request) -> JSONResponse:
        await state.scheduler.refresh_waiting()
        return JSONResponse({"version": __version__, "backends": state.scheduler.backends(),
                             "default": state.scheduler.default_backend(), "problems": worker_problems(state)})

    flags_catalogue = page_assets.ConstantJson(run_flags.catalogue())

    async def flags(request: Request) -> Response:
        """The JAX options and XLA flags a run may set (jaxplay/run_flags.py), for the page's flags editor."""
        return flags_catalogue.answer(request)

    async def metrics_page(request: Request) -> Response:
        refused = metrics_access.refusal(request, settings)
        if refused is not None:
            return refused
        await sharing.cache.refresh_size()  # keeps the last size while the database is down
        await metrics.refresh()  # with --broker: the shared queue and Redis's memory, read now
        return Response(metrics.scrape(), media_type=CONTENT_TYPE)

    async def browser_socket(websocket: WebSocket) -> None:
        await handle_browser_socket(websocket, run_path, rooms)

    async def worker_socket(websocket: WebSocket) -> None:
        await handle_worker_socket(websocket, state.scheduler, state.local_token, settings)

    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        if settings.sandbox == "none":
            log.warning("!" * 72)
            log.warning("SANDBOX DISABLED (--sandbox none): user code runs with this server's privileges.")
            log.warning("Use this only for development on a machine you do not care about.")
            log.warning("!" * 72)
        if settings.shutdown_grace_s < settings.run_timeout_s:
            log.warning("--shutdown-grace-s (%g s) is shorter than --run-timeout-s (%g s): a run that uses its whole "
                        "time is cut short when this server or its workers are stopped", settings.shutdown_grace_s,
                        settings.run_timeout_s)
        await sharing.open()  # a database that cannot be reached yet is retried in the background (server/sharing/)
        broker = state.scheduler.broker if isinstance(state.scheduler, BrokeredScheduler) else None
        if broker is not None:
            await broker.start()
            state.browser_hooks.connected.append(
                lambda c: c.spawn(broker.tell_returning_browser(c.session_id, c.emit, state.browser_hooks.told)))
        rooms.start()
        state.local_workers = workers = LocalWorkers(settings, state.local_token,
                                                     on_refusal=state.scheduler.local_worker_refused)
        workers.start()
        try:
            async with agents.running() if agents is not None else contextlib.nullcontext():
                yield
        finally:
            await workers.stop()
            await rooms.stop()
            if broker is not None:
                await broker.stop()
            await sharing.close()
            log.info("shutdown complete")

    routes = [
        Route("/", pages.editor_page),
        *health_routes(state),
        Route("/metrics", metrics_page),
        Route("/api/backends", backends),
        Route("/api/flags", flags),
        *sharing.routes(),
        *room_routes(rooms),
        *ApiIndex(settings).routes(),
        WebSocketRoute("/ws", browser_socket),
        *([Route("/mcp", agents)] if agents is not None else []),
        *page_assets.routes(),
    ]
    # A database outage is a 503 naming it, never a bare 500 (server/ops/outage.py).
    app = Starlette(routes=routes, lifespan=lifespan, exception_handlers={StorageUnavailable: storage_unavailable})
    # Workers dial a listener of their own (loopback by default), never the public port.
    worker_app = Starlette(routes=[WebSocketRoute("/worker", worker_socket)])
    app.state.worker_app = AccessLogMiddleware(worker_app) if settings.access_log else worker_app
    app.state.playground = state
    # Outermost last: who the client is (trusted proxies), then which host it asked for, then whether
    # another site sent it, then its session. server/clients/ holds each, and docs/security.md the why.
    app.add_middleware(pages.SecurityHeaders)
    app.add_middleware(SessionMiddleware, keys=session_keys,
                       new_sessions_per_address_per_hour=settings.new_sessions_per_address_per_hour)
    app.add_middleware(SameOriginWritesMiddleware)
    app.add_middleware(AllowedHostsMiddleware, hosts=hosts)
    app.add_middleware(ClientAddressMiddleware, proxies=proxies)
    if settings.access_log:  # outside them all: what they refuse is logged too
        app.add_middleware(AccessLogMiddleware)
    return app
