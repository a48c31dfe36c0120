"""HTML pages: the editor at ``/``, rendered from one template with boot data.

The built frontend is package data in an installed wheel (server/pages/frontend_dist,
copied there by setup.py's build hook) and frontend/dist in a checkout; if
neither is built the page says how to build it instead of serving a broken editor.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from jinja2 import Environment, FileSystemLoader, select_autoescape
from starlette.requests import Request
from starlette.responses import HTMLResponse, Response
from starlette.types import ASGIApp, Message, Receive, Scope, Send

PROJECT_ROOT = Path(__file__).resolve().parents[2]  # a checkout's root (server/pages/ is two below it)
PACKAGED_ASSETS = Path(__file__).resolve().parent / "frontend_dist" / "assets"
CHECKOUT_ASSETS = PROJECT_ROOT / "frontend" / "dist" / "assets"
# An installed wheel has only the packaged copy; a checkout has only frontend/dist.
ASSETS_DIR = PACKAGED_ASSETS if PACKAGED_ASSETS.is_dir() else CHECKOUT_ASSETS
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
    """The built page's version (its script's time), or ``NOT_BUILT_VERSION``."""
    app_js = ASSETS_DIR / "app.js"
    return str(int(app_js.stat().st_mtime)) if app_js.exists() else NOT_BUILT_VERSION


def page_html(boot: dict[str, Any]) -> str | None:
    """The page with ``boot`` in it; None while the frontend is not built."""
    if not (ASSETS_DIR / "app.js").exists():
        return None
    return TEMPLATES.get_template("page.html").render(boot=boot, asset_version=asset_version())


def render_page(boot: dict[str, Any], status_code: int = 200) -> Response:
    html = page_html(boot)
    return HTMLResponse(NOT_BUILT, status_code=503) if html is None else HTMLResponse(html, status_code=status_code)


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
