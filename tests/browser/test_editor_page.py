"""The editor page end to end: type, run with the shortcut, watch output
stream in, see errors pinned to their line, stop a run; real server, worker
and sandbox behind the page."""

from __future__ import annotations

import re

import pytest
from playwright.sync_api import Page

from tests.browser.helpers import PageAt, output_text, replace_code, run_ok, wait_for_status

pytestmark = [pytest.mark.live, pytest.mark.browser]

OUTPUT = "[data-testid=output-log]"


def record_line_arrivals(page: Page, pattern: str) -> None:
    """Notes in ``window.arrivals`` when each match of ``pattern`` first shows in the output."""
    page.evaluate(
        """(pattern) => {
          window.arrivals = {};
          const log = document.querySelector('[data-testid=output-log]');
          new MutationObserver(() => {
            for (const m of log.innerText.matchAll(new RegExp(pattern, 'g'))) {
              window.arrivals[m[0]] ??= performance.now();
            }
          }).observe(log, { childList: true, subtree: true, characterData: true });
        }""",
        pattern,
    )


def test_the_page_opens_with_the_example_and_it_runs(page_at: PageAt) -> None:
    page = page_at("/")
    code = page.evaluate("window.jaxplay.editor.getCode()")
    for api in ("jax.jit", "jax.grad", "jax.vmap"):
        assert api in code
    assert page.locator(".cm-line").count() == len(code.splitlines())
    assert page.locator(".cm-lineNumbers .cm-gutterElement", has_text="1").count() > 0
    # Python highlighting: the keyword `def` is coloured differently from plain text.
    colours = page.evaluate(
        """() => {
          const def = [...document.querySelectorAll('.cm-line span')].find(s => s.textContent === 'def');
          return [getComputedStyle(def).color, getComputedStyle(def.closest('.cm-line')).color];
        }"""
    )
    assert colours[0] != colours[1]

    page.click("[data-testid=run]")

    assert wait_for_status(page, "ok", "error", "crashed") == "ok"
    text = output_text(page)
    assert text.index("step 0: loss") < text.index("step 7: loss") < text.index("per-example loss")
    assert page.locator(".output-display[data-role=result]").count() == 1


def test_typed_code_runs_with_the_shortcut_and_streams_line_by_line(page_at: PageAt) -> None:
    page = page_at("/")
    page.click(".cm-content")
    page.keyboard.press("ControlOrMeta+a")
    page.keyboard.press("Delete")
    # Typed as a person would: the editor indents the loop body itself and
    # skips over the brackets and quotes it closed automatically.
    for line in ["import time", "for i in range(4):", 'print(f"tick {i}", flush=True)', "time.sleep(0.5)"]:
        page.keyboard.type(line)
        page.keyboard.press("Escape")  # close a completion popup, if one opened
        page.keyboard.press("Enter")
    assert page.evaluate("window.jaxplay.editor.getCode()").strip() == (
        'import time\nfor i in range(4):\n    print(f"tick {i}", flush=True)\n    time.sleep(0.5)'
    )
    record_line_arrivals(page, r"tick \d")

    page.keyboard.press("ControlOrMeta+Enter")

    page.wait_for_function("() => document.querySelector('[data-testid=output-log]').innerText.includes('tick 0')")
    # The first line is on screen while the program is still sleeping in its loop.
    assert page.get_attribute("[data-testid=status]", "data-status") == "running"
    assert "tick 3" not in output_text(page)
    assert page.is_enabled("[data-testid=stop]")

    assert wait_for_status(page, "ok", "error") == "ok"
    assert output_text(page).split() == ["tick", "0", "tick", "1", "tick", "2", "tick", "3"]
    arrivals = page.evaluate("window.arrivals")
    spread_ms = arrivals["tick 3"] - arrivals["tick 0"]
    assert spread_ms > 1000, f"lines arrived together ({spread_ms:.0f} ms apart), not as printed"
    assert page.inner_text("[data-testid=status]").startswith("ok in ")
    assert not page.is_enabled("[data-testid=stop]")


def test_error_line_is_highlighted_and_traceback_lines_jump_to_the_code(page_at: PageAt) -> None:
    page = page_at("/")
    replace_code(page, "def ratio(a, b):\n    return a / b\n\nprint('before')\nratio(1, 0)\nprint('never')\n")
    page.click("[data-testid=run]")

    assert wait_for_status(page, "error", "ok") == "error"
    error = page.inner_text("[data-testid=output-error]")
    assert "ZeroDivisionError" in error and "division by zero" in error
    assert "before" in output_text(page) and "never" not in output_text(page)

    # The line the error was raised on (inside ratio) is marked, line and gutter.
    marked = page.locator(".cm-line.cm-mark-line-error")
    assert marked.count() == 1
    assert marked.inner_text() == "    return a / b"
    assert page.locator(".cm-mark-dot-error").count() == 1
    assert page.locator("#tab-output .tab-badge[data-tone=error]").is_visible()

    # Each user frame of the traceback links to its line: line 5 is the call.
    page.click(".output-traceback .output-line-link[data-line='5']")
    assert page.inner_text(".cm-activeLine") == "ratio(1, 0)"

    # Editing the code clears the stale mark.
    page.keyboard.type("  ")
    assert page.locator(".cm-mark-line-error").count() == 0


