"""What health and shutdown read and change of a running replica.

server/app.py's ``AppState`` is the one implementation; ops/ sees it only
through ``Replica``, so the app may import ops without a circle.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from jaxplay.server.clients.connection import BrowserHooks
    from jaxplay.server.runs.local_workers import LocalWorkers
    from jaxplay.server.runs.scheduler import Scheduler
    from jaxplay.server.storage.interface import Storage


class Replica(Protocol):
    scheduler: Scheduler
    browser_hooks: BrowserHooks
    draining: bool  # phase 1 of shutdown sets it; /readyz then answers 503
    local_workers: LocalWorkers | None  # the workers this server started (None until its lifespan starts)

    @property
    def storage(self) -> Storage: ...
