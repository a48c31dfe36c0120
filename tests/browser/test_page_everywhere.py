"""The page for every person and screen (phones, outages, output order, links, where output goes,
the small things), in Chromium against the real server, worker and sandbox."""

from __future__ import annotations

import os
import re
import signal
import uuid
from pathlib import Path

import pytest
from playwright.sync_api import Browser, Page, expect

from tests.browser.helpers import PageAt, output_text, replace_code, run_ok, wait_for_status
from tests.live_server import LiveServer

pytestmark = [pytest.mark.live, pytest.mark.browser]

SNIPPET_PATH = re.compile(r"/s/([a-z2-7]{8,})$")


def unique_program(body: str) -> str:
    return f"# {uuid.uuid4().hex[:12]}\n{body}"


def share_and_wait(page: Page) -> str:
    """Share the editor's code; the id of the new link."""
    page.click("[data-testid=share]")
    page.wait_for_selector("[data-testid=share-url]")
    snippet_id = SNIPPET_PATH.search(page.input_value("[data-testid=share-url]")).group(1)
    page.keyboard.press("Escape")
    return snippet_id


# --- phones -------------------------------------------------------------------


@pytest.mark.parametrize("width", [360, 390])
def test_a_phone_never_scrolls_sideways_and_run_is_on_screen(page_at: PageAt, width: int) -> None:
    page = page_at("/", viewport={"width": width, "height": 800})
    assert page.evaluate("document.documentElement.scrollWidth") <= width
    for testid in ("run", "stop", "share", "backend", "export"):
        box = page.locator(f"[data-testid={testid}]").bounding_box()
        assert box and box["x"] >= 0 and box["x"] + box["width"] <= width, (testid, box)
    # Editor above the results, both full width.
    editor = page.locator(".editor-pane").bounding_box()
    results = page.locator(".results").bounding_box()
    assert editor["y"] + editor["height"] <= results["y"] + 1 and results["width"] >= width - 1

    run_ok(page, "print('hello from a phone')")

    assert "hello from a phone" in output_text(page)
    page.click("[data-testid=export]")
    page.wait_for_selector("[data-testid=export-py]")
    assert page.evaluate("document.documentElement.scrollWidth") <= width


# --- output order and where it goes ------------------------------------------


def test_stdout_and_stderr_show_in_written_order_with_stderr_set_apart(page_at: PageAt) -> None:
    page = page_at("/")
    run_ok(page, "import sys\nfor i in range(3):\n    print(f'out {i}')\n    print(f'err {i}', file=sys.stderr)\n")
    blocks = page.eval_on_selector_all(
        "[data-testid=output-log] .output-stream",
        "nodes => nodes.map(n => [n.dataset.stream, n.textContent.trim(), getComputedStyle(n).color])",
    )
    assert [(s, t) for s, t, _ in blocks] == [
        (kind, f"{word} {i}") for i in range(3) for kind, word in (("stdout", "out"), ("stderr", "err"))
    ]
    assert blocks[0][2] != blocks[1][2]


def test_run_from_the_gallery_shows_output_and_from_inspect_badges_it(page_at: PageAt) -> None:
    page = page_at("/")
    replace_code(page, "print('seen')")
    page.click("#tab-gallery")
    page.click("[data-testid=run]")
    assert wait_for_status(page, "ok") == "ok"
    assert page.get_attribute("#tab-output", "aria-selected") == "true"
    assert "seen" in output_text(page)

    page.click("#tab-inspect")
    page.click("[data-testid=run]")
    wait_for_status(page, "ok")
    assert page.get_attribute("#tab-inspect", "aria-selected") == "true"
    assert page.inner_text("#tab-output .tab-badge") == "new"
    page.click("#tab-output")
    assert page.is_hidden("#tab-output .tab-badge")


