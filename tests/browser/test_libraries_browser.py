"""The library gallery examples and the "what's installed" popover in Chromium, on the real server, worker and sandbox."""

from __future__ import annotations

import pytest
from playwright.sync_api import Page

from tests.browser.helpers import PageAt, output_text, wait_for_status

pytestmark = [pytest.mark.live, pytest.mark.browser]


def run_gallery_example(page: Page, example: str) -> str:
    """Open ``example`` from the Gallery, run it until it ends ok, and return its output."""
    page.click("#tab-gallery")
    page.click(f"[data-testid=gallery-open-{example}]")
    page.click("[data-testid=run]")
    status = wait_for_status(page, "ok", "error", "timeout", "crashed", timeout_ms=120_000)
    assert status == "ok", f"{status}: {output_text(page)}"
    return output_text(page)


def inspect_signatures(page: Page, fn: str) -> list[str]:
    page.click("#tab-inspect")
    page.wait_for_selector(f".inspect-fn[data-fn='{fn}'] .inspect-compile")
    return page.locator(f".inspect-fn[data-fn='{fn}'] .inspect-compile .inspect-signature").all_inner_texts()


def test_the_flax_nnx_mlp_trains_prints_its_loss_plots_it_and_shows_its_step(page_at: PageAt) -> None:
    page = page_at("/")
    output = run_gallery_example(page, "10_flax_nnx_mlp")
    losses = [float(line.split()[-1]) for line in output.splitlines() if line.startswith("step")]
    assert len(losses) == 9 and losses[-1] < losses[0] / 10
    assert page.locator(".output-display[data-role=figure] img").count() == 1
    (signature,) = inspect_signatures(page, "train_step")
    assert signature.startswith("(model: MLP(head.bias: Param f32[1]") and "x: f32[256,1], y: f32[256,1])" in signature


def test_the_equinox_example_shows_each_filter_jit_function_and_why_it_compiled_again(page_at: PageAt) -> None:
    page = page_at("/")
    output = run_gallery_example(page, "11_equinox_filter_jit")
    assert "learned coefficients: [ 1. -0. -2.  1.]" in output
    assert inspect_signatures(page, "train_step")[0].startswith("(model: Polynomial(coefficients: f32[4]), opt_state:")
    assert inspect_signatures(page, "scaled") == [
        "(model: Polynomial(coefficients: f32[4]), x=2.0, factor=2.0)",
        "(model: Polynomial(coefficients: f32[4]), x=2.0, factor=3.0)",
    ]
    reason = page.locator(".inspect-fn[data-fn=scaled] [data-testid=inspect-reason]").inner_text()
    assert "static argument factor, now 3.0 and before 2.0" in reason


def test_the_chex_example_catches_the_shape_bug(page_at: PageAt) -> None:
    page = page_at("/")
    output = run_gallery_example(page, "12_chex_shape_bug")
    assert "unchecked loss: 2.5" in output
    assert "chex caught it: [Chex] Assertion assert_equal_shape failed: Arrays have different shapes: [(4, 1), (4,)]." in output
    assert "fixed loss: 0.0" in output
    assert inspect_signatures(page, "checked_mse") == ["(predictions: f32[4], targets: f32[4])"]


def test_the_libraries_popover_lists_what_a_program_can_import(page_at: PageAt) -> None:
    page = page_at("/")
    page.wait_for_selector("[data-testid=backend] option[value=cpu]", state="attached")
    assert page.is_hidden("[data-testid=libraries-popover]")
    page.click("[data-testid=backend-libraries]")
    popover = page.locator("[data-testid=libraries-popover]")
    popover.wait_for(state="visible")
    assert popover.locator(".libraries-heading").inner_text() == "Installed on cpu"
    names = popover.locator(".library-name").all_inner_texts()
    assert {"jax", "optax", "flax", "equinox", "chex", "einops", "jaxtyping", "orbax", "scipy", "pandas"} <= set(names)
    backends = page.evaluate("() => fetch('/api/backends').then(r => r.json())")
    (cpu,) = [b for b in backends["backends"] if b["name"] == "cpu"]
    assert popover.locator("tr[data-library=optax] .library-version").inner_text() == cpu["libraries"]["optax"]
    page.keyboard.press("Escape")
    assert page.is_hidden("[data-testid=libraries-popover]")


@pytest.mark.parametrize("viewport", [{"width": 1440, "height": 900}, {"width": 390, "height": 844},
                                      {"width": 1280, "height": 560}])
def test_the_libraries_popover_shows_its_last_sentence_and_no_server_plumbing(page_at: PageAt, viewport) -> None:
    page = page_at("/", viewport=viewport)
    page.wait_for_selector("[data-testid=backend] option[value=cpu]", state="attached")
    page.click("[data-testid=backend-libraries]")
    popover = page.locator("[data-testid=libraries-popover]")
    popover.wait_for(state="visible")
    names = set(popover.locator(".library-name").all_inner_texts())
    assert not names & {"prometheus_client", "prometheus-client", "psycopg", "redis", "uvicorn", "starlette"}, names
    note = popover.locator(".libraries-note").bounding_box()
    box = popover.bounding_box()
    # The whole sentence is in view without scrolling the popover, and the popover is in the window.
    assert box["y"] <= note["y"] and note["y"] + note["height"] <= box["y"] + box["height"] + 0.5, (note, box)
    assert box["y"] + box["height"] <= viewport["height"] and box["x"] >= 0
