"""Help while writing JAX, from the API index of the JAX the backend runs: completion, signature help,
hover docs; and syntax errors marked before running. Real server, index and Chromium."""

from __future__ import annotations

import pytest
from playwright.sync_api import Page

from tests.browser.helpers import PageAt, replace_code

pytestmark = [pytest.mark.live, pytest.mark.browser]


def index_loaded(page: Page) -> None:
    page.wait_for_function("window.jaxplay.apiIndex.data !== null", timeout=120_000)


def type_at_end(page: Page, text: str) -> None:
    page.click(".cm-content")
    page.keyboard.press("ControlOrMeta+End")
    page.keyboard.type(text)


def test_completion_after_a_module_alias_offers_that_jaxs_names(page_at: PageAt) -> None:
    page = page_at("/")
    index_loaded(page)
    replace_code(page, "import jax.numpy as jnp\nfrom jax import random\n")
    type_at_end(page, "jnp.arg")
    page.wait_for_selector(".cm-tooltip-autocomplete")
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