def test_visualize_array_sharding_leaves_a_pointer_in_output(page_at: PageAt) -> None:
    page = page_at("/")
    run_ok(page, (
        "import jax, jax.numpy as jnp\n"
        "from jax.sharding import NamedSharding, PartitionSpec as P\n"
        "mesh = jax.make_mesh((2,), ('x',))\n"
        "w = jax.device_put(jnp.arange(8.0), NamedSharding(mesh, P('x')))\n"
        "jax.debug.visualize_array_sharding(w)\n"
        "print('after')\n"
    ))
    pointer = page.locator("[data-testid=sharding-pointer]")
    assert pointer.count() == 1
    assert "visualize_array_sharding(w)" in pointer.inner_text() and "line 5" in pointer.inner_text()
    assert output_text(page).index("visualize_array_sharding") < output_text(page).index("after")
    pointer.locator("button").click()
    assert page.get_attribute("#tab-sharding", "aria-selected") == "true"


# --- links --------------------------------------------------------------------


def test_the_address_follows_shares_and_forks_and_edits_survive_a_reload(page_at: PageAt) -> None:
    page = page_at("/")
    original = unique_program("print('parent')\n")
    replace_code(page, original)
    parent = share_and_wait(page)
    assert page.evaluate("location.pathname") == f"/s/{parent}"

    edited = original.replace("parent", "edited")
    replace_code(page, edited)
    page.wait_for_timeout(600)  # past the draft's save delay
    page.reload()
    page.wait_for_selector(".cm-content")
    assert page.evaluate("window.jaxplay.editor.getCode()") == edited
    assert "modified" in page.text_content("[data-testid=draft-note]")

    child = share_and_wait(page)
    assert child != parent and page.evaluate("location.pathname") == f"/s/{child}"
    assert page.inner_text("[data-testid=forked-from]") == parent

    page.go_back()
    page.wait_for_function(f"location.pathname === '/s/{parent}'")
    page.wait_for_selector(".cm-content")
    # Back on the parent, with its shared code: the edits went on as the fork.
    page.wait_for_function("window.jaxplay && window.jaxplay.editor.getCode().includes(\"print('parent')\")")
    assert page.locator("[data-testid=draft-note]").is_hidden()
    page.go_forward()
    page.wait_for_function(f"location.pathname === '/s/{child}'")
    page.wait_for_function("window.jaxplay && window.jaxplay.editor.getCode().includes(\"print('edited')\")")


def test_reverting_a_kept_draft_shows_the_shared_code(page_at: PageAt) -> None:
    page = page_at("/")
    code = unique_program("print('shared')\n")
    replace_code(page, code)
    snippet = share_and_wait(page)
    replace_code(page, "print('mine')")
    page.wait_for_timeout(600)
    page.goto(page.url)
    page.wait_for_selector("[data-testid=draft-revert]")
    page.click("[data-testid=draft-revert]")
    assert page.evaluate("window.jaxplay.editor.getCode()") == code
    page.wait_for_timeout(600)
    page.reload()
    page.wait_for_selector(".cm-content")
    assert page.evaluate("window.jaxplay.editor.getCode()") == code and snippet in page.url


# --- small things -------------------------------------------------------------


def test_escape_closes_the_export_menu(page_at: PageAt) -> None:
    page = page_at("/")
    page.click("[data-testid=export]")
    page.wait_for_selector("[data-testid=export-py]")
    page.keyboard.press("Escape")
    page.wait_for_selector("[data-testid=export-py]", state="hidden")


def test_ctrl_period_stops_a_run(page_at: PageAt) -> None:
    page = page_at("/")
    replace_code(page, "import time\nprint('started', flush=True)\ntime.sleep(30)\n")
    page.click("[data-testid=run]")
    page.wait_for_function("document.querySelector('[data-testid=output-log]').innerText.includes('started')")
    page.keyboard.press("Control+.")
    assert wait_for_status(page, "cancelled", timeout_ms=10_000) == "cancelled"


def test_a_url_in_an_error_is_a_link(page_at: PageAt) -> None:
    page = page_at("/")
    replace_code(page, "raise ValueError('see https://docs.jax.dev/en/latest/errors.html for more.')")
    page.click("[data-testid=run]")
    wait_for_status(page, "error")
    link = page.locator("[data-testid=output-error] a.output-link")
    assert link.get_attribute("href") == "https://docs.jax.dev/en/latest/errors.html"


# --- outages ------------------------------------------------------------------


