"""Help while writing JAX, from the API index of the JAX the backend runs: completion, signature help,
hover docs; and syntax errors marked before running. Real server, index and Chromium."""

from __future__ import annotations

import pytest
from playwright.sync_api import Page

from tests.browser.helpers import PageAt, replace_code

pytestmark = [pytest.mark.live, pytest.mark.browser]


def index_loaded(page: Page) -> None:
    """Uses the editor (a click), which loads the help's code and its index, and waits for both: the
    index can arrive before the help's own chunk is mounted, and typing then gets plain word completion."""
    page.click(".cm-content")
    page.wait_for_function("window.jaxplay.apiIndex.data !== null", timeout=120_000)
    page.wait_for_selector(".cm-editor[data-api-help=mounted]", state="attached", timeout=60_000)


def type_at_end(page: Page, text: str) -> None:
    page.click(".cm-content")
    page.keyboard.press("ControlOrMeta+End")
    page.keyboard.type(text)


def test_completion_after_a_module_alias_offers_that_jaxs_names(page_at: PageAt) -> None:
    page = page_at("/")
    index_loaded(page)
    replace_code(page, "import jax.numpy as jnp\nfrom jax import random\n")
    type_at_end(page, "jnp.arg")
    # The list can open on an earlier prefix ("jnp") and update as the keys arrive: wait for this one's.
    page.wait_for_selector(".cm-tooltip-autocomplete li:has-text('argsort')")
    labels = page.eval_on_selector_all(".cm-tooltip-autocomplete li .cm-completionLabel", "ls => ls.map(l => l.textContent)")
    assert "argmax" in labels and "argsort" in labels
    page.keyboard.press("Escape")
    page.keyboard.press("Enter")
    type_at_end(page, "random.norm")
    page.wait_for_selector(".cm-tooltip-autocomplete li:has-text('normal')")
    page.wait_for_timeout(200)  # CodeMirror ignores Enter just after the list opens (its interaction delay)
    page.keyboard.press("Enter")
    assert page.evaluate("window.jaxplay.editor.getCode()").endswith("random.normal")


def test_signature_help_inside_a_call_and_docs_on_hover(page_at: PageAt) -> None:
    page = page_at("/")
    index_loaded(page)
    replace_code(page, "import jax.numpy as jnp\nx = jnp.ones(3)\n")
    type_at_end(page, "jnp.sum(x, ")
    help_card = page.wait_for_selector("[data-testid=signature-help]")
    text = help_card.inner_text()
    assert "jax.numpy.sum" in text and "axis" in text and "Sum of the elements" in text
    # Escape hides it until the cursor is in another call (a first Escape may close a completion list).
    for _ in range(3):
        page.keyboard.press("Escape")
        page.wait_for_timeout(150)
        if page.locator("[data-testid=signature-help]").count() == 0:
            break
    assert page.locator("[data-testid=signature-help]").count() == 0

    word = page.locator(".cm-line", has_text="x = jnp.ones(3)").locator("text=ones")
    word.hover()
    hover = page.wait_for_selector("[data-testid=hover-docs]")
    assert "jax.numpy.ones" in hover.inner_text()


def test_a_syntax_error_is_marked_before_running(page_at: PageAt) -> None:
    page = page_at("/")
    replace_code(page, "import jax\n\ndef f(x:\n    return x\n\nprint(1)\n")
    page.wait_for_selector(".cm-line[data-mark=warning]", timeout=5_000)
    marked = page.evaluate(
        "[...document.querySelectorAll('.cm-line')].map((l, i) => l.dataset.mark === 'warning' ? i + 1 : 0)"
        ".filter(Boolean)"
    )
    assert marked and min(marked) in (3, 4)
    assert page.locator(".cm-mark-dot-warning").count() >= 1
    replace_code(page, "import jax\n\ndef f(x):\n    return x\n\nprint(1)\n")
    page.wait_for_function("!document.querySelector('.cm-line[data-mark=warning]')", timeout=5_000)


