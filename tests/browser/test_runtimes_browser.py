"""JAX versions in Chromium: the picker, links that keep their version, Compare, and hints that offer a version.

One server offers its own JAX and the runtimes ``make test`` installs
(tests/runtimes_server.py); everything runs on the real worker and sandbox.
"""

from __future__ import annotations

import re
from collections.abc import Iterator

import pytest
from playwright.sync_api import Browser, Page

from tests.browser.conftest import CHROMIUM_ARGS, VIEWPORT  # noqa: F401 - same browser settings
from tests.browser.helpers import output_text, replace_code, wait_for_status
from tests.live_server import LiveServer
from tests.runtimes_server import TEST_RUNTIMES, runtimes_server

pytestmark = [pytest.mark.live, pytest.mark.browser]
OLD = TEST_RUNTIMES[0]
VERSION_PROGRAM = "import jax\nprint(jax.__version__)"


@pytest.fixture(scope="module")
def server() -> Iterator[LiveServer]:
    with runtimes_server() as live:
        yield live


@pytest.fixture
def open_page(browser: Browser, server: LiveServer) -> Iterator:
    contexts = []
    errors: list[str] = []

    def open_at(path: str = "/", viewport: dict[str, int] | None = None) -> Page:
        context = browser.new_context(viewport=viewport or VIEWPORT)
        contexts.append(context)
        page = context.new_page()
        page.on("pageerror", lambda exc: errors.append(str(exc)))
        page.goto(server.http_url + path)
        page.wait_for_selector(".cm-content")
        page.wait_for_selector(".conn[data-state=open]")
        page.wait_for_selector(f"[data-testid=runtime] option[value='{OLD}']", state="attached")
        return page

    yield open_at
    for context in contexts:
        context.close()
    assert not errors, errors


def default_version(server: LiveServer) -> str:
    return server.get_json("/api/backends")["backends"][0]["jax_version"]


def run(page: Page, code: str) -> str:
    replace_code(page, code)
    page.click("[data-testid=run]")
    assert wait_for_status(page, "ok", "error", timeout_ms=120_000) == "ok", output_text(page)
    return output_text(page)


def test_the_picker_runs_on_the_chosen_version_and_the_page_says_which(open_page, server: LiveServer) -> None:
    page = open_page("/")
    options = page.locator("[data-testid=runtime] option").all_inner_texts()
    assert f"JAX {default_version(server)} (default)" in options and f"JAX {OLD}" in options
    assert any("unavailable" in o for o in options)  # the runtime that cannot be installed, disabled
    assert run(page, VERSION_PROGRAM).strip() == default_version(server)
    # Completion and help follow the chosen version: its own API index, fetched when the editor is used.
    page.select_option("[data-testid=runtime]", OLD)
    with page.expect_response(lambda r: r.url.endswith(f"/api/api-index/{OLD}") and r.ok, timeout=120_000):
        page.click(".cm-content")
    assert OLD in run(page, VERSION_PROGRAM + "\nimport jax.numpy as jnp\njax.jit(lambda x: x * 2)(jnp.ones(3))").splitlines()
    assert f"jax {OLD}" in page.inner_text(".run-info")
    page.click("#tab-inspect")
    assert page.inner_text("[data-testid=inspect-jax]") == f"JAX {OLD}"
    # The choice is remembered by this browser.
    page.reload()
    page.wait_for_selector(f"[data-testid=runtime] option[value='{OLD}']", state="attached")
    assert page.input_value("[data-testid=runtime]") == OLD
    page.screenshot(path="/tmp/jaxplay-runtime-picker.png")


def test_a_link_reopens_on_its_version_and_one_click_runs_it_on_the_newest(open_page, server: LiveServer) -> None:
    page = open_page("/")
    page.select_option("[data-testid=runtime]", OLD)
    run(page, VERSION_PROGRAM)
    page.click("[data-testid=share]")
    page.wait_for_selector("[data-testid=share-copied][data-copied=true]")
    snippet = re.search(r"/s/(\w+)", page.input_value("[data-testid=share-url]")).group(1)
    assert server.get_json(f"/api/snippets/{snippet}")["runtime"] == OLD

    other = open_page(f"/s/{snippet}")
    other.select_option("[data-testid=runtime]", default_version(server))  # this browser's own choice...
    fresh = open_page(f"/s/{snippet}")  # ...does not override a link's version
    note = fresh.wait_for_selector("[data-testid=link-runtime]:not([hidden])")
    assert f"ran on JAX {OLD}" in note.inner_text()
    assert fresh.input_value("[data-testid=runtime]") == OLD
    fresh.click("[data-testid=run]")
    assert wait_for_status(fresh, "ok", timeout_ms=120_000) == "ok"
    assert OLD in output_text(fresh).splitlines()
    newest = server.get_json("/api/backends")["backends"][0]["runtimes"][0]["name"]
    assert fresh.inner_text("[data-testid=link-runtime-action]") == f"Run on JAX {newest} (newest)"
    fresh.click("[data-testid=link-runtime-action]")
    # The status still reads the first run's "ok" until the new run is sent: wait for the new run's output.
    fresh.wait_for_function("v => document.querySelector('[data-testid=output-log]').innerText.trim() === v",
                            arg=newest, timeout=120_000)
    assert wait_for_status(fresh, "ok", timeout_ms=120_000) == "ok"
    assert output_text(fresh).strip() == newest and fresh.input_value("[data-testid=runtime]") == newest
    fresh.screenshot(path="/tmp/jaxplay-runtime-link.png")


