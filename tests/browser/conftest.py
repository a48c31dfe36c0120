"""Browser tests: Playwright driving Debian Chromium against the real server.

``page_at(path)`` opens a page of the ``live`` server (tests/conftest.py: real
uvicorn, worker and sandbox) in a fresh browser context, so localStorage
(the saved draft, the chosen backend) never leaks between tests. Uncaught
JavaScript errors on a page fail the test that opened it.

Set ``JAXPLAY_BROWSER_BASE_URL=http://127.0.0.1:8000`` to run these tests
against a server you started yourself instead of ``live``.

The bundle under frontend/dist is rebuilt first when a source file is newer
than it, so these tests never exercise a stale build.
"""

from __future__ import annotations

import fcntl
import os
import subprocess
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from playwright.sync_api import Browser, Page, Request, sync_playwright

from tests.browser.helpers import PageAt
from tests.live_server import LiveServer
from tests.runtimes_server import require_runtimes, runtimes_dir

PROJECT_ROOT = Path(__file__).resolve().parent.parent.parent
FRONTEND = PROJECT_ROOT / "frontend"
BUNDLE = FRONTEND / "dist" / "manifest.json"
CHROMIUM = Path("/usr/bin/chromium")
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--no-first-run",
]
VIEWPORT = {"width": 1280, "height": 800}

def bundle_is_stale() -> bool:
    if not BUNDLE.exists():
        return True
    built = BUNDLE.stat().st_mtime
    sources = [FRONTEND / "package-lock.json", FRONTEND / "vite.config.ts", *(FRONTEND / "src").rglob("*")]
    return any(p.is_file() and p.stat().st_mtime > built for p in sources)


def ensure_frontend_built() -> None:
    if not (FRONTEND / "node_modules").is_dir():
        if BUNDLE.exists():
            return
        pytest.fail("The frontend is not built: run `cd frontend && npm ci && npm run build` (or `make test`).")
    # Several test sessions may share the working tree: build one at a time.
    with open(FRONTEND / "node_modules" / ".jaxplay-build.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if bundle_is_stale():
            result = subprocess.run(["npm", "run", "build"], cwd=FRONTEND, capture_output=True, text=True)
            if result.returncode != 0:
                pytest.fail(f"`npm run build` failed:\n{result.stdout[-3000:]}\n{result.stderr[-3000:]}")


@pytest.fixture(scope="session")
def base_url(request: pytest.FixtureRequest) -> str:
    ensure_frontend_built()
    external = os.environ.get("JAXPLAY_BROWSER_BASE_URL")
    if external:
        return external.rstrip("/")
    return request.getfixturevalue("live").http_url


@pytest.fixture(scope="session")
def browser() -> Iterator[Browser]:
    if not CHROMIUM.exists():
        pytest.fail(f"Debian Chromium is missing at {CHROMIUM}: install it with `apt-get install -y chromium`.")
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
        yield browser
        browser.close()


def pages_of(browser: Browser, base_url: str) -> Iterator[PageAt]:
    """Opens pages of ``base_url``, each in a fresh context; closes them after, failing on uncaught JavaScript errors."""
    contexts = []
    errors: list[str] = []

    def open_page(path: str = "/", color_scheme: str = "light", viewport: dict[str, int] | None = None,
                  on_request: Callable[[Request], None] | None = None) -> Page:
        context = browser.new_context(viewport=viewport or VIEWPORT, color_scheme=color_scheme)
        contexts.append(context)
        page = context.new_page()
        page.on("pageerror", lambda exc: errors.append(str(exc)))
        if on_request is not None:  # every request of the page, from its first
            page.on("request", on_request)
        page.goto(base_url + path)
        page.wait_for_selector(".cm-content")
        page.wait_for_selector(".conn[data-state=open]")
        return page

    yield open_page
    for context in contexts:
        context.close()
    assert not errors, f"uncaught JavaScript errors on the page: {errors}"


@pytest.fixture
def page_at(browser: Browser, base_url: str) -> Iterator[PageAt]:
    """``page_at("/", color_scheme="dark")`` -> a loaded page whose editor is ready."""
    yield from pages_of(browser, base_url)


@pytest.fixture(scope="session")
def versions_base_url() -> Iterator[str]:
    """A server as ``make run`` serves it: offering a JAX version besides its own, so the header holds the JAX
    version picker too. Skipped, saying what to run, where that runtime is not installed."""
    ensure_frontend_built()
    external = os.environ.get("JAXPLAY_BROWSER_BASE_URL")
    if external:
        yield external.rstrip("/")
        return
    versions = require_runtimes()
    with tempfile.TemporaryDirectory(prefix="jaxplay-versions-") as data_dir:
        server = LiveServer(Path(data_dir), ["--runtimes", versions[0], "--runtimes-dir", str(runtimes_dir())])
        try:
            server.wait_ready(timeout_s=240)
            yield server.http_url
        finally:
            server.stop()


@pytest.fixture
def page_with_versions_at(browser: Browser, versions_base_url: str) -> Iterator[PageAt]:
    """``page_at`` for the server of ``versions_base_url``; pages wait for the version picker to be filled."""
    opened = pages_of(browser, versions_base_url)
    open_page = next(opened)

    def open_with_versions(*args: object, **kwargs: object) -> Page:
        page = open_page(*args, **kwargs)
        page.wait_for_selector("[data-testid=runtime] option", state="attached")
        return page

    yield open_with_versions
    next(opened, None)


@pytest.fixture(scope="session")
def live_slots(base_url: str, browser: Browser) -> int:
    """Free run slots of the first backend: how many runs start without queueing."""
    context = browser.new_context()
    try:
        backends = context.request.get(base_url + "/api/backends").json()["backends"]
    finally:
        context.close()
    return int(backends[0]["free_slots"])
