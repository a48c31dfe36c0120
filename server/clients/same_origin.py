"""What another site's page may not make a visitor's browser do here: write through the API, or open /ws.

A browser adds its cookie and its network address to any request a page
makes, so another site could spend a visitor's budgets (rooms started per
address) or act in their session. Browsers also say who is asking: every
request but GET and HEAD, and every websocket handshake, carries
``Origin``. Hence, for every write (any method but GET, HEAD, OPTIONS):

- the body must be declared ``application/json``. A form or a
  ``text/plain`` post is a "simple" request that another site may send
  without asking; JSON needs a CORS preflight first, which this server
  never grants. Refused with 415.
- ``Origin``, when present, must be this server's own (its host and port
  are the request's ``Host``, which server/clients/hosts.py has checked).
  ``null`` (a sandboxed frame, a ``data:`` page) is another site. ``Sec-Fetch-Site``,
  when present, must say ``same-origin``. Refused with 403.

A request with neither header was sent by no browser (a script, ``curl``,
the tests): it carries nobody's cookie or address but its sender's own, so
there is nobody to protect, and it may write as any client may.
"""

from __future__ import annotations

import logging
from collections import Counter
from urllib.parse import urlsplit

from starlette.responses import JSONResponse
from starlette.types import ASGIApp, Receive, Scope, Send

log = logging.getLogger("jaxplay.server")

SAFE_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})
JSON_TYPE = "application/json"


def origin_allowed(origin: str | None, host: str | None, secure: bool = False) -> bool:
    """Pages of this server only (or clients that send no Origin: no browser's request).

    A sandboxed frame showing user HTML has the origin "null": refusing it is a
    second wall behind the frame's own isolation. A request known to come over https
    (``secure``, from the connection or a trusted proxy) refuses an ``http://`` page of
    the same host: anyone on the visitor's network can write such a page. The other way
    round is allowed: behind a proxy nobody said is trusted, every request looks like http.
    """
    if origin is None:
        return True
    parts = urlsplit(origin)
    schemes = ("https",) if secure else ("http", "https")
    return parts.scheme in schemes and host is not None and parts.netloc.lower() == host.lower()


def write_refusal(method: str, headers: dict[str, str], secure: bool = False,
                  repeated: set[str] | frozenset[str] = frozenset()) -> tuple[int, str] | None:
    """(status, message) refusing a write from another site, or None if it may go on. ``repeated``: the
    headers the request sent more than once (no browser sends these twice: which would count?)."""
    if method in SAFE_METHODS:
        return None
    twice = sorted(repeated & {"origin", "sec-fetch-site", "content-type", "host"})
    if twice:
        return 403, f"This request sends the {twice[0]!r} header more than once; send it once."
    media_type = headers.get("content-type", "").split(";", 1)[0].strip().lower()
    if media_type != JSON_TYPE:
        shown = media_type or "none"
        return 415, (f"Send the body as JSON with 'Content-Type: {JSON_TYPE}' (this request's type is {shown}); "
                     "forms and plain text are not accepted, so other sites cannot post them here.")
    origin = headers.get("origin")
    if not origin_allowed(origin, headers.get("host"), secure):
        return 403, (f"This request came from the page {origin!r}, not from this server's own pages: other sites "
                     "may not create snippets or rooms here.")
    fetch_site = headers.get("sec-fetch-site")
    if fetch_site is not None and fetch_site not in ("same-origin", "none"):
        return 403, (f"This request came from a {fetch_site} page, not from this server's own pages: other sites "
                     "may not create snippets or rooms here.")
    return None


class SameOriginWritesMiddleware:
    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and scope["method"] not in SAFE_METHODS:
            headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope.get("headers", [])}
            counts = Counter(k.decode("latin-1").lower() for k, _ in scope.get("headers", []))
            repeated = {name for name, count in counts.items() if count > 1}
            refused = write_refusal(scope["method"], headers, scope.get("scheme") == "https", repeated)
            if refused is not None:
                status, message = refused
                log.info("refused a %s %s: %s", scope["method"], scope["path"], message)
                await JSONResponse({"message": message}, status_code=status)(scope, receive, send)
                return
        await self.app(scope, receive, send)
