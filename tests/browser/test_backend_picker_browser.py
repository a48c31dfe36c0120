"""The page on a GPU-only host runs on the GPU with nothing chosen, and a server whose worker cannot
start says why on the page instead of leaving runs queued."""

from __future__ import annotations

import pytest

from tests import gpu_double
from tests.browser.conftest import ensure_frontend_built
from tests.browser.helpers import output_text, replace_code, wait_for_status
from tests.live_server import LiveServer

TOKEN = "gpu-double-token"


@pytest.fixture
def open_at(browser):
    ensure_frontend_built()  # these tests start servers of their own, not the shared live one
    contexts = []

    def open_page(server: LiveServer, remembered: str | None = None):
        context = browser.new_context(viewport={"width": 1280, "height": 800})
        contexts.append(context)
        page = context.new_page()
        if remembered:  # a browser that picked cpu on another server before
            page.add_init_script(f"localStorage.setItem('jaxplay.backend', {remembered!r})")
        page.goto(server.http_url + "/")
        page.wait_for_selector(".cm-content")
        return page

    yield open_page
    for context in contexts:
        context.close()


def test_a_gpu_only_host_page_picks_gpu_and_runs(tmp_path, open_at):
    server = LiveServer(tmp_path / "data", ["--no-local-worker"], env={"JAXPLAY_WORKER_TOKEN": TOKEN})
    double = gpu_double.start(server.worker_url, TOKEN)
    try:
        server.wait_ready(workers=1, timeout_s=180)
        page = open_at(server, remembered="cpu")
        page.wait_for_function("document.querySelector('[data-testid=backend]').value === 'gpu'")
        replace_code(page, "import jax\nprint(jax.device_count())")
        page.click("[data-testid=run]")
        assert wait_for_status(page, "ok", "error") == "ok", output_text(page)
        assert output_text(page).strip() == "1"
        assert page.inner_text(".run-info").startswith("gpu · 1× NVIDIA H100")
    finally:
        double.terminate()
        double.wait(20)
        server.stop()


def test_a_worker_that_cannot_start_is_named_on_the_page(tmp_path, open_at):
    server = LiveServer(tmp_path / "data", [], env={"PATH": "/nonexistent"})  # no bubblewrap to find
    try:
        server.wait_ready(workers=0)
        page = open_at(server)
        notice = page.wait_for_selector(".output-notice-error", timeout=30_000)
        assert "cannot start" in notice.inner_text() and "bubblewrap" in notice.inner_text()
        assert "no worker can start" in page.inner_text("[data-testid=backend]")
    finally:
        server.stop()
