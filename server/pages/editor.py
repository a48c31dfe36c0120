"""HTML pages: the editor at ``/``, rendered from one template with boot data.

The built frontend is package data in an installed wheel (server/pages/frontend_dist,
copied there by setup.py's build hook) and frontend/dist in a checkout (./assets
finds and serves it); if neither is built the page says how to build it instead
of serving a broken editor.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from jinja2 import Environment, FileSystemLoader, select_autoescape
from starlette.requests import Request
from starlette.responses import HTMLResponse, Response
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from jaxplay.server.pages.assets import ASSETS_DIR, built_page

__all__ = ["ASSETS_DIR", "NOT_BUILT", "NOT_BUILT_VERSION", "asset_version", "editor_page", "page_html", "render_page"]

TEMPLATES = Environment(loader=FileSystemLoader(Path(__file__).parent / "templates"),
                        autoescape=select_autoescape(["html"]))
NOT_BUILT = (
    "<!doctype html><title>JAX Playground</title><h1>The frontend is not built</h1>"
    "<p>Run <code>make run</code> (or <code>cd frontend &amp;&amp; npm ci &amp;&amp; npm run build</code>) "
    "and reload.</p>"
)
# Embeds (/e/...) may be framed anywhere; every other page refuses to be framed.
FRAMEABLE_PREFIXES = ("/e/",)
FRAME_SRC = "frame-src 'none'"


NOT_BUILT_VERSION = "0"


def asset_version() -> str:
    """The built page's version (its script's hashed name), or ``NOT_BUILT_VERSION``."""
    page = built_page()
    return page.version if page is not None else NOT_BUILT_VERSION


def page_html(boot: dict[str, Any]) -> str | None:
    """The page with ``boot`` in it; None while the frontend is not built."""
    page = built_page()
    if page is None:
        return None
    return TEMPLATES.get_template("page.html").render(boot=boot, page=page)


def render_page(boot: dict[str, Any], status_code: int = 200) -> Response:
    html = page_html(boot)
    if html is None:
        return HTMLResponse(NOT_BUILT, status_code=503)
    # The page names this build's files: a browser asks again each time (a new build, new names).
    return HTMLResponse(html, status_code=status_code, headers={"Cache-Control": "no-cache"})


async def editor_page(request: Request) -> Response:
    return render_page({"mode": "editor", "snippet": None, "page_title": "JAX Playground"})


class SecurityHeaders:
    """Framing policy and content-type sniffing protection on every HTTP response."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        frameable = scope["path"].startswith(FRAMEABLE_PREFIXES)

        async def send_with_headers(message: Message) -> None:
            if message["type"] == "http.response.start":
                headers = list(message.get("headers", []))
                ancestors = "* file:" if frameable else "'none'"  # '*' alone excludes decks opened from disk
                policy = f"frame-ancestors {ancestors}"
                if any(k == b"content-type" and v.startswith(b"text/html") for k, v in headers):
                    # The frames of our pages hold only srcdoc documents (a run's HTML), and no
                    # navigation of theirs may load anything, not even a tracker's pixel.
                    policy += f"; {FRAME_SRC}"
                headers.append((b"content-security-policy", policy.encode()))
                headers.append((b"x-content-type-options", b"nosniff"))
                if not frameable:
                    headers.append((b"x-frame-options", b"DENY"))
                message["headers"] = headers
            await send(message)

        await self.app(scope, receive, send_with_headers)
