"""Session ids are issued and signed by the server: a client can keep one, never choose one."""

from __future__ import annotations

import httpx
import pytest
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import PlainTextResponse
from starlette.routing import Route

from jaxplay.server.clients.sessions import COOKIE, SCOPE_KEY, SessionKeys, SessionMiddleware


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


@pytest.mark.anyio
async def test_middleware_sets_the_cookie_once_and_keeps_the_session(tmp_path):
    async def whoami(request: Request) -> PlainTextResponse:
        return PlainTextResponse(request.scope[SCOPE_KEY])

    keys = SessionKeys.load_or_create(tmp_path)
    app = SessionMiddleware(Starlette(routes=[Route("/", whoami)]), keys)
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://t") as client:
        first = await client.get("/")
        assert COOKIE in first.headers["set-cookie"] and "HttpOnly" in first.headers["set-cookie"]
        second = await client.get("/")
        assert second.text == first.text and "set-cookie" not in second.headers
        client.cookies.set(COOKIE, "f" * 32 + ".forged")
        forged = await client.get("/")
        assert forged.text != first.text and "set-cookie" in forged.headers
