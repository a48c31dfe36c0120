"""The Flags tab and Compare of two flag sets in Chromium, at 1440 and 390 px, on the real worker and sandbox."""

from __future__ import annotations

import json
import uuid

import pytest

from tests.browser.helpers import PageAt, output_text, replace_code, wait_for_status
from tests.browser.test_accessibility_browser import blocking_violations

pytestmark = [pytest.mark.live, pytest.mark.browser]

WIDE = {"width": 1440, "height": 900}
PHONE = {"width": 390, "height": 844}
PROGRAM = """import jax, jax.numpy as jnp
print(jnp.ones(2).dtype)

@jax.jit
def half(y):
    return y / 2.0

print(half(jnp.arange(4.0)))
"""


def test_flags_set_on_the_tab_reach_the_run_and_a_refused_one_is_explained_there(page_at: PageAt) -> None:
    page = page_at("/", viewport=WIDE)
    replace_code(page, PROGRAM)
    page.click("#tab-flags")
    # Labelled controls, reached by their names: what a screen reader announces.
    tab = page.locator(".flags")
    x64 = tab.get_by_label("jax_enable_x64", exact=True)
    x64.focus()
    x64.select_option("true")
    tab.get_by_label("--xla_disable_hlo_passes", exact=True).fill("algsimp")
    tab.get_by_label("--xla_disable_hlo_passes", exact=True).press("Tab")
    assert page.inner_text("#tab-flags").strip().endswith("2")  # the badge counts the flags set
    page.click("[data-testid=run]")
    assert wait_for_status(page, "ok", "error", timeout_ms=120_000) == "ok"
    used = page.inner_text("[data-testid=flags-used]")
    assert used == "This run used: jax_enable_x64=true --xla_disable_hlo_passes=algsimp", used
    page.screenshot(path="/tmp/jaxplay-flags-wide.png", full_page=True)
    page.wait_for_timeout(300)  # tab fade settled before axe measures colours
    assert not blocking_violations(page, "#panel-flags")
    for tab_id in ("#tab-output", "#tab-inspect", "#tab-performance"):  # the status line says so on every tab
        page.click(tab_id)
        assert "flags: jax_enable_x64=true --xla_disable_hlo_passes=algsimp" in page.inner_text(".run-info")
    page.click("#tab-output")
    assert "float64" in output_text(page)
    # A pass list with a path in it: refused by the server, said beside the controls, naming the flag.
    page.click("#tab-flags")
    tab.get_by_label("--xla_disable_hlo_passes", exact=True).fill("algsimp,/tmp/x")
    tab.get_by_label("--xla_disable_hlo_passes", exact=True).press("Tab")
    assert page.get_attribute("[data-testid=flags-xla_disable_hlo_passes]", "aria-invalid") == "true"
    page.click("[data-testid=run]")
    wait_for_status(page, "rejected")
    problem = page.wait_for_selector("[data-testid=flags-problem]:not([hidden])")
    text = problem.inner_text()
    assert "--xla_disable_hlo_passes" in text and "pass names" in text, text
    page.screenshot(path="/tmp/jaxplay-flags-refused.png", full_page=True)


def test_compare_runs_two_flag_sets_side_by_side(page_at: PageAt) -> None:
    for viewport, shot in ((WIDE, "/tmp/jaxplay-compare-flags-wide.png"),
                           (PHONE, "/tmp/jaxplay-compare-flags-phone.png")):
        page = page_at("/", viewport=viewport)
        replace_code(page, PROGRAM)
        page.click("#tab-compare")
        page.select_option("[data-testid=compare-mode]", "flags")
        page.wait_for_selector("[data-testid=compare-b-xla_disable_hlo_passes]")
        page.select_option("[data-testid=compare-b-jax_enable_x64]", "true")
        page.fill("[data-testid=compare-b-xla_disable_hlo_passes]", "algsimp")
        page.click("[data-testid=compare-run]")
        page.wait_for_selector("[data-testid=compare-status][data-state=done]", timeout=180_000)
        columns = page.locator("[data-testid=compare-column]")
        assert columns.count() == 2
        a, b = columns.nth(0).inner_text(), columns.nth(1).inner_text()
        assert a.startswith("A: no flags") and "float32" in a, a
        assert b.startswith("B: jax_enable_x64=true --xla_disable_hlo_passes=algsimp") and "float64" in b, b
        table = page.inner_text("[data-testid=compare-table]")
        assert "half #1: flops" in table and "run time" in table, table
        page.click("[data-testid=compare-artifact-hlo]")
        page.wait_for_selector(".compare [data-testid=inspect-diff] .cm-mergeView")
        before, after = page.locator(".compare [data-testid=inspect-diff] .cm-content").all_inner_texts()[:2]
        assert "divide(" not in before and "divide(" in after
        if viewport is WIDE:  # XLA's pass lists side by side: algsimp ran only without the flag
            page.click("[data-testid=compare-passes]")
            page.wait_for_function("document.querySelectorAll('[data-testid=compare-pass-list] .compare-line')"
                                   ".length > 10 && !document.body.innerText.includes('compiling with per-pass')",
                                   timeout=180_000)
            only_a, only_b = (page.locator("[data-testid=compare-pass-list]").nth(i)
                              .locator("[data-testid=compare-pass-only-here]").all_inner_texts() for i in (0, 1))
            assert "algsimp" in only_a and "algsimp" not in only_b, (only_a, only_b)
        page.wait_for_timeout(300)
        assert not blocking_violations(page, "#panel-compare")
        page.screenshot(path=shot, full_page=True)


def test_a_link_and_its_embed_open_with_the_flags_of_its_run(page_at: PageAt, base_url: str) -> None:
    page = page_at("/", viewport=WIDE)
    flags = {"config": {"jax_enable_x64": True}, "xla": {"xla_disable_hlo_passes": "algsimp"}}
    code = f"# {uuid.uuid4().hex[:12]}\n{PROGRAM}"
    response = page.request.post(f"{base_url}/api/snippets", headers={"content-type": "application/json"},
                                 data=json.dumps({"code": code, "settings": {"inspect": True, "flags": flags}}))
    assert response.status in (200, 201), response.text()
    snippet = response.json()["id"]
    for path, shot in ((f"/s/{snippet}", "/tmp/jaxplay-flags-link.png"), (f"/e/{snippet}", "/tmp/jaxplay-flags-embed.png")):
        linked = page_at(path, viewport=PHONE)
        linked.click("[data-testid=run]")
        assert wait_for_status(linked, "ok", "error", timeout_ms=120_000) == "ok"
        assert "flags: jax_enable_x64=true --xla_disable_hlo_passes=algsimp" in linked.inner_text(".run-info")
        assert "float64" in output_text(linked)
        if path.startswith("/s/"):
            linked.click("#tab-flags")
            assert linked.input_value("[data-testid=flags-jax_enable_x64]") == "true"
            assert linked.input_value("[data-testid=flags-xla_disable_hlo_passes]") == "algsimp"
        linked.screenshot(path=shot, full_page=True)
