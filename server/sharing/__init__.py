"""Sharing: links to a program and its recorded run.

``snippets`` is a snippet (content, checks, id, store; no HTTP), ``create``
makes a link (``POST /api/snippets``, with its network's budgets), ``serve``
is what a link serves (``/s/{id}``, ``/e/{id}``, ``GET /api/snippets/{id}``).
The storage under them (server/storage/) knows nothing of HTTP. ``Sharing``
opens that storage, which the result cache (server/runs/result_cache.py) shares.

``server/app.py`` creates one ``Sharing``, adds ``routes()`` to its routes and
``cache`` to the watchers of every run (server/runs/run.py), and calls ``open``
and ``close`` in its lifespan (close after the workers stopped, so the last
runs' results are written).
"""

from __future__ import annotations

from starlette.routing import Route

from jaxplay.server.runs.result_cache import ResultCache
from jaxplay.server.runs.scheduler import Scheduler
from jaxplay.server.sharing.create import snippet_routes
from jaxplay.server.sharing.serve import share_page_routes
from jaxplay.server.sharing.snippets import SnippetStore
from jaxplay.server.storage.factory import open_storage
from jaxplay.settings import Settings


class Sharing:
    def __init__(self, settings: Settings, scheduler: Scheduler) -> None:
        self.settings = settings
        self.storage = open_storage(settings.database_url, settings.data_dir)
        self.snippets = SnippetStore(self.storage)
        self.cache = ResultCache(self.storage, scheduler, settings.cache_limit_mb << 20)

    def routes(self) -> list[Route]:
        return [*snippet_routes(self.snippets, self.settings), *share_page_routes(self.snippets)]

    async def open(self) -> None:
        await self.storage.open()

    async def close(self) -> None:
        await self.cache.drain()
        await self.storage.close()
