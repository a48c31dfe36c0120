"""Browser sessions: an unguessable id the server issues and signs, never one a client picks.

A session is one browser (its cookie jar), not one connection: the compile
cache of the warm engine, fairness between clients and workshop rooms all key
on it. The id travels in the HttpOnly cookie ``jaxplay_session`` as
``<id>.<mac>``; the MAC (HMAC-SHA256 with a key kept in the data dir) proves
the server issued it, so a client can keep its id but cannot choose another
one.

``SessionMiddleware`` puts the request's ``ClientIdentity``
(server/clients/identity.py) in ``scope["jaxplay.client"]``:

- a valid cookie: that session;
- no valid cookie on a page (an HTML answer) the browser was sent to (not an
  image, frame or fetch of another site's page): a new session, and its cookie,
  while the network has budget left (``new_sessions_per_address_per_hour``,
  generous enough for a classroom behind one NAT); beyond it, no cookie:
  the browser counts as its network's address client until budget returns;
- no valid cookie otherwise (a websocket, the JSON API): the network's
  address client. A websocket never mints a session: a script opening
  sockets without the cookie is one client, however many it opens.

The cookie is ``Secure`` whenever the request came over https, as judged by
server/clients/proxies.py (trusted proxies only).
"""

from __future__ import annotations

import hashlib
import hmac
import os
import secrets
from http.cookies import SimpleCookie
from pathlib import Path

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from jaxplay.server.clients.budgets import Budgets
from jaxplay.server.clients.identity import SCOPE_KEY, ClientIdentity, address_client, network_of

COOKIE = "jaxplay_session"
KEY_FILE = "session.key"
COOKIE_MAX_AGE_S = 30 * 24 * 3600
ID_BYTES = 16


class SessionKeys:
    """Issues and verifies session ids, and derives per-session names for other stores."""

    def __init__(self, key: bytes) -> None:
        self.key = key

    @classmethod
    def load_or_create(cls, data_dir: Path) -> SessionKeys:
        """The signing key survives restarts, so sessions (and their caches) do too."""
        path = data_dir / KEY_FILE
        data_dir.mkdir(parents=True, exist_ok=True)
        try:
            key = path.read_bytes()
        except FileNotFoundError:
            key = secrets.token_bytes(32)
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
            with os.fdopen(fd, "wb") as f:
                f.write(key)
        if len(key) < 32:
            raise ValueError(f"{path} holds a key shorter than 32 bytes: delete it to make a new one.")
        return cls(key)

    def _mac(self, purpose: str, value: str) -> str:
        return hmac.new(self.key, f"{purpose}:{value}".encode(), hashlib.sha256).hexdigest()

    def issue(self) -> tuple[str, str]:
        """A new session id and its cookie value."""
        session_id = secrets.token_hex(ID_BYTES)
        return session_id, f"{session_id}.{self._mac('cookie', session_id)[:32]}"

    def verify(self, cookie_value: str | None) -> str | None:
        """The session id a cookie carries, or None if the server did not issue it."""
        if not cookie_value or cookie_value.count(".") != 1:
            return None
        session_id, mac = cookie_value.split(".")
        if len(session_id) != 2 * ID_BYTES or not all(c in "0123456789abcdef" for c in session_id):
            return None
        return session_id if hmac.compare_digest(mac, self._mac("cookie", session_id)[:32]) else None

    def mac(self, purpose: str, value: str) -> str:
        """The server's HMAC-SHA256 of ``value`` for ``purpose`` (hex): a word only this server can give."""
        return self._mac(purpose, value)

    def derived(self, purpose: str, session_id: str) -> str:
        """A stable name for ``session_id`` in another store (e.g. the worker's compile cache) that
        reveals nothing about the id itself."""
        return self._mac(purpose, session_id)[:32]


def cookie_from_headers(headers: list[tuple[bytes, bytes]]) -> str | None:
    for name, value in headers:
        if name == b"cookie":
            jar = SimpleCookie()
            try:
                jar.load(value.decode("latin-1"))
            except Exception:  # a malformed Cookie header is no session, not an error
                continue
            if COOKIE in jar:
                return jar[COOKIE].value
    return None


class SessionMiddleware:
    def __init__(self, app: ASGIApp, keys: SessionKeys, new_sessions_per_address_per_hour: int) -> None:
        self.app = app
        self.keys = keys
        self.minting = Budgets(per_hour=new_sessions_per_address_per_hour)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] not in ("http", "websocket"):
            await self.app(scope, receive, send)
            return
        network = network_of(scope["client"][0] if scope.get("client") else None)
        session_id = self.keys.verify(cookie_from_headers(scope.get("headers", [])))
        if session_id is not None:
            scope[SCOPE_KEY] = ClientIdentity(key=session_id, network=network)
            await self.app(scope, receive, send)
            return
        if scope["type"] != "http" or not self.minting.allows(network) or _loaded_by_another_site(scope):
            scope[SCOPE_KEY] = address_client(network)
            await self.app(scope, receive, send)
            return
        # A page load may start a session: it is this request's identity already (a room page counts
        # its unknown codes against it), and its cookie is set, and the budget spent, only on an HTML answer.
        session_id, new_cookie = self.keys.issue()
        scope[SCOPE_KEY] = ClientIdentity(key=session_id, network=network)
        secure = "; Secure" if scope.get("scheme") == "https" else ""

        async def send_with_cookie(message: Message) -> None:
            if message["type"] == "http.response.start" and _is_html(message) and self.minting.spend(network):
                cookie = f"{COOKIE}={new_cookie}; Path=/; Max-Age={COOKIE_MAX_AGE_S}; HttpOnly; SameSite=Lax{secure}"
                message["headers"] = [*message.get("headers", []), (b"set-cookie", cookie.encode())]
            await send(message)

        await self.app(scope, receive, send_with_cookie)


def _loaded_by_another_site(scope: Scope) -> bool:
    """A request another site's page made the visitor's browser send (an image, a frame, a fetch), not a visit.

    Such a request starts no session: the SameSite=Lax cookie of its answer never comes back from there, and
    a page elsewhere could load the playground a thousand times to spend its visitors' network's budget of new
    sessions (a classroom's newcomers would then share one client). A visit, typed in or a link followed from
    elsewhere, is a top-level navigation to a document; browsers without ``Sec-Fetch-*`` headers are believed.
    """
    headers = dict(scope.get("headers", []))
    if headers.get(b"sec-fetch-site") != b"cross-site":
        return False
    return headers.get(b"sec-fetch-mode") != b"navigate" or headers.get(b"sec-fetch-dest") != b"document"


def _is_html(message: Message) -> bool:
    return any(k.lower() == b"content-type" and v.startswith(b"text/html") for k, v in message.get("headers", []))
