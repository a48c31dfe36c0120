"""Tokens for /mcp in both storage engines, and the endpoint's checks in-process (no worker: nothing runs)."""

from __future__ import annotations

import asyncio
import hashlib
from pathlib import Path

import pytest
from starlette.testclient import TestClient

from jaxplay.server.agents.tokens import TokenError, TokenStore
from jaxplay.server.app import create_app
from jaxplay.server.storage.factory import open_storage
from jaxplay.settings import Settings

INITIALIZE = {"jsonrpc": "2.0", "id": 1, "method": "initialize",
              "params": {"protocolVersion": "2025-06-18", "capabilities": {},
                         "clientInfo": {"name": "test", "version": "0"}}}
HEADERS = {"Content-Type": "application/json", "Accept": "application/json, text/event-stream"}


def test_tokens_are_stored_hashed_listed_and_removed_in_either_engine(database_url: str, tmp_path: Path) -> None:
    async def scenario():
        storage = open_storage(database_url, tmp_path)
        await storage.open()
        try:
            store = TokenStore(storage)
            token = await store.add("alice-laptop")
            with pytest.raises(TokenError, match="exists already"):
                await store.add("alice-laptop")
            with pytest.raises(TokenError, match="is not a token name"):
                await store.add("alice laptop; drop")
            stored = await storage.fetch_all("SELECT name, digest FROM agent_tokens")
            named = (await store.name_of(token), await store.name_of(token + "x"), await store.name_of(""))
            listed = [t.name for t in await store.listing()]
            removed = (await store.remove("alice-laptop"), await store.remove("alice-laptop"))
            return token, [dict(row) for row in stored], named, listed, removed, await store.name_of(token)
        finally:
            await storage.close()

    token, stored, named, listed, removed, after_removal = asyncio.run(scenario())
    assert token.startswith("jxp_") and len(token) > 40
    assert stored == [{"name": "alice-laptop", "digest": hashlib.sha256(token.encode()).hexdigest()}]
    assert token not in str(stored)  # only its hash is kept
    assert named == ("alice-laptop", None, None) and listed == ["alice-laptop"]
    assert removed == (True, False) and after_removal is None


def app_settings(tmp_path: Path, **changes) -> Settings:
    return Settings(data_dir=tmp_path / "data", local_workers=0, **changes)


def test_mcp_off_answers_404(tmp_path: Path) -> None:
    with TestClient(create_app(app_settings(tmp_path, mcp="off")), base_url="http://127.0.0.1:8000") as client:
        assert client.post("/mcp", json=INITIALIZE, headers=HEADERS).status_code == 404


def test_without_a_token_mcp_is_refused_unless_anonymous_clients_are_allowed(tmp_path: Path) -> None:
    with TestClient(create_app(app_settings(tmp_path)), base_url="http://127.0.0.1:8000") as client:
        refused = client.post("/mcp", json=INITIALIZE, headers=HEADERS)
        assert refused.status_code == 401 and "jaxplay tokens add NAME" in refused.json()["error"]["message"]
        not_bearer = client.post("/mcp", json=INITIALIZE, headers=HEADERS | {"Authorization": "Basic YTpi"})
        assert not_bearer.status_code == 401 and "Bearer <token>" in not_bearer.json()["error"]["message"]
    with TestClient(create_app(app_settings(tmp_path, mcp_anonymous=True)), base_url="http://127.0.0.1:8000") as client:
        welcomed = client.post("/mcp", json=INITIALIZE, headers=HEADERS)
        assert welcomed.status_code == 200 and welcomed.json()["result"]["serverInfo"]["name"] == "jaxplay"
        # A made-up token is refused even where no token is needed: it is a mistake worth saying.
        made_up = client.post("/mcp", json=INITIALIZE, headers=HEADERS | {"Authorization": "Bearer jxp_nope"})
        assert made_up.status_code == 401
