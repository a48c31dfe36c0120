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

A database that cannot be reached at start (down, or full of connections)
does not stop the server: ``open`` returns, and a task of its own (owned here,
cancelled by ``close``) tries again with backoff, logging why each time.
Meanwhile runs are served (without the result cache) and links answer 503
naming the database. What would not fix itself (a newer schema, a folder that
cannot be created) still stops the start.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging

from starlette.routing import Route

from jaxplay.server.runs.result_cache import ResultCache
from jaxplay.server.runs.scheduler import Scheduler
from jaxplay.server.sharing.create import LinkBudgets, snippet_routes
from jaxplay.server.sharing.serve import share_page_routes
from jaxplay.server.sharing.snippets import SnippetStore
from jaxplay.server.storage import leftovers
from jaxplay.server.storage.factory import open_storage
from jaxplay.server.storage.interface import StorageUnavailable
from jaxplay.settings import Settings

log = logging.getLogger("jaxplay.storage")

# Between tries to reach a database that could not be reached at start; the last one repeats.
OPEN_RETRY_DELAYS_S = (1.0, 2.0, 5.0, 10.0)


class Sharing:
    def __init__(self, settings: Settings, scheduler: Scheduler) -> None:
        self.settings = settings
        self.storage = open_storage(settings.database_url, settings.data_dir)
        self.snippets = SnippetStore(self.storage)
        self.link_budgets = LinkBudgets(settings)  # per network, however a link is made
        self.cache = ResultCache(self.storage, scheduler, settings.cache_limit_mb << 20)
        self.opening: asyncio.Task[None] | None = None  # tries again while the database cannot be reached
        self.checking: asyncio.Task[dict[str, int]] | None = None  # links left in another store (leftovers.py)
        self.session_keys = scheduler.session_keys  # checks a recorded run's vouches (runs/output_vouch.py)

    def routes(self) -> list[Route]:
        return [*snippet_routes(self.snippets, self.settings, self.link_budgets, self.session_keys),
                *share_page_routes(self.snippets)]

    async def open(self) -> None:
        try:
            await self.storage.open()
        except StorageUnavailable as exc:
            log.warning("storage: %s. Runs are served meanwhile; links and rooms answer 503 until it can be "
                        "reached. Trying again in %g s.", exc, OPEN_RETRY_DELAYS_S[0])
            self.opening = asyncio.create_task(self._open_when_reachable())
            return
        await self._opened()

    async def _open_when_reachable(self) -> None:
        for attempt in range(1, 1 << 30):
            await asyncio.sleep(OPEN_RETRY_DELAYS_S[min(attempt - 1, len(OPEN_RETRY_DELAYS_S) - 1)])
            try:
                await self.storage.open()
            except StorageUnavailable as exc:
                delay = OPEN_RETRY_DELAYS_S[min(attempt, len(OPEN_RETRY_DELAYS_S) - 1)]
                log.warning("storage: still cannot be reached (try %d): %s. Trying again in %g s.", attempt, exc,
                            delay)
                continue
            except Exception:  # e.g. a newer schema: it will not fix itself; say so loudly, and stop trying
                log.exception("storage: cannot be used; links and rooms answer 503 until the server is fixed and "
                              "restarted")
                return
            log.info("storage: reached after %d more tries; links and rooms are served again", attempt)
            await self._opened()
            return

    async def _opened(self) -> None:
        # In the background: a large SQLite file left in the data dir must not hold up the start.
        self.checking = asyncio.create_task(leftovers.warn_of_links_elsewhere(self.storage, self.settings.data_dir))

    async def close(self) -> None:
        for task in (self.opening, self.checking):
            if task is not None:
                task.cancel()
                with contextlib.suppress(asyncio.CancelledError, Exception):  # each logged its own failure
                    await task
        await self.cache.drain()
        await self.storage.close()
