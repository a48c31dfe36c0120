"""What a link serves: ``/s/{id}`` (the editor), ``/e/{id}`` (the embed view) and its stored JSON,
``GET /api/snippets/{id}`` (creating one: ``create.py``).

Both pages are the one page template with the snippet in its boot data, so they
need nothing but this server (no internet). Framing is decided by
``pages.SecurityHeaders``: only ``/e/`` may be put in an iframe, so any site
may make browsers load one, many times at once. So a page costs little:

- the snippet's stored JSON goes into it as stored, never parsed and encoded
  again (a second of the event loop for a large recorded run);
- a snippet never changes, so its pages (and its stored JSON) are made once
  and kept (``RenderedPages``), however many ask at once;
- each is sent in pieces (``in_pieces``), each once the socket has taken
  the one before, so a reader that never reads holds one piece of the
  server's memory, not the page.
"""

from __future__ import annotations

import asyncio
import contextlib
import html
import json
import re
from collections import OrderedDict
from collections.abc import AsyncIterator, Awaitable, Callable

from starlette.requests import Request
from starlette.responses import HTMLResponse, JSONResponse, Response, StreamingResponse
from starlette.routing import Route

from jaxplay.server.pages.editor import NOT_BUILT, NOT_BUILT_VERSION, asset_version, page_html
from jaxplay.server.sharing.snippets import SnippetStore

TITLE_CHARS = 70
# Rendered snippet pages kept, in bytes of HTML; the least recently served goes first.
RENDERED_PAGES_BYTES = 64 << 20
PIECE_CHARS = 64 << 10
# Where the stored document goes in the page's boot data; escaped as the template escapes its JSON.
DOCUMENT_MARK = "@@jaxplay-snippet-document@@"
HTML_SAFE = (("<", "\\u003c"), (">", "\\u003e"), ("&", "\\u0026"), ("'", "\\u0027"))
LONE_SURROGATE = re.compile("[\\ud800-\\udfff]")  # a snippet keeps what it was given: no UTF-8 has them


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


def code_of(document: str) -> str:
    """The program of a stored document, read without parsing the rest (its recorded run may be megabytes):
    documents are written ``{"id":...,"created_at":...,"code":...`` (``SnippetStore._insert``)."""
    at = document.find(',"code":')
    if at >= 0:
        with contextlib.suppress(ValueError):
            code, _ = json.JSONDecoder().raw_decode(document, at + len(',"code":'))
            if isinstance(code, str):
                return code
    return str(json.loads(document).get("code", ""))


def snippet_page(document: str, snippet_id: str, mode: str) -> str | None:
    """The page of a stored document (None while the frontend is not built)."""
    title = LONE_SURROGATE.sub("\ufffd", page_title(code_of(document), snippet_id))
    page = page_html({"mode": mode, "snippet": DOCUMENT_MARK, "page_title": title})
    if page is None:
        return None
    for char, escape in HTML_SAFE:
        document = document.replace(char, escape)
    document = LONE_SURROGATE.sub(lambda found: f"\\u{ord(found.group()):04x}", document)
    return page.replace(json.dumps(DOCUMENT_MARK), document, 1)


async def in_pieces(text: str) -> AsyncIterator[bytes]:
    for start in range(0, len(text), PIECE_CHARS):
        yield text[start:start + PIECE_CHARS].encode("utf-8", "surrogatepass")  # a document as it was stored


def page_title(code: str, snippet_id: str) -> str:
    """The program's first comment line names the page, as a file's docstring would; else its id."""
    for line in code.splitlines():
        text = line.strip()
        if not text:
            continue
        if text.startswith("#") and text.lstrip("#!").strip() and not text.startswith("#!"):
            name = text.lstrip("#").strip()
            if len(name) > TITLE_CHARS:
                name = name[:TITLE_CHARS - 1].rstrip() + "…"
            return f"{name} · JAX Playground"
        break
    return f"Snippet {snippet_id} · JAX Playground"


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
                document = await store.document(snippet_id)
                if document is None:
                    return None
                return snippet_page(document.decode("utf-8", "surrogatepass"), snippet_id, mode)

            version = asset_version()
            if version == NOT_BUILT_VERSION:
                return HTMLResponse(NOT_BUILT, status_code=503)
            body = await pages.get((snippet_id, mode, version), render)
            if body is None:
                return not_found(snippet_id)
            return StreamingResponse(in_pieces(body), media_type="text/html; charset=utf-8")
        return handler

    async def stored_json(request: Request) -> Response:
        snippet_id = request.path_params["snippet_id"]

        async def read() -> str | None:
            document = await store.document(snippet_id)
            return document.decode("utf-8", "surrogatepass") if document is not None else None

        document = await pages.get((snippet_id, "json"), read)
        if document is None:
            return JSONResponse({"message": f"No snippet has the id {snippet_id!r} on this server."}, 404)
        # Immutable: the same id answers the same bytes forever.
        return StreamingResponse(in_pieces(document), media_type="application/json",
                                 headers={"cache-control": "public, max-age=31536000, immutable"})

    return [
        Route("/s/{snippet_id}", page("editor"), methods=["GET"]),
        Route("/e/{snippet_id}", page("embed"), methods=["GET"]),
        Route("/api/snippets/{snippet_id}", stored_json, methods=["GET"]),
    ]