def test_a_link_made_when_the_default_was_older_keeps_it_and_offers_the_newest(open_page, server: LiveServer) -> None:
    """A link from before the newest JAX was the default recorded only its run's ``started`` event, on the
    worker's own JAX: it reopens on that JAX, which is still offered, with "Run on JAX 0.12" a click away."""
    own = next(r["name"] for r in server.get_json("/api/backends")["backends"][0]["runtimes"]
               if not r["default"] and not r["problem"] and r["name"] not in TEST_RUNTIMES)
    page = open_page("/")
    recorded = [{"type": "started", "id": "r", "backend": "cpu", "jax_version": own, "jaxlib_version": own},
                {"type": "stdout", "id": "r", "text": f"{own}\n"}, {"type": "done", "id": "r", "status": "ok"}]
    created = page.request.post(server.http_url + "/api/snippets",
                                data={"code": VERSION_PROGRAM, "recorded_run": recorded})
    assert created.ok, created.text()
    linked = open_page(f"/s/{created.json()['id']}")
    note = linked.wait_for_selector("[data-testid=link-runtime]:not([hidden])")
    assert f"This link ran on JAX {own}" in note.inner_text()
    assert linked.input_value("[data-testid=runtime]") == own
    newest = server.get_json("/api/backends")["backends"][0]["jax_version"]
    assert linked.inner_text("[data-testid=link-runtime-action]") == f"Run on JAX {newest} (newest)"
    linked.click("[data-testid=link-runtime-action]")
    assert wait_for_status(linked, "ok", timeout_ms=120_000) == "ok"
    assert output_text(linked).strip() == newest


def test_a_link_whose_version_is_gone_names_it_and_offers_the_nearest(open_page, server: LiveServer) -> None:
    page = open_page("/")
    created = page.request.post(server.http_url + "/api/snippets", data={"code": "print(1)", "runtime": "0.4.30"})
    snippet = created.json()["id"]
    linked = open_page(f"/s/{snippet}")
    note = linked.wait_for_selector("[data-testid=link-runtime]:not([hidden])")
    assert "JAX 0.4.30, which this server no longer offers" in note.inner_text()
    assert linked.inner_text("[data-testid=link-runtime-action]") == f"Use JAX {OLD} (nearest)"
    linked.click("[data-testid=link-runtime-action]")
    assert linked.input_value("[data-testid=runtime]") == OLD


def test_compare_runs_on_every_version_and_marks_what_differs(open_page, server: LiveServer) -> None:
    page = open_page("/")
    replace_code(page, "import jax, jax.numpy as jnp\nprint('same line')\nprint(jax.__version__)\n"
                       "@jax.jit\ndef f(x):\n    return jnp.sin(x) * 2\nf(jnp.ones(4))\n")
    page.click("#tab-compare")
    # Before any comparison: no empty diff box.
    assert not page.locator(".compare [data-testid=inspect-diff]").is_visible()
    page.click("[data-testid=compare-all]")
    boxes = page.locator("[data-testid^=compare-pick-]")
    assert boxes.count() == len(TEST_RUNTIMES) + 1
    assert all(boxes.nth(i).is_checked() for i in range(boxes.count()))  # "all" is what the boxes say
    page.wait_for_selector("[data-testid=compare-status][data-state=done]", timeout=180_000)
    columns = page.locator("[data-testid=compare-column]")
    assert columns.count() == len(TEST_RUNTIMES) + 1
    for index in range(1, columns.count()):
        marked = columns.nth(index).locator("[data-testid=compare-diff-line]").all_inner_texts()
        assert len(marked) == 1 and re.fullmatch(r"\d+(\.\d+){2,3}", marked[0])  # only the version line differs
        assert columns.nth(index).locator("h4").inner_text().endswith("· 1 line differs")
    table = page.inner_text("[data-testid=compare-table]")
    assert "f #1: flops" in table and "f #1: compile" in table and all(f"JAX {v}" in table for v in TEST_RUNTIMES)
    assert not page.locator("[data-testid=compare-replayed]").is_visible()
    assert page.locator("[data-testid=compare-cached-time]").count() == 0
    page.click("[data-testid=compare-artifact-stablehlo]")
    page.wait_for_selector(".compare [data-testid=inspect-diff] .cm-mergeView")
    shown = page.inner_text(".compare [data-testid=inspect-diff]")
    assert "stablehlo.sine" in shown or "unchanged lines" in shown, shown  # identical modules fold away
    # Optimized HLO across versions: the debug-info tables are folded, as in the single view.
    page.click("[data-testid=compare-artifact-hlo]")
    toggle = page.wait_for_selector(".compare [data-testid=diff-metadata-toggle]")
    assert "folded" in toggle.inner_text()
    sides = page.locator(".compare [data-testid=inspect-diff] .cm-content").all_inner_texts()
    assert not any("StackFrames" in side or "FileLocations" in side for side in sides), sides
    page.screenshot(path="/tmp/jaxplay-compare.png", full_page=True)
    page.set_viewport_size({"width": 390, "height": 844})
    page.screenshot(path="/tmp/jaxplay-compare-phone.png", full_page=True)
    page.set_viewport_size(VIEWPORT)

    # The same comparison again: the result cache answers, and its times say they were replayed.
    page.click("[data-testid=compare-all]")
    page.wait_for_selector("[data-testid=compare-status][data-state=done]", timeout=180_000)
    note = page.wait_for_selector("[data-testid=compare-replayed]")
    assert "Replayed from the result cache" in note.inner_text() and "nothing ran now" in note.inner_text()
    cached = page.locator("[data-testid=compare-cached-time]")
    assert cached.count() >= 2 * (len(TEST_RUNTIMES) + 1)  # run time and compile time of every version
    assert all(text.endswith("cached") for text in cached.all_inner_texts())
    assert "ok · cached" in page.inner_text("[data-testid=compare-table]")
    # "Compare fresh" measures now.
    page.click("[data-testid=compare-fresh]")
    page.wait_for_selector("[data-testid=compare-status][data-state=running]")
    page.wait_for_selector("[data-testid=compare-status][data-state=done]", timeout=180_000)
    assert page.locator("[data-testid=compare-cached-time]").count() == 0
    assert not page.locator("[data-testid=compare-replayed]").is_visible()


