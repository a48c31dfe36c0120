"""Fixtures shared by every test layer.

``live``: a real ``jaxplay serve`` (uvicorn) on a free port with its real
local worker and the real bubblewrap sandbox, started once per session.
Tests talk to it over real websockets; nothing stands in for the sandbox.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.live_server import LiveServer, collect, collect_many, done_of, output_text  # noqa: F401
from tests.postgres_server import PostgresServer
from tests.redis_server import RedisServer

pytest_plugins = ["tests.containment"]


def pytest_collection_modifyitems(session: pytest.Session, config: pytest.Config, items: list[pytest.Item]) -> None:
    """Browser tests last: Playwright's sync API keeps an event loop running in the main
    thread for the rest of the session, where ``asyncio.run`` in other tests would fail."""
    items.sort(key=lambda item: "tests/browser/" in item.nodeid.replace("\\", "/"))


@pytest.fixture(scope="session")
def live(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveServer]:
    server = LiveServer(tmp_path_factory.mktemp("live"))
    try:
        server.wait_ready()
        yield server
    finally:
        server.stop()


def serving(make: Callable[[], Any]) -> Iterator[Any]:
    """A real server made by ``make``, stopped after the test; skipped, saying why, only where its Debian
    package is missing."""
    try:
        server = make()
    except FileNotFoundError as missing:
        pytest.skip(str(missing))
    try:
        yield server
    finally:
        server.stop()


def started_postgres() -> PostgresServer:
    server = PostgresServer()
    server.start()
    return server


@pytest.fixture(scope="session")
def postgres() -> Iterator[PostgresServer]:
    """A real PostgreSQL server for the session."""
    yield from serving(started_postgres)


@pytest.fixture
def own_postgres() -> Iterator[PostgresServer]:
    """A PostgreSQL of one test's own, which the test may stop and start (the fault suite)."""
    yield from serving(started_postgres)


@pytest.fixture(params=["sqlite", "postgresql"])
def database_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """The storage suite runs against both engines: a fresh SQLite file, or a fresh PostgreSQL database."""
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path / 'db' / 'jaxplay.sqlite3'}"
    return request.getfixturevalue("postgres").new_database()


@pytest.fixture(scope="session")
def redis_server() -> Iterator[RedisServer]:
    """A real Redis for the session."""
    yield from serving(RedisServer)


@pytest.fixture
def own_redis() -> Iterator[RedisServer]:
    """A Redis of one test's own, which the test may kill and start again (the fault suite)."""
    yield from serving(RedisServer)
