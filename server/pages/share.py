"""The pages of a shared snippet: ``/s/{id}`` (the editor) and ``/e/{id}`` (the embed view).

Both are the one page template with the snippet in its boot data, so they
need nothing but this server (no internet). Framing is decided by
``pages.SecurityHeaders``: only ``/e/`` may be put in an iframe, so any site
may make browsers load one, many times at once. A snippet never changes, so
its pages are rendered once and kept (``RenderedPages``): the page of a
large recorded run costs most of a second of the event loop to render.
"""

from __future__ import annotations

import asyncio
import html
from collections import OrderedDict
from collections.abc import Awaitable, Callable
from typing import Any

from starlette.requests import Request
from starlette.responses import HTMLResponse, Response
from starlette.routing import Route

from jaxplay.server.pages.editor import NOT_BUILT, NOT_BUILT_VERSION, asset_version, page_html
from jaxplay.server.storage.snippets import SnippetStore

TITLE_CHARS = 70
# Rendered snippet pages kept, in bytes of HTML; the least recently served goes first.
RENDERED_PAGES_BYTES = 64 << 20


class RenderedPages:
    """Pages by key, rendered once however many ask at once, kept within ``max_bytes``."""

    def __init__(self, max_bytes: int = RENDERED_PAGES_BYTES) -> None:
        self.max_bytes = max_bytes
        self.bytes = 0
        self.pages: OrderedDict[tuple[str, ...], str] = OrderedDict()
        self.rendering: dict[tuple[str, ...], asyncio.Task[str | None]] = {}

    async def get(self, key: tuple[str, ...], render: Callable[[], Awaitable[str | None]]) -> str | None:
        """The page of ``key``; ``render`` makes it (None: there is none, and nothing is kept)."""
        page = self.pages.get(key)
        if page is not None:
            self.pages.move_to_end(key)
            return page
        task = self.rendering.get(key)
        if task is None:  # its own task: a requester that leaves does not cancel it for the others
            task = self.rendering[key] = asyncio.ensure_future(self._render(key, render))
            task.add_done_callback(lambda done: done.cancelled() or done.exception())
        return await asyncio.shield(task)

    async def _render(self, key: tuple[str, ...], render: Callable[[], Awaitable[str | None]]) -> str | None:
        try:
            page = await render()
        finally:
            del self.rendering[key]
        if page is not None and len(page) <= self.max_bytes // 4:
            self.pages[key] = page
            self.bytes += len(page)
            while self.bytes > self.max_bytes:
                self.bytes -= len(self.pages.popitem(last=False)[1])
        return page


def page_title(snippet: dict[str, Any]) -> str:
    """The program's first comment line names the page, as a file's docstring would; else its id."""
    for line in snippet["code"].splitlines():
        text = line.strip()
        if not text:
            continue
        if text.startswith("#") and text.lstrip("#!").strip() and not text.startswith("#!"):
            name = text.lstrip("#").strip()
            if len(name) > TITLE_CHARS:
                name = name[:TITLE_CHARS - 1].rstrip() + "…"
            return f"{name} · JAX Playground"
        break
    return f"Snippet {snippet['id']} · JAX Playground"


def not_found(snippet_id: str) -> HTMLResponse:
    body = (
        "<!doctype html><meta charset=utf-8><title>No such snippet · JAX Playground</title>"
        "<meta name=viewport content='width=device-width, initial-scale=1'>"
        "<body style='font:15px/1.5 system-ui,sans-serif;max-width:36em;margin:12vh auto;padding:0 20px'>"
        f"<h1 style='font-size:22px'>No snippet {html.escape(snippet_id)!s}</h1>"
        "<p>This server has no snippet with that id. Check the link for a missing or extra character.</p>"
        "<p><a href='/'>Open the playground</a></p>"
    )
    return HTMLResponse(body, status_code=404)


def share_page_routes(store: SnippetStore) -> list[Route]:
    pages = RenderedPages()

    def page(mode: str):  # noqa: ANN202 - a route handler
        async def handler(request: Request) -> Response:
            snippet_id = request.path_params["snippet_id"]

            async def render() -> str | None:
                snippet = await store.load(snippet_id)
                if snippet is None:
                    return None
                return page_html({"mode": mode, "snippet": snippet, "page_title": page_title(snippet)})

            version = asset_version()
            if version == NOT_BUILT_VERSION:
                return HTMLResponse(NOT_BUILT, status_code=503)
            body = await pages.get((snippet_id, mode, version), render)
            return not_found(snippet_id) if body is None else HTMLResponse(body)
        return handler

    return [
        Route("/s/{snippet_id}", page("editor"), methods=["GET"]),
        Route("/e/{snippet_id}", page("embed"), methods=["GET"]),
    ]
