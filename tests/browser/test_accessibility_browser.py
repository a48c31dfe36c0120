"""The page for keyboard and screen-reader users, in Chromium against the real server, worker and sandbox.

axe-core (an npm devDependency: frontend/node_modules/axe-core, read from disk and injected, never fetched)
audits every view with real runs in it, in both colour schemes: no critical and no serious violation.
The keyboard never gets trapped in the editor, Ctrl+Enter and Ctrl+S work wherever focus is, and the
header's menus follow the menu button pattern.
"""

from __future__ import annotations

import json
import re

import pytest
from playwright.sync_api import Page, expect

from tests.browser.conftest import FRONTEND
from tests.browser.helpers import PageAt, output_text, replace_code, wait_for_status

pytestmark = [pytest.mark.live, pytest.mark.browser]

AXE = FRONTEND / "node_modules" / "axe-core" / "axe.min.js"
BLOCKING = ("critical", "serious")
COMPILED = (
    "import jax, jax.numpy as jnp\n\n"
    "@jax.jit\n"
    "def f(x):\n"
    "    # a comment, in the comments' colour\n"
    "    return jnp.sin(x) * 2\n\n"
    "print(f(jnp.ones(3)))\n"
)


def axe_source() -> str:
    if not AXE.exists():
        pytest.fail(f"{AXE} is missing: run `npm ci` in frontend/ (make test does).")
    return AXE.read_text()


def blocking_violations(page: Page, where: str = "document") -> list[str]:
    """axe-core's critical and serious violations on ``page`` (or inside the selector ``where``), one line each."""
    if not page.evaluate("typeof window.axe !== 'undefined'"):
        page.add_script_tag(content=axe_source())
    found = page.evaluate(
        """async (where) => {
          const context = where === 'document' ? document : { include: [[where]] };
          const result = await axe.run(context, { resultTypes: ['violations'] });
          return result.violations.map(v => ({
            id: v.id, impact: v.impact,
            nodes: v.nodes.slice(0, 6).map(n => n.target.join(' ') + ': ' + (n.failureSummary || '').split('\\n').slice(1).join(' ')),
          }));
        }""",
        where,
    )
    return [f"{v['impact']} {v['id']}: {' | '.join(v['nodes'])}" for v in found if v["impact"] in BLOCKING]


def audit(page: Page, view: str, failures: dict[str, list[str]], where: str = "document") -> None:
    page.wait_for_timeout(300)  # let transitions (tab fades, popovers) settle before colours are measured
    found = blocking_violations(page, where)
    if found:
        failures[view] = found


def show_tab(page: Page, panel: str) -> None:
    page.click(f"#tab-{panel}")
    expect(page.locator(f"#panel-{panel}")).to_be_visible()


@pytest.mark.parametrize("scheme", ["light", "dark"])
def test_no_view_has_a_critical_or_serious_accessibility_violation(page_with_versions_at: PageAt, scheme: str) -> None:
    failures: dict[str, list[str]] = {}
    page = page_with_versions_at("/", color_scheme=scheme)
    # The page's own example: jit, grad, vmap and random, so Inspect, Performance and Sharding have content.
    page.click("[data-testid=run]")
    assert wait_for_status(page, "ok", "error", timeout_ms=120_000) == "ok", output_text(page)
    audit(page, "main view (Output)", failures)
    show_tab(page, "inspect")
    page.wait_for_selector("[data-testid=inspect-code] .cm-content")
    audit(page, "Inspect", failures)
    page.click(".inspect button:text-is('Optimized HLO')")
    audit(page, "Inspect, optimized HLO", failures)
    show_tab(page, "performance")
    audit(page, "Performance", failures)
    show_tab(page, "sharding")
    audit(page, "Sharding", failures)
    show_tab(page, "gallery")
    audit(page, "Gallery", failures)

    page.click("[data-testid=export]")
    audit(page, "the Export menu", failures, ".share-menu")
    page.keyboard.press("Escape")
    page.click("[data-testid=backend-libraries]")
    audit(page, "the Libraries popover", failures, "[data-testid=libraries-popover]")
    page.keyboard.press("Escape")
    page.click("[data-testid=room-menu]")
    audit(page, "the Room popover", failures, "[data-testid=room-menu-panel]")
    page.keyboard.press("Escape")

    show_tab(page, "output")
    replace_code(page, COMPILED)
    page.click("[data-testid=run]")
    wait_for_status(page, "ok")
    page.keyboard.press("ControlOrMeta+s")
    url = page.input_value("[data-testid=share-url]")
    audit(page, "the Share dialog", failures, "[data-testid=share-dialog]")
    snippet = re.search(r"/s/([a-z2-7]+)$", url).group(1)

    link = page_with_versions_at(f"/s/{snippet}", color_scheme=scheme)
    link.wait_for_selector("[data-testid=run-banner][data-kind=recorded]")
    audit(link, "a link's page", failures)
    embed = page_with_versions_at(f"/e/{snippet}?view=inspect", color_scheme=scheme)
    embed.wait_for_selector("[data-testid=inspect-code] .cm-content")
    audit(embed, "an embed (Inspect)", failures)

    presenter = page_with_versions_at("/", color_scheme=scheme)
    presenter.click("[data-testid=room-menu]")
    presenter.click("[data-testid=room-start]")
    presenter.wait_for_url(re.compile(r"/r/jax-"))
    presenter.wait_for_selector("[data-testid=room-bar] [data-testid=room-counts]:not(:empty)")
    presenter.click("[data-testid=run]")
    wait_for_status(presenter, "ok", "error", timeout_ms=120_000)
    audit(presenter, "a room's presenter", failures)
    code = presenter.inner_text("[data-testid=room-code]")
    attendee = page_with_versions_at(f"/r/{code}", color_scheme=scheme)
    expect(attendee.locator("[data-testid=output-log]")).not_to_be_empty()
    audit(attendee, "a room's attendee", failures)
    presenter.click("[data-testid=room-show]")
    audit(presenter, "the projector view", failures, "[data-testid=room-projector]")

    assert not failures, "\n".join(f"{view}:\n  " + "\n  ".join(lines) for view, lines in failures.items())