def test_an_outage_is_said_in_output_and_a_run_waits_for_the_server(browser: Browser, tmp_path: Path) -> None:
    server = LiveServer(tmp_path / "data")
    context = browser.new_context(viewport={"width": 1280, "height": 800})
    try:
        server.wait_ready()
        page = context.new_page()
        page.goto(server.http_url + "/")
        page.wait_for_selector(".conn[data-state=open]")
        page.wait_for_selector("[data-testid=backend]:enabled")
        # An outage: the server is gone at once, with no drain to announce it (SIGTERM is a restart, below).
        os.killpg(server.process.pid, signal.SIGKILL)
        server.stop()

        page.wait_for_function(
            "document.querySelector('[data-testid=output-log]').innerText.includes('The server cannot be reached')",
            timeout=2_000,
        )
        assert page.is_disabled("[data-testid=backend]")
        assert page.get_attribute("[data-testid=backend]", "data-testid") == "backend"
        assert "null" not in page.inner_text("[data-testid=backend]")

        replace_code(page, "print('ran after the outage')")
        page.click("[data-testid=run]")
        assert page.get_attribute("[data-testid=status]", "data-status") == "waiting"
        # The output log draws once per animation frame, so wait for it.
        page.wait_for_function(
            "document.querySelector('[data-testid=output-log]').innerText.includes('your run will start when it is back')",
            timeout=2_000,
        )

        server = LiveServer(tmp_path / "data", port=server.port)
        server.wait_ready()
        assert wait_for_status(page, "ok", timeout_ms=90_000) == "ok"
        assert "ran after the outage" in output_text(page)
        assert page.is_enabled("[data-testid=backend]")
    finally:
        context.close()
        server.stop()


def test_a_restart_says_so_from_the_drain_on_holds_new_runs_and_reconnects(browser: Browser, tmp_path: Path) -> None:
    """SIGTERM drains the server (server/ops/shutdown.py): runs going may finish, new ones are refused,
    then the socket closes. The page says it is restarting from the drain's first moment, holds a run
    started meanwhile, and sends it once a server is back."""
    server = LiveServer(tmp_path / "data", ["--shutdown-grace-s", "30"])
    context = browser.new_context(viewport={"width": 1280, "height": 800})
    try:
        server.wait_ready()
        page = context.new_page()
        page.goto(server.http_url + "/")
        page.wait_for_selector(".conn[data-state=open]")
        replace_code(page, "import time\nprint('going', flush=True)\ntime.sleep(4)\nprint('finished in the drain')")
        page.click("[data-testid=run]")
        page.wait_for_function("document.querySelector('[data-testid=output-log]').innerText.includes('going')",
                               timeout=60_000)
        # Another page's longer run keeps the drain (and so this page's socket) open past this page's own run:
        # the run held below waits in the outbox of a socket that then closes, and must survive that.
        other = context.new_page()
        other.goto(server.http_url + "/")
        replace_code(other, "import time\nprint('long', flush=True)\ntime.sleep(12)")
        other.click("[data-testid=run]")
        other.wait_for_function("document.querySelector('[data-testid=output-log]').innerText.includes('long')",
                                timeout=60_000)
        server.process.send_signal(signal.SIGTERM)
        notice = page.locator("[data-testid=server-notice]")
        expect(notice).to_be_visible(timeout=5_000)
        expect(notice).to_contain_text("This server is restarting")
        expect(page.locator(".conn")).to_have_text("server restarting…")
        page.screenshot(path="/tmp/shots-b/restarting-1280.png")
        # The run in flight finishes within the drain.
        assert wait_for_status(page, "ok", timeout_ms=30_000) == "ok"
        assert "finished in the drain" in output_text(page)
        # A run started now is held, not refused.
        replace_code(page, "print('ran after the restart')")
        page.click("[data-testid=run]")
        assert page.get_attribute("[data-testid=status]", "data-status") == "waiting"
        page.wait_for_function(
            "document.querySelector('[data-testid=output-log]').innerText.includes('The server is restarting; your run')",
            timeout=2_000)
        assert wait_for_status(other, "ok", timeout_ms=30_000) == "ok"  # the drain's last run, then the socket closes
        server.process.wait(30)
        expect(notice).to_contain_text("reconnecting", timeout=5_000)
        assert page.get_attribute("[data-testid=status]", "data-status") == "waiting"  # held, not lost

        server = LiveServer(tmp_path / "data", port=server.port)
        server.wait_ready()
        assert wait_for_status(page, "ok", timeout_ms=90_000) == "ok"
        assert "ran after the restart" in output_text(page)
        expect(notice).to_be_hidden()
        expect(page.locator(".conn")).to_have_text("connected")
        assert "rejected" not in output_text(page)
    finally:
        context.close()
        server.stop()


