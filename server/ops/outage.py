"""What a request that needs the database is answered while the database cannot be reached.

The storage engines raise ``StorageUnavailable`` (server/storage/interface.py)
when the database is down, restarting or failing over. Instead of a bare 500,
the app answers 503 naming the cause, with ``Retry-After``: JSON
``{"message": ...}`` for the API (as every other API error), a short page for
the HTML pages (a shared link, a room). Nothing else changes: runs go on
without the result cache, ``/metrics`` keeps answering, and ``/readyz`` says
which check failed (server/ops/health.py).
"""

from __future__ import annotations

import html
import logging

from starlette.requests import Request
from starlette.responses import HTMLResponse, JSONResponse, Response

from jaxplay.server.storage.interface import StorageUnavailable

log = logging.getLogger("jaxplay.storage")

RETRY_AFTER_S = 5


def outage_message(exc: StorageUnavailable) -> str:
    return (f"The playground's database is unavailable right now ({exc}), so links and rooms cannot be read or "
            "saved; try again in a moment. Running code still works.")


async def storage_unavailable(request: Request, exc: Exception) -> Response:
    """Starlette's exception handler for ``StorageUnavailable``."""
    assert isinstance(exc, StorageUnavailable)
    log.warning("%s %s answered 503: %s", request.method, request.url.path, exc)
    message = outage_message(exc)
    headers = {"retry-after": str(RETRY_AFTER_S), "cache-control": "no-store"}
    if request.url.path.startswith("/api/"):
        return JSONResponse({"message": message}, status_code=503, headers=headers)
    body = ("<!doctype html><meta charset=utf-8><title>Database unavailable · JAX Playground</title>"
            "<meta name=viewport content='width=device-width, initial-scale=1'>"
            "<body style='font:15px/1.5 system-ui,sans-serif;max-width:36em;margin:12vh auto;padding:0 20px'>"
            "<h1 style='font-size:22px'>Database unavailable</h1>"
            f"<p>{html.escape(message)}</p><p><a href=''>Try again</a> · <a href='/'>Open the playground</a></p>")
    return HTMLResponse(body, status_code=503, headers=headers)