def test_syntax_error_marks_its_line(page_at: PageAt) -> None:
    page = page_at("/")
    replace_code(page, "x = 1\ny = (x +\nprint(y)\n")
    page.keyboard.press("ControlOrMeta+Enter")
    assert wait_for_status(page, "error", "ok") == "error"
    assert "SyntaxError" in page.inner_text("[data-testid=output-error]")
    marked_line = page.evaluate(
        "() => [...document.querySelectorAll('.cm-line')].findIndex(l => l.classList.contains('cm-mark-line-error')) + 1"
    )
    assert marked_line == int(page.get_attribute(".output-error-head .output-line-link", "data-line") or 0)
    assert marked_line in (2, 3)


def test_stop_cancels_a_long_run(page_at: PageAt) -> None:
    page = page_at("/")
    replace_code(page, "import time\nprint('started', flush=True)\ntime.sleep(60)\nprint('woke up')\n")
    page.click("[data-testid=run]")
    page.wait_for_function("() => document.querySelector('[data-testid=output-log]').innerText.includes('started')")

    page.click("[data-testid=stop]")

    assert wait_for_status(page, "cancelled", "ok", "error", timeout_ms=10_000) == "cancelled"
    assert page.inner_text("[data-testid=status]").startswith("cancelled")
    assert "Cancelled" in output_text(page) and "woke up" not in output_text(page)
    assert not page.is_enabled("[data-testid=stop]")

    # The connection and the worker are fine afterwards: the next run works.
    replace_code(page, "print(6 * 7)\n")
    page.keyboard.press("ControlOrMeta+Enter")
    assert wait_for_status(page, "ok", "error") == "ok"
    assert output_text(page).strip() == "42"


def test_backend_picker_shows_the_servers_backends(page_at: PageAt) -> None:
    page = page_at("/")
    backends = page.request.get(page.url.rstrip("/") + "/api/backends").json()["backends"]
    page.wait_for_selector("[data-testid=backend]:not([disabled])")
    options = page.locator("[data-testid=backend] option").all_inner_texts()
    assert options == [f"{b['name']} · {b['device_count']}× {b['device_kind']}" for b in backends]


def test_large_output_stays_in_few_dom_nodes(page_at: PageAt) -> None:
    page = page_at("/")
    # ~900 KB in 15,000 prints: under the 1 MiB output cap.
    replace_code(page, "for i in range(15000):\n    print(f'line {i:05d} ' + 'x' * 48)\n")
    page.keyboard.press("ControlOrMeta+Enter")
    assert wait_for_status(page, "ok", "error") == "ok"
    page.wait_for_function(
        "() => document.querySelector('[data-testid=output-log]').innerText.includes('line 14999')", timeout=20_000
    )
    blocks = page.locator(".output-stream").count()
    assert blocks <= 40, f"{blocks} stream blocks for 900 KB: output is not batched"
    # The page still answers promptly.
    started = page.evaluate("performance.now()")
    page.click(".cm-content")
    page.keyboard.type("#")
    assert page.evaluate("performance.now()") - started < 1000


@pytest.mark.parametrize("scheme", ["light", "dark"])
def test_theme_follows_the_system_setting(page_at: PageAt, scheme: str) -> None:
    page = page_at("/", color_scheme=scheme)

    def luminance(selector: str) -> float:
        rgb = page.evaluate(
            "(s) => getComputedStyle(document.querySelector(s)).backgroundColor.match(/\\d+/g).slice(0, 3).map(Number)",
            selector,
        )
        return sum(rgb) / (3 * 255)

    for selector in ("body", ".cm-editor", ".results"):
        if scheme == "dark":
            assert luminance(selector) < 0.2, selector
        else:
            assert luminance(selector) > 0.8, selector


def test_status_shows_queue_position_while_slots_are_busy(page_at: PageAt, live_slots: int) -> None:
    sleeper = "import time\nprint('holding a slot', flush=True)\ntime.sleep(30)\n"
    page = page_at("/")
    run_ok(page, "print('a run that finished: the queue has a duration to estimate from')")
    holders = [page_at("/") for _ in range(live_slots)]
    for holder in holders:
        replace_code(holder, sleeper)
        holder.keyboard.press("ControlOrMeta+Enter")
        wait_for_status(holder, "running")

    replace_code(page, "print('my turn')\n")
    page.keyboard.press("ControlOrMeta+Enter")
    wait_for_status(page, "queued")
    # A run has finished on this server, so the estimated wait is shown: counted down, or said to be
    # overdue once the runs ahead take longer than the recent runs it averages.
    wait = r"(about \d+ s left|starting in a moment|longer than usual: the runs ahead are taking a while)"
    assert re.fullmatch(rf"queued \(position 1, {wait}\)", page.inner_text("[data-testid=status]"))

    holders[0].click("[data-testid=stop]")
    assert wait_for_status(page, "ok", "error") == "ok"
    assert output_text(page).strip() == "my turn"
    for holder in holders[1:]:
        holder.click("[data-testid=stop]")
        wait_for_status(holder, "cancelled")


def test_a_dropped_connection_loses_the_run_and_reconnects(page_at: PageAt) -> None:
    page = page_at("/")
    replace_code(page, "import time\nprint('started', flush=True)\ntime.sleep(30)\n")
    page.keyboard.press("ControlOrMeta+Enter")
    page.wait_for_function("() => document.querySelector('[data-testid=output-log]').innerText.includes('started')")

    page.evaluate("window.jaxplay.connection.socket.close()")

    wait_for_status(page, "lost", timeout_ms=5_000)
    assert "connection" in page.inner_text("[data-testid=status]")
    page.wait_for_selector(".conn[data-state=open]", timeout=10_000)
    replace_code(page, "print('back')\n")
    page.keyboard.press("ControlOrMeta+Enter")
    assert wait_for_status(page, "ok", "error") == "ok"
    assert output_text(page).strip() == "back"