def test_a_moved_jax_api_gets_a_hint_under_the_error(page_at: PageAt) -> None:
    page = page_at("/")
    replace_code(page, "import jax\njax.tree_map(lambda x: x, [1])")
    page.click("[data-testid=run]")
    wait_for_status(page, "error")
    assert "jax.tree.map" in page.inner_text("[data-testid=output-error] [data-testid=error-hint]")


def test_optimized_hlo_opens_with_its_metadata_folded_in_a_tall_viewer(page_at: PageAt) -> None:
    page = page_at("/", viewport={"width": 1440, "height": 900})
    run_ok(page, "import jax, jax.numpy as jnp\n\n@jax.jit\ndef f(x):\n    return jnp.sin(x) * 2\n\nf(jnp.ones(3))\n")
    page.click("#tab-inspect")
    page.click(".inspect button:text-is('Optimized HLO')")
    page.wait_for_selector("[data-testid=hlo-metadata-fold]")
    code = "[data-testid=inspect-code] .cm-content"
    assert "FileLocations" not in page.inner_text(code) and "ENTRY" in page.inner_text(code)
    assert page.locator("[data-testid=inspect-code]").bounding_box()["height"] >= 0.55 * 900
    page.click("[data-testid=hlo-metadata-fold]")
    page.wait_for_function(
        "document.querySelector('[data-testid=inspect-code] .cm-content').innerText.includes('FileLocations')"
    )


def test_html_results_are_dark_in_the_dark_theme_and_say_drawing_until_drawn(page_at: PageAt) -> None:
    for scheme, dark in (("light", False), ("dark", True)):
        page = page_at("/", color_scheme=scheme)
        frame = page.locator("[data-testid=output-log] .display-frame").first
        run_ok(page, "import jax.numpy as jnp\njnp.arange(6.0).reshape(2, 3)")
        style = frame.evaluate("f => [getComputedStyle(f).filter, getComputedStyle(f).backgroundImage]")
        assert ("invert" in style[0]) is dark
        assert "drawing" in style[1]


def test_a_long_compile_shows_progress_in_the_status_and_in_inspect(page_at: PageAt) -> None:
    page = page_at("/")
    replace_code(page, (
        "import jax, jax.numpy as jnp\n\n@jax.jit\ndef many_steps(x):\n"
        "    for _ in range(300):\n        x = jnp.cos(x) * 1.01\n    return x\n\n"
        "many_steps(jnp.ones(4))\n"
    ))
    page.click("#tab-inspect")
    page.evaluate(
        """() => {
          window.seen = { status: [], pending: false };
          new MutationObserver(() => {
            const text = document.querySelector('[data-testid=status]').innerText;
            if (!window.seen.status.includes(text)) window.seen.status.push(text);
            if (document.querySelector('[data-testid=inspect-compiling]')) window.seen.pending = true;
          }).observe(document.body, { childList: true, subtree: true, characterData: true });
        }"""
    )
    page.click("[data-testid=run]")
    assert wait_for_status(page, "ok") == "ok"
    seen = page.evaluate("window.seen")
    assert any(text.startswith("compiling many_steps (line 4)") for text in seen["status"]), seen
    assert seen["pending"]
    # Filled in: the compilation is listed and nothing is left pending.
    page.wait_for_selector(".inspect-compile[data-key='1.1']")
    assert page.locator("[data-testid=inspect-compiling]").count() == 0


# --- a failed run, seen from any tab ---------------------------------------------