def test_docs_read_without_sphinx_markup_and_signature_help_marks_the_argument(page_at: PageAt) -> None:
    page = page_at("/")
    index_loaded(page)
    replace_code(page, "import jax.numpy as jnp\nx = jnp.abs(-1.0)\n")
    page.locator(".cm-line", has_text="x = jnp.abs").locator("text=abs").hover()
    hover = page.wait_for_selector("[data-testid=hover-docs]")
    assert "Alias of jax.numpy.absolute" in hover.inner_text() and ":func:" not in hover.inner_text()
    assert hover.query_selector(".api-help-doc code").inner_text() == "jax.numpy.absolute"
    page.mouse.move(0, 0)

    type_at_end(page, "jnp.sum(x, ")
    active = page.wait_for_selector("[data-testid=signature-help] [data-testid=signature-active]")
    assert active.inner_text().startswith("axis")
    page.keyboard.type("keepdims=")
    page.wait_for_function("document.querySelector('[data-testid=signature-active]')?.innerText.startsWith('keepdims')")
    page.keyboard.press("Escape")
    page.keyboard.press("Escape")

    # Compact types: no Union[...] spelled out, no private module paths.
    type_at_end(page, ")\njnp.zeros(")
    text = page.wait_for_selector("[data-testid=signature-help]").inner_text()
    assert "Union[" not in text and "jax._src" not in text and "NoneType" not in text, text
    assert "dtype: str | type[Any] | dtype | …" in text or "dtype: str | type[Any] | numpy.dtype | …" in text, text


def test_signature_help_on_the_first_line_stays_inside_the_editor(page_at: PageAt) -> None:
    page = page_at("/")
    index_loaded(page)
    replace_code(page, "import jax.numpy as jnp; jnp.sum(")
    card = page.wait_for_selector("[data-testid=signature-help]")
    editor_top = page.locator(".cm-scroller").bounding_box()["y"]
    header_bottom = page.locator("header.topbar").bounding_box()
    assert card.bounding_box()["y"] >= editor_top - 1 >= header_bottom["y"] + header_bottom["height"] - 2


def test_the_help_and_its_index_load_when_the_editor_is_first_used_not_with_the_page(page_at: PageAt) -> None:
    requested: list[str] = []
    page = page_at("/", on_request=lambda request: requested.append(request.url))
    page.wait_for_function("performance.getEntriesByName('jaxplay:ready-to-run').length > 0")
    page.wait_for_load_state("networkidle")
    assert not [u for u in requested if "/api/api-index/" in u or "/assets/api_help-" in u], requested
    type_at_end(page, "\nimport jax.numpy as jnp\njnp.arg")
    page.wait_for_selector(".cm-tooltip-autocomplete li:has-text('argmax')", timeout=120_000)
    assert [u for u in requested if "/assets/api_help-" in u] and [u for u in requested if "/api/api-index/" in u]


@pytest.mark.parametrize("width", [1440, 390])
def test_a_completions_docs_sit_beside_or_under_the_list_never_over_its_rows(page_at: PageAt, width: int) -> None:
    page = page_at("/", viewport={"width": width, "height": 900})
    index_loaded(page)
    replace_code(page, "import jax.numpy as jnp\n")
    type_at_end(page, "jnp.ar")
    page.wait_for_selector(".cm-tooltip-autocomplete li:has-text('argmax')")
    # CodeMirror ignores keys that move its selection just after the list opens (its interaction delay):
    # an ArrowDown then moves the cursor instead, which closes the list.
    page.wait_for_timeout(200)
    page.keyboard.press("ArrowDown")  # a selected option with docs shows them
    info = page.wait_for_selector(".cm-completionInfo")
    box = info.bounding_box()
    rows = page.locator(".cm-tooltip-autocomplete li")
    for index in range(min(rows.count(), 6)):
        row = rows.nth(index).bounding_box()
        overlap_x = min(box["x"] + box["width"], row["x"] + row["width"]) - max(box["x"], row["x"])
        overlap_y = min(box["y"] + box["height"], row["y"] + row["height"]) - max(box["y"], row["y"])
        assert overlap_x <= 1 or overlap_y <= 1, (index, box, row)
    page.screenshot(path=f"/tmp/shots-b/completion-{width}.png")


def test_signatures_name_sentinel_defaults_and_show_no_memory_address(page_at: PageAt) -> None:
    page = page_at("/")
    index_loaded(page)
    replace_code(page, "import jax\n")
    type_at_end(page, "jax.debug_nans(")
    text = page.wait_for_selector("[data-testid=signature-help]").inner_text()
    assert "new_val" in text and "NoDefault" in text and "0x" not in text, text
