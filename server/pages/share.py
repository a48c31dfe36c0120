"""The pages of a shared snippet: ``/s/{id}`` (the editor) and ``/e/{id}`` (the embed view).

Both are the one page template with the snippet in its boot data, so they
need nothing but this server (no internet). Framing is decided by
``pages.SecurityHeaders``: only ``/e/`` may be put in an iframe.
"""

from __future__ import annotations

import html
from typing import Any

from starlette.requests import Request
from starlette.responses import HTMLResponse, Response
from starlette.routing import Route

from jaxplay.server.pages.editor import render_page
from jaxplay.server.storage.snippets import SnippetStore

TITLE_CHARS = 70


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
    def page(mode: str):  # noqa: ANN202 - a route handler
        async def handler(request: Request) -> Response:
            snippet_id = request.path_params["snippet_id"]
            snippet = await store.load(snippet_id)
            if snippet is None:
                return not_found(snippet_id)
            return render_page({"mode": mode, "snippet": snippet, "page_title": page_title(snippet)})
        return handler

    return [
        Route("/s/{snippet_id}", page("editor"), methods=["GET"]),
        Route("/e/{snippet_id}", page("embed"), methods=["GET"]),
    ]