def test_the_projector_copy_link_button_is_readable_in_dark_mode(page_at: PageAt) -> None:
    presenter = page_at("/", color_scheme="dark")
    presenter.click("[data-testid=room-menu]")
    presenter.click("[data-testid=room-start]")
    presenter.wait_for_selector("[data-testid=room-bar]")
    presenter.click("[data-testid=room-show]")
    colours = presenter.eval_on_selector(
        "[data-testid=room-copy-link]", "b => [getComputedStyle(b).color, getComputedStyle(b).backgroundColor]"
    )
    assert colours == ["rgb(17, 17, 17)", "rgb(255, 255, 255)"], colours  # #111 on white, as the rest of the view


# --- the keyboard -----------------------------------------------------------------------------------------


def focus_in_editor(page: Page) -> bool:
    return page.evaluate("document.activeElement?.closest('.cm-editor') !== null")


def test_tab_passes_through_the_editor_without_changing_the_code(page_at: PageAt) -> None:
    page = page_at("/")
    code = page.evaluate("window.jaxplay.editor.getCode()")
    assert not focus_in_editor(page)  # nothing takes focus on load
    reached_editor = False
    for _ in range(30):
        page.keyboard.press("Tab")
        if focus_in_editor(page):
            reached_editor = True
            hint = page.locator("[data-testid=editor-keys-hint]")
            expect(hint).to_be_visible()
            expect(hint).to_contain_text("Tab moves on; once you type, Tab indents")
    assert reached_editor
    assert page.evaluate("window.jaxplay.editor.getCode()") == code
    # Shift+Tab leaves it backwards too.
    page.focus(".cm-content")
    page.keyboard.press("Shift+Tab")
    assert not focus_in_editor(page)
    assert page.evaluate("window.jaxplay.editor.getCode()") == code


def test_once_typing_tab_indents_and_escape_then_tab_leaves(page_at: PageAt) -> None:
    page = page_at("/")
    page.focus(".cm-content")
    # The editor's accessible description says how to leave it.
    described_by = page.get_attribute(".cm-content", "aria-describedby")
    description = page.locator(f"#{described_by}").text_content()
    assert "press Escape, then Tab" in description and "runs the code" in description
    page.keyboard.press("ControlOrMeta+Home")
    page.keyboard.type("x = 1")
    page.keyboard.press("Home")
    page.keyboard.press("Tab")
    indented = page.evaluate("window.jaxplay.editor.getCode()")
    assert indented.startswith("    x = 1")
    assert focus_in_editor(page)
    hint = page.locator("[data-testid=editor-keys-hint]")
    expect(hint).to_contain_text("indents")
    expect(hint).to_contain_text("Esc then Tab leaves the editor")
    page.keyboard.press("Escape")
    page.keyboard.press("Tab")
    assert not focus_in_editor(page)
    assert page.evaluate("window.jaxplay.editor.getCode()") == indented


def test_a_click_in_the_editor_means_editing_so_tab_indents_at_once(page_at: PageAt) -> None:
    page = page_at("/")
    replace_code(page, "y = 2")
    page.keyboard.press("Home")
    page.keyboard.press("Tab")
    assert page.evaluate("window.jaxplay.editor.getCode()") == "    y = 2"


def test_tab_leaves_a_read_only_editor_even_after_a_click(page_at: PageAt, base_url: str) -> None:
    page = page_at("/")
    answer = page.request.post(base_url + "/api/snippets", data=json.dumps({"code": "z = 3\n"}),
                               headers={"content-type": "application/json"})
    embed = page_at(f"/e/{answer.json()['id']}")  # read-only until Edit is pressed
    embed.click(".cm-content")
    expect(embed.locator("[data-testid=editor-keys-hint]")).to_be_hidden()
    embed.keyboard.press("Tab")
    assert not focus_in_editor(embed)
    assert embed.evaluate("window.jaxplay.editor.getCode()") == "z = 3\n"


