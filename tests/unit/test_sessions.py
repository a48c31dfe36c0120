"""Session ids are issued and signed by the server: a client can keep one, never choose one."""

from __future__ import annotations

import httpx
import pytest
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import HTMLResponse, PlainTextResponse
from starlette.routing import Route, WebSocketRoute
from starlette.testclient import TestClient
from starlette.websockets import WebSocket

from jaxplay.server.clients.identity import SCOPE_KEY
from jaxplay.server.clients.sessions import COOKIE, SessionKeys, SessionMiddleware


def test_issued_ids_verify_and_forged_ones_do_not(tmp_path):
    keys = SessionKeys.load_or_create(tmp_path)
    session_id, cookie = keys.issue()
    assert keys.verify(cookie) == session_id
    other = "0" * 32
    assert keys.verify(f"{other}.{cookie.split('.')[1]}") is None
    assert keys.verify(session_id) is None and keys.verify("") is None and keys.verify("a.b.c") is None
    # the key survives a restart: the same cookie is still this session
    assert SessionKeys.load_or_create(tmp_path).verify(cookie) == session_id
    assert (tmp_path / "session.key").stat().st_mode & 0o077 == 0


def test_derived_names_differ_per_session_and_purpose(tmp_path):
    keys = SessionKeys.load_or_create(tmp_path)
    a, _ = keys.issue()
    b, _ = keys.issue()
    assert keys.derived("compile-cache", a) != keys.derived("compile-cache", b)
    assert keys.derived("compile-cache", a) != keys.derived("other", a)
    assert a not in keys.derived("compile-cache", a)


def whoami_app(keys: SessionKeys, per_hour: int = 1000) -> SessionMiddleware:
    """A page ("/", HTML), a JSON answer and a websocket that say who the request counts as."""
    async def page(request: Request) -> HTMLResponse:
        return HTMLResponse(request.scope[SCOPE_KEY].key)

    async def api(request: Request) -> PlainTextResponse:
        return PlainTextResponse(request.scope[SCOPE_KEY].key)

    async def socket(websocket: WebSocket) -> None:
        await websocket.accept()
        await websocket.send_text(websocket.scope[SCOPE_KEY].key)
        await websocket.close()

    app = Starlette(routes=[Route("/", page), Route("/api", api), WebSocketRoute("/ws", socket)])
    return SessionMiddleware(app, keys, new_sessions_per_address_per_hour=per_hour)


@pytest.mark.anyio
async def test_middleware_sets_the_cookie_once_and_keeps_the_session(tmp_path):
    keys = SessionKeys.load_or_create(tmp_path)
    app = whoami_app(keys)
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://t") as client:
        first = await client.get("/")
        assert COOKIE in first.headers["set-cookie"] and "HttpOnly" in first.headers["set-cookie"]
        assert "Secure" not in first.headers["set-cookie"]  # plain http: a Secure cookie would never come back
        second = await client.get("/")
        assert second.text == first.text and "set-cookie" not in second.headers
        client.cookies.set(COOKIE, "f" * 32 + ".forged")
        forged = await client.get("/")
        assert forged.text != first.text and "set-cookie" in forged.headers


@pytest.mark.anyio
async def test_only_a_page_starts_a_session_and_within_its_networks_budget(tmp_path):
    app = whoami_app(SessionKeys.load_or_create(tmp_path), per_hour=3)
    transport = httpx.ASGITransport(app=app, client=("203.0.113.9", 1234))
    async with httpx.AsyncClient(transport=transport, base_url="http://t") as client:
        api = await client.get("/api")
        assert "set-cookie" not in api.headers and len(api.text) == 32  # a session for this request only
        pages = []
        for _ in range(4):  # four new browsers behind one address
            pages.append(await client.get("/"))
            client.cookies.clear()
    assert ["set-cookie" in p.headers for p in pages] == [True, True, True, False]  # the fourth: over budget
    assert pages[3].text == "address:203.0.113.9"  # its visitor counts as the address's one client
    # Another network has its own budget; an IPv6 network is its /48 (a site), not each of its addresses or /64s.
    for host in ("2001:db8:7:7::1", "2001:db8:7:8::2", "2001:db8:7:ffff::3", "2001:db8:7:7:ffff::9"):
        transport = httpx.ASGITransport(app=app, client=(host, 1234))
        async with httpx.AsyncClient(transport=transport, base_url="http://t") as client:
            last = await client.get("/")
    assert "set-cookie" not in last.headers and last.text == "address:2001:db8:7::/48"


def test_a_websocket_never_starts_a_session(tmp_path):
    keys = SessionKeys.load_or_create(tmp_path)
    client = TestClient(whoami_app(keys))
    with client.websocket_connect("/ws") as ws:
        assert ws.receive_text() == "address:testclient"
    session_id, cookie = keys.issue()
    with client.websocket_connect("/ws", headers={"cookie": f"{COOKIE}={cookie}"}) as ws:
        assert ws.receive_text() == session_id


@pytest.mark.anyio
async def test_the_cookie_is_secure_when_the_request_came_over_https(tmp_path):
    app = whoami_app(SessionKeys.load_or_create(tmp_path))
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="https://t") as client:
        assert "; Secure" in (await client.get("/")).headers["set-cookie"]
