"""Fixtures shared by every test layer, and the tiers: each folder marks its tests.

``live``: a real ``jaxplay serve`` (uvicorn) on a free port with its real
local worker and the real bubblewrap sandbox, started once per session.
Tests talk to it over real websockets; nothing stands in for the sandbox.

The tiers (markers registered in pyproject.toml) come from the folder a test is in, so
``-m unit`` selects exactly tests/unit and a new file needs no marker of its own.

``live_on_runtime``: the same, once with the worker's own JAX and once per
runtime ``JAXPLAY_LIVE_RUNTIMES`` lists (default: the newest test runtime,
JAX 0.12 in its own Python 3.13), that runtime made the default so every
``live.run`` runs on it. A module that must hold on every line (the sandbox's
containment and isolation, the libraries) takes it as its ``live``.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from jaxplay.sandbox.runtimes import store
from tests.live_server import LiveServer, collect, collect_many, done_of, output_text  # noqa: F401
from tests.postgres_server import PostgresServer
from tests.redis_server import RedisServer
from tests.runtimes_server import TEST_RUNTIMES, runtimes_dir

pytest_plugins = ["tests.containment"]


# Folder -> markers. A browser test drives the live server, and so counts as live too.
FOLDER_MARKERS = {
    "unit": ("unit",),
    "live": ("live",),
    "browser": ("browser", "live"),
    "security": ("security",),
    "fidelity": ("fidelity",),
    "gpu": ("gpu",),
    "packaging": ("packaging",),
}


def tier_folder(item: pytest.Item) -> str:
    """The folder under tests/ that holds ``item`` ('' for a test outside any)."""
    parts = Path(str(item.path)).relative_to(Path(__file__).parent).parts
    return parts[0] if len(parts) > 1 else ""


def pytest_itemcollected(item: pytest.Item) -> None:
    """Before ``-m`` selects: each test gets its folder's markers."""
    folder = tier_folder(item)
    if folder not in FOLDER_MARKERS:
        raise pytest.UsageError(f"{item.nodeid}: tests live in one of the tier folders tests/{{{','.join(FOLDER_MARKERS)}}}/ "
                                "(tests/conftest.py FOLDER_MARKERS); move it there or add its folder")
    for name in FOLDER_MARKERS[folder]:
        item.add_marker(name)


def pytest_collection_modifyitems(session: pytest.Session, config: pytest.Config, items: list[pytest.Item]) -> None:
    """Browser tests last: Playwright's sync API keeps an event loop running in the main
    thread for the rest of the session, where ``asyncio.run`` in other tests would fail."""
    items.sort(key=lambda item: tier_folder(item) == "browser")


@pytest.hookimpl(tryfirst=True)
def pytest_configure(config: pytest.Config) -> None:
    """Under pytest-xdist, each worker must still meet the tests in that order. ``--dist load``,
    ``loadfile``, ``loadscope`` and ``loadgroup`` hand a worker tests in collection order, except that
    the last three first sort files by their number of tests (``--loadscope-reorder``, on by
    default), which would hand a worker a browser file before a live one: that sort is turned off.
    ``worksteal`` takes tests from the end of another worker's queue, so it cannot keep the order."""
    if getattr(config.option, "dist", "no") == "worksteal":
        raise pytest.UsageError("--dist worksteal would run browser tests before others in a worker "
                                "(tests/conftest.py); use --dist loadfile, as make test does")
    if hasattr(config.option, "loadscopereorder"):
        config.option.loadscopereorder = False


@pytest.fixture(scope="session")
def live(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveServer]:
    server = LiveServer(tmp_path_factory.mktemp("live"))
    try:
        server.wait_ready()
        yield server
    finally:
        server.stop()


NEWEST_TEST_RUNTIME = max(TEST_RUNTIMES, key=store.version_key) if TEST_RUNTIMES else ""
LIVE_RUNTIMES = [v for v in os.environ.get("JAXPLAY_LIVE_RUNTIMES", NEWEST_TEST_RUNTIME).split(",") if v]


@pytest.fixture(scope="session", params=[None, *LIVE_RUNTIMES], ids=lambda v: f"jax-{v}" if v else "own-jax")
def live_on_runtime(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveServer]:
    """A real server whose runs, naming no runtime, run on ``request.param`` (None: the worker's own JAX)."""
    version = request.param
    extra: list[str] = []
    if version is not None:
        if store.record_of(runtimes_dir(), version) is None:
            pytest.skip(f"JAX {version} is not installed in {runtimes_dir()}: run `make runtimes`")
        extra = ["--runtimes", version, "--default-runtime", version, "--runtimes-dir", str(runtimes_dir())]
    server = LiveServer(tmp_path_factory.mktemp(f"live-{version or 'own'}"), extra)
    try:
        server.wait_ready(timeout_s=240)
        if version is not None:
            (cpu,) = server.get_json("/api/backends")["backends"]
            assert cpu["jax_version"] == version, cpu["runtimes"]  # every run of the module gets it
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


@pytest.fixture
def replica_pair(own_redis: RedisServer, tmp_path: Path) -> Iterator[tuple[LiveServer, LiveServer]]:
    """Replicas A (no worker) and B (one slot) on ``own_redis``, ready: each run of A's browser crosses to B."""
    from tests.live.faults import origin_and_executor

    with origin_and_executor(tmp_path, own_redis.url) as servers:
        yield servers