def test_an_api_a_newer_jax_removed_offers_the_older_version_in_one_click(open_page, server: LiveServer) -> None:
    page = open_page("/")
    replace_code(page, "import jax\nprint(jax.tree_map(lambda x: x * 2, [1, 2]))")
    page.click("[data-testid=run]")
    assert wait_for_status(page, "error", timeout_ms=120_000) == "error"
    button = page.wait_for_selector("[data-testid=hint-run-on]")
    assert button.inner_text() == f"Run on JAX {OLD}"
    page.screenshot(path="/tmp/jaxplay-runtime-hint.png")
    button.click()
    assert wait_for_status(page, "ok", timeout_ms=120_000) == "ok"
    assert "[2, 4]" in output_text(page) and page.input_value("[data-testid=runtime]") == OLD


def test_an_api_only_a_newer_jax_has_offers_the_newer_version(open_page, server: LiveServer) -> None:
    page = open_page("/")
    page.select_option("[data-testid=runtime]", OLD)
    replace_code(page, "import jax\nprint(jax.typeof(1.0))")
    page.click("[data-testid=run]")
    assert wait_for_status(page, "error", timeout_ms=120_000) == "error"
    button = page.wait_for_selector("[data-testid=hint-run-on]")
    newest = server.get_json("/api/backends")["backends"][0]["runtimes"][0]["name"]
    assert button.inner_text() == f"Run on JAX {newest}"
    button.click()
    assert wait_for_status(page, "ok", timeout_ms=120_000) == "ok"
    assert "float32[]" in output_text(page)


def test_without_version_data_the_versions_api_indexes_decide_which_to_offer(open_page, server: LiveServer) -> None:
    page = open_page("/")
    replace_code(page, "import jax\nprint(jax.device_put_replicated)")  # gone from newer JAX; no entry in our table
    page.click("[data-testid=run]")
    assert wait_for_status(page, "error", timeout_ms=120_000) == "error"
    button = page.wait_for_selector("[data-testid=hint-run-on]", timeout=180_000)  # after the indexes load
    # The newest offered JAX that still has it (0.6.2 of the test runtimes): never the default, which lacks it.
    assert button.inner_text() in [f"Run on JAX {v}" for v in TEST_RUNTIMES if v != default_version(server)]
    button.click()
    assert wait_for_status(page, "ok", timeout_ms=120_000) == "ok"
    assert "device_put_replicated" in output_text(page)


def test_on_a_phone_the_closed_picker_shows_the_whole_version(open_page, server: LiveServer) -> None:
    page = open_page("/", viewport={"width": 390, "height": 844})
    chosen = page.locator("[data-testid=runtime] option:checked").inner_text()
    assert chosen == f"JAX {default_version(server)}"  # "(default)" would be cut at this width
    fits = page.eval_on_selector("[data-testid=runtime]", "s => s.getBoundingClientRect().right <= window.innerWidth")
    assert fits
    page.set_viewport_size({"width": 1440, "height": 900})  # wider again: the note comes back
    page.wait_for_function("() => document.querySelector('[data-testid=runtime] option:checked').textContent.endsWith('(default)')")
