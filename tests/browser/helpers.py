"""Helpers the browser tests share: driving the editor and reading the page."""

from __future__ import annotations

from collections.abc import Callable

from playwright.sync_api import Page

PageAt = Callable[..., Page]


def replace_code(page: Page, code: str) -> None:
    """Select all in the editor and insert ``code`` as one input (no auto-indent per keystroke)."""
    page.click(".cm-content")
    page.keyboard.press("ControlOrMeta+a")
    page.keyboard.insert_text(code)


def wait_for_status(page: Page, *statuses: str, timeout_ms: float = 60_000) -> str:
    selector = ", ".join(f"[data-testid=status][data-status={s}]" for s in statuses)
    page.wait_for_selector(selector, timeout=timeout_ms)
    return page.get_attribute("[data-testid=status]", "data-status") or ""


def output_text(page: Page) -> str:
    return page.inner_text("[data-testid=output-log]")


def run_ok(page: Page, code: str) -> None:
    """Put ``code`` in the editor, run it, and wait until it ends ``ok``."""
    replace_code(page, code)
    page.click("[data-testid=run]")
    assert wait_for_status(page, "ok", "error") == "ok", output_text(page)