def test_ctrl_enter_and_ctrl_s_work_wherever_focus_is(page_at: PageAt) -> None:
    page = page_at("/")
    replace_code(page, "print('ran from the tabs')")
    page.focus("#tab-inspect")
    page.keyboard.press("ControlOrMeta+Enter")
    assert wait_for_status(page, "ok") == "ok"
    assert "ran from the tabs" in output_text(page)
    page.focus("[data-testid=backend]")
    page.keyboard.press("ControlOrMeta+s")
    expect(page.locator("[data-testid=share-url]")).to_be_visible()


def test_export_is_a_menu_button_the_arrow_keys_move_through(page_at: PageAt) -> None:
    page = page_at("/")
    button = page.locator("[data-testid=export]")
    assert button.get_attribute("aria-haspopup") == "menu" and button.get_attribute("aria-expanded") == "false"
    button.focus()
    page.keyboard.press("ArrowDown")
    menu = page.locator(".share-menu")
    expect(menu).to_be_visible()
    assert menu.get_attribute("role") == "menu" and button.get_attribute("aria-expanded") == "true"
    assert page.evaluate("document.activeElement.dataset.testid") == "export-py"
    assert page.locator(".share-menu [role=menuitem]").count() == 2
    page.keyboard.press("ArrowDown")
    assert page.evaluate("document.activeElement.dataset.testid") == "export-ipynb"
    page.keyboard.press("ArrowDown")  # wraps around
    assert page.evaluate("document.activeElement.dataset.testid") == "export-py"
    page.keyboard.press("End")
    assert page.evaluate("document.activeElement.dataset.testid") == "export-ipynb"
    page.keyboard.press("Escape")
    expect(menu).to_be_hidden()
    assert button.get_attribute("aria-expanded") == "false"
    assert page.evaluate("document.activeElement.dataset.testid") == "export"
    # Enter opens it too, on the first item; ArrowUp on the button opens it on the last.
    page.keyboard.press("Enter")
    assert page.evaluate("document.activeElement.dataset.testid") == "export-py"
    page.keyboard.press("Escape")
    page.keyboard.press("ArrowUp")
    assert page.evaluate("document.activeElement.dataset.testid") == "export-ipynb"
    page.keyboard.press("Tab")  # moving on closes it
    expect(menu).to_be_hidden()


def test_header_popups_open_one_at_a_time_and_escape_returns_focus(page_at: PageAt) -> None:
    page = page_at("/")
    page.wait_for_selector("[data-testid=backend] option[value=cpu]", state="attached")
    room, libraries = page.locator("[data-testid=room-menu-panel]"), page.locator("[data-testid=libraries-popover]")
    page.click("[data-testid=room-menu]")
    expect(room).to_be_visible()
    assert page.get_attribute("[data-testid=room-menu]", "aria-expanded") == "true"
    page.click("[data-testid=export]")
    expect(page.locator(".share-menu")).to_be_visible()
    expect(room).to_be_hidden()
    page.click("[data-testid=backend-libraries]")
    expect(libraries).to_be_visible()
    expect(page.locator(".share-menu")).to_be_hidden()
    page.keyboard.press("Escape")
    expect(libraries).to_be_hidden()
    # Keyboard: Enter opens the Room popover on its first control, the arrows move among its controls.
    page.focus("[data-testid=room-menu]")
    page.keyboard.press("Enter")
    assert page.evaluate("document.activeElement.dataset.testid") == "room-start"
    page.keyboard.press("ArrowDown")
    assert page.evaluate("document.activeElement.dataset.testid") == "room-code-input"
    page.keyboard.press("ArrowDown")
    assert page.evaluate("document.activeElement.dataset.testid") == "room-join"
    page.keyboard.press("ArrowUp")
    page.keyboard.press("ArrowUp")
    assert page.evaluate("document.activeElement.dataset.testid") == "room-start"
    page.keyboard.press("Escape")
    expect(room).to_be_hidden()
    assert page.evaluate("document.activeElement.dataset.testid") == "room-menu"
    # The Libraries popover, opened from the keyboard, takes focus on its list: the arrows scroll it.
    page.focus("[data-testid=backend-libraries]")
    page.keyboard.press("Enter")
    expect(libraries).to_be_visible()
    assert page.evaluate("document.activeElement.classList.contains('libraries-list')")
    page.keyboard.press("Escape")
    assert page.evaluate("document.activeElement.dataset.testid") == "backend-libraries"


def test_the_page_has_one_h1_and_each_panel_a_heading(page_at: PageAt) -> None:
    page = page_at("/")
    assert page.locator("h1").all_text_contents() == ["JAX Playground"]
    headings = page.locator(".tab-pane > h2").all_text_contents()
    assert headings[:3] == ["Output", "Inspect", "Sharding"], headings
    assert page.locator("[role=tablist] > :not([role=tab])").count() == 0