def test_a_failed_run_is_said_on_every_tab(page_at: PageAt) -> None:
    page = page_at("/")
    page.click("#tab-inspect")
    replace_code(page, "import jax.numpy as jnp\nx = jnp.ones(3)\nprint(x + missing_name)\n")
    page.click("[data-testid=run]")
    assert wait_for_status(page, "error") == "error"
    alert = page.locator("[data-testid=run-alert]")
    expect(alert).to_be_visible()
    expect(alert).to_contain_text("The run failed: NameError: name 'missing_name' is not defined")
    expect(alert).to_contain_text("line 3")
    assert page.get_attribute("#tab-inspect", "aria-selected") == "true"  # the person's tab stays in front
    page.click("#tab-sharding")
    expect(alert).to_be_visible()
    page.click("[data-testid=run-alert-show]")
    assert page.get_attribute("#tab-output", "aria-selected") == "true"
    expect(alert).to_be_hidden()  # Output shows the error itself
    page.click("#tab-inspect")
    expect(alert).to_be_visible()
    run_ok(page, "print('fine again')")
    expect(alert).to_be_hidden()


# --- phones, second pass -------------------------------------------------------------


PHONE = {"width": 390, "height": 844}


def test_on_a_phone_the_results_can_take_the_whole_screen_and_scroll_as_one(page_at: PageAt) -> None:
    page = page_at("/", viewport=PHONE)
    run_ok(page, "import jax\n\n@jax.jit\ndef f(x):\n    return x * 2\n\nf(1.0)\n")
    results = page.locator(".results")
    before = results.bounding_box()["height"]
    page.click("[data-testid=results-enlarge]")
    after = results.bounding_box()["height"]
    assert after > before + 200 and after > 0.75 * PHONE["height"], (before, after)
    assert page.locator(".editor-pane").is_hidden() or page.locator(".editor-pane").bounding_box()["height"] < 2
    page.click("#tab-inspect")
    # One scroll area: the tab pane, not the list inside it.
    top = page.locator(".inspect-top")
    assert top.evaluate("e => getComputedStyle(e).overflowY") == "visible"
    page.click("[data-testid=results-enlarge]")
    assert abs(results.bounding_box()["height"] - before) < 2
    assert page.evaluate("document.documentElement.scrollWidth") <= PHONE["width"]


def test_focus_returns_to_share_after_ctrl_s_and_escape(page_at: PageAt) -> None:
    page = page_at("/", viewport=PHONE)
    replace_code(page, unique_program("print('focus')\n"))
    page.keyboard.press("ControlOrMeta+s")
    page.wait_for_selector("[data-testid=share-url]")
    page.keyboard.press("Escape")
    expect(page.locator("[data-testid=share-dialog]")).to_be_hidden()
    assert page.evaluate("document.activeElement.dataset.testid") == "share"


def test_on_a_phone_treescopes_colormap_caption_wraps_inside_the_frame(page_at: PageAt) -> None:
    page = page_at("/", viewport=PHONE)
    run_ok(page, "import jax.numpy as jnp\njnp.arange(48.0).reshape(6, 8)\n")
    page.wait_for_selector("[data-testid=display-frame]")
    frame = page.frame_locator("[data-testid=display-frame]").first
    frame.locator("treescope-container").wait_for()
    overflow = frame.locator("body").evaluate("""body => new Promise(done => {
      const measure = () => {
        const root = document.querySelector('treescope-container').shadowRoot;
        const caption = [...(root ? root.querySelectorAll('.info') : [])].find(e => e.textContent.includes('colormap'));
        if (!caption) return requestAnimationFrame(measure);
        done(caption.getBoundingClientRect().right - document.documentElement.clientWidth);
      };
      measure();
    })""")
    assert overflow <= 0, f"the caption runs {overflow} px past the frame"


@pytest.mark.parametrize("role", ["presenter", "attendee"])
def test_on_a_phone_the_room_bar_fits_the_screen(page_at: PageAt, role: str) -> None:
    presenter = page_at("/", viewport=PHONE)
    presenter.click("[data-testid=room-menu]")
    presenter.click("[data-testid=room-start]")
    presenter.wait_for_url(re.compile(r"/r/jax-"))
    presenter.wait_for_selector("[data-testid=room-bar]")
    page = presenter if role == "presenter" else page_at(f"/r/{presenter.inner_text('[data-testid=room-code]')}",
                                                          viewport=PHONE)
    page.wait_for_selector("[data-testid=room-bar]")
    box = page.locator("[data-testid=room-bar]").bounding_box()
    assert box["x"] >= 0 and box["x"] + box["width"] <= PHONE["width"], box
    assert page.evaluate("document.documentElement.scrollWidth") <= PHONE["width"]
