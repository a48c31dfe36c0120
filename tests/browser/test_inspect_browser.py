"""The Inspect and Gallery tabs in Chromium, on the real server, worker and sandbox."""

from __future__ import annotations

import re
import time
from pathlib import Path

import pytest
from playwright.sync_api import Page

from tests.browser.helpers import PageAt, output_text, replace_code, wait_for_status

pytestmark = [pytest.mark.live, pytest.mark.browser]

TWO_FUNCTIONS = """import jax
import jax.numpy as jnp

@jax.jit
def double(x):
    return jnp.sin(x) * 2

@jax.jit
def total(x):
    return jnp.cumsum(x).sum()

double(jnp.ones(3))
total(jnp.ones(3))
double(jnp.ones(5))
print("done")
"""


def run(page: Page, code: str) -> None:
    replace_code(page, code)
    page.click("[data-testid=run]")
    assert wait_for_status(page, "ok", "error") == "ok", output_text(page)


def open_inspect(page: Page) -> None:
    page.click("#tab-inspect")
    page.wait_for_selector(".inspect-compile")


def test_compiled_functions_are_listed_with_highlighted_ir_and_recompile_reasons(page_at: PageAt) -> None:
    page = page_at("/")
    run(page, TWO_FUNCTIONS)
    open_inspect(page)
    assert page.inner_text("#tab-inspect .tab-badge") == "3"
    names = page.locator(".inspect-fn .inspect-fn-head .inspect-fn-name").all_inner_texts()
    assert names == ["double", "total"]
    assert page.locator(".inspect-fn[data-fn=double] .inspect-compile").count() == 2
    reason = page.locator(".inspect-fn[data-fn=double] [data-testid=inspect-reason]").inner_text()
    assert reason == "different input types:\n* at x, now f32[5] and before f32[3]"

    # The first compilation is selected: jaxpr first, then the optimized HLO tab.
    code = page.locator("[data-testid=inspect-code] .cm-content")
    assert "sin" in code.inner_text()
    page.click(".inspect-artifact-tab[data-artifact=hlo]")
    page.wait_for_function("() => document.querySelector('[data-testid=inspect-code]').dataset.dialect === 'hlo'")
    assert code.inner_text().startswith("HloModule jit_double")
    # Highlighted: tokens are wrapped in styled spans, opcodes coloured differently from plain text.
    colours = page.eval_on_selector_all(
        "[data-testid=inspect-code] .cm-line span",
        "spans => [...new Set(spans.map(s => getComputedStyle(s).color))]",
    )
    assert len(colours) >= 4
    assert page.locator("[data-testid=inspect-phases]").inner_text().count("ms") >= 3
    assert "FLOP" in page.inner_text("[data-testid=inspect-cost]")
    assert "peak" in page.inner_text("[data-testid=inspect-memory]")

    # The recompilation: its reason above, and a diff against the first compilation.
    page.click(".inspect-compile[data-key='1.2']")
    page.click("[data-testid=inspect-diff-previous]")
    page.wait_for_selector("[data-testid=inspect-diff] .cm-mergeView")
    assert page.locator("[data-testid=inspect-diff] .cm-changedLine").count() > 0


def test_a_jitted_gradient_is_named_for_it_and_memory_says_how_peak_relates(page_at: PageAt) -> None:
    page = page_at("/")
    run(page, """import jax
import jax.numpy as jnp

def layer(w, x):
    return jnp.tanh(x @ w).sum()

w, x = jnp.ones((64, 64)), jnp.ones((32, 64))
jax.jit(layer)(w, x)
jax.jit(layer)(w, x[:16])
jax.jit(jax.grad(layer))(w, x)
""")
    open_inspect(page)
    names = page.locator(".inspect-fn .inspect-fn-head .inspect-fn-name").all_inner_texts()
    assert names == ["layer", "grad(layer)"], names
    page.locator(".inspect-fn[data-fn='grad(layer)'] .inspect-compile").click()
    # Its first compilation: no "compiled again because" (JAX's note about re-created closures is not about it).
    assert "compilation #1" in page.inner_text(".inspect-detail-head")
    assert page.locator(".inspect-detail .inspect-reason-box").count() == 0
    assert "closure" not in page.inner_text(".inspect-fn[data-fn='grad(layer)']")

    memory = page.locator("[data-testid=inspect-memory]")
    rows = memory.locator("th[scope=row]").all_inner_texts()
    assert rows.index("arguments") < rows.index("outputs") < rows.index("temporaries") < rows.index("sum")
    assert rows[-1] == "peak (XLA)"
    note = page.inner_text("[data-testid=inspect-peak-note]")
    assert note.startswith("sum = arguments + outputs + temporaries − aliased.") and "at most the sum" in note

    # The toolbar names its diff choice; the passes button is only that.
    page.locator(".inspect-fn[data-fn=layer] .inspect-compile").first.click()
    label = page.locator(".inspect-compare-label")
    assert label.inner_text().startswith("Diff with") and page.inner_text("[data-testid=inspect-passes]") == "XLA passes"
    page.select_option("[data-testid=inspect-compare]", label="#2")
    page.wait_for_selector("[data-testid=inspect-diff] .cm-mergeView")


def test_pointing_at_ir_lights_up_the_source_line_and_names_jump_to_it(page_at: PageAt) -> None:
    page = page_at("/")
    run(page, TWO_FUNCTIONS)
    open_inspect(page)
    line = page.locator("[data-testid=inspect-code] .cm-line", has_text="sin").first
    line.hover()
    hovered = page.locator(".cm-editor .cm-mark-line-hover")
    hovered.wait_for()
    assert hovered.count() == 1 and "jnp.sin(x) * 2" in hovered.inner_text()
    page.mouse.move(5, 5)
    page.wait_for_function("() => !document.querySelector('.cm-mark-line-hover')")

    page.locator(".inspect-fn[data-fn=total] .inspect-fn-head .inspect-fn-name").click()
    cursor_line = page.evaluate(
        "() => { const v = window.jaxplay.editor.view; return v.state.doc.lineAt(v.state.selection.main.head).number; }"
    )
    assert cursor_line == 9  # def total


def test_search_copy_and_wrap_work_on_the_artifact(page_at: PageAt) -> None:
    page = page_at("/")
    run(page, TWO_FUNCTIONS)
    open_inspect(page)
    page.click(".inspect-toolbar button:has-text('Search')")
    page.wait_for_selector("[data-testid=inspect-code] .cm-search input[name=search]")
    page.fill("[data-testid=inspect-code] .cm-search input[name=search]", "sin")
    page.keyboard.press("Enter")
    page.wait_for_selector("[data-testid=inspect-code] .cm-searchMatch")
    page.click(".inspect-toolbar .inspect-option input")
    assert page.locator("[data-testid=inspect-code] .cm-lineWrapping").count() == 1


def test_timeit_draws_a_chart_of_its_runs(page_at: PageAt) -> None:
    page = page_at("/")
    run(page, """import jax.numpy as jnp
from playground import timeit
x = jnp.ones((32, 32))
timeit(lambda: x @ x, repeat=6, min_run_s=0.01)
""")
    page.click("#tab-inspect")
    chart = page.locator("[data-testid=inspect-timing] svg.inspect-timing-chart")
    chart.wait_for()
    assert chart.locator("circle").count() == 6
    assert "median" in page.inner_text("[data-testid=inspect-timing]")


def test_turning_inspection_off_skips_the_capture(page_at: PageAt) -> None:
    page = page_at("/")
    page.click("#tab-inspect")
    page.uncheck("[data-testid=inspect-toggle]")
    run(page, TWO_FUNCTIONS)
    assert page.locator(".inspect-compile").count() == 0
    assert "off for this run" in page.inner_text("[data-testid=inspect-list]")


def test_a_gallery_example_loads_into_the_editor_and_its_compilations_show(page_at: PageAt) -> None:
    page = page_at("/")
    page.click("#tab-gallery")
    cards = page.locator(".gallery-card")
    assert cards.count() >= 9
    page.click("[data-testid=gallery-open-02_static_arguments]")
    code = page.evaluate("() => window.jaxplay.editor.getCode()")
    assert code.startswith("# Static arguments") and "static_argnames" in code
    page.click("[data-testid=run]")
    assert wait_for_status(page, "ok", "error", timeout_ms=90_000) == "ok", output_text(page)
    open_inspect(page)
    assert page.locator(".inspect-fn[data-fn=taylor_exp] .inspect-compile").count() == 3
    assert "static argument order: now 4 and before 2" in page.inner_text("[data-testid=inspect-list]")


def test_a_long_artifact_stays_responsive(page_at: PageAt) -> None:
    page = page_at("/")
    run(page, """import jax
import jax.numpy as jnp

@jax.jit
def long_chain(x):
    for i in range(1500):
        x = jnp.sin(x) * (1 + i % 7)
    return x

long_chain(jnp.ones(4))
""")
    open_inspect(page)
    started = time.perf_counter()
    page.click(".inspect-artifact-tab[data-artifact=stablehlo]")
    page.wait_for_function("() => document.querySelector('[data-testid=inspect-code]').dataset.dialect === 'stablehlo'")
    page.locator("[data-testid=inspect-code] .cm-scroller").evaluate("s => { s.scrollTop = s.scrollHeight; }")
    page.wait_for_selector("[data-testid=inspect-code] .cm-line:has-text('return')")
    elapsed = time.perf_counter() - started
    last_line_number = int(page.locator("[data-testid=inspect-code] .cm-lineNumbers .cm-gutterElement").last.inner_text())
    # Thousands of lines, but only those in view are in the DOM, and switching and scrolling are quick.
    assert last_line_number > 3000
    assert page.locator("[data-testid=inspect-code] .cm-line").count() < 400
    assert elapsed < 15.0  # a DOM of every line takes minutes; generous on a shared host


CALLS = """import jax
import jax.numpy as jnp

@jax.jit
def each_new(x):
    return x * 2

@jax.jit
def mixed(x):
    return x + 1

for n in (3, 4, 5):
    each_new(jnp.ones(n))
for n in (3, 4, 5, 5):
    mixed(jnp.ones(n))
"""


def test_call_statistics_say_which_calls_are_counted_and_timed(page_at: PageAt) -> None:
    page = page_at("/")
    run(page, CALLS)
    open_inspect(page)
    each_new = page.locator(".inspect-fn[data-fn=each_new] [data-testid=inspect-fn-stats]")
    mixed = page.locator(".inspect-fn[data-fn=mixed] [data-testid=inspect-fn-stats]")
    # Three calls that each compiled have no cached time to show: no "total 0.00 ns".
    assert each_new.inner_text() == "3 calls, each compiled: timed below"
    text = mixed.inner_text()
    assert re.fullmatch(r"4 calls \(3 compiled, 1 cached\) · median \S+ \S+, total \S+ \S+ of the cached calls", text), text
    assert "compiled" in mixed.get_attribute("title") and "cached calls" in mixed.get_attribute("title")


def test_a_long_signature_keeps_the_compile_row_readable(page_at: PageAt) -> None:
    source = (Path(__file__).resolve().parents[2] / "frontend/src/examples/gallery/10_flax_nnx_mlp.py").read_text()
    for width in (1440, 390):
        page = page_at("/", viewport={"width": width, "height": 900})
        run(page, source)
        open_inspect(page)
        row = page.locator(".inspect-fn[data-fn=train_step] .inspect-compile").first
        outputs = row.locator(".inspect-outputs")
        line_height = outputs.evaluate("e => parseFloat(getComputedStyle(e).lineHeight) || 18")
        # The output types keep a line of their own width, not a column of single characters.
        assert outputs.bounding_box()["height"] < 1.6 * line_height and outputs.bounding_box()["width"] > 40
        signature = row.locator(".inspect-signature")
        collapsed = signature.bounding_box()["height"]
        assert collapsed <= 3.5 * line_height, (width, collapsed)
        toggle = page.locator(".inspect-compile-item [data-testid=inspect-signature-toggle]").first
        toggle.click()
        assert signature.bounding_box()["height"] > 1.5 * collapsed and "… 6 more" in signature.inner_text()
        toggle.click()
        assert signature.bounding_box()["height"] == collapsed
        # The selected compilation's heading starts cut to a few lines too.
        head = page.locator(".inspect-detail-head .inspect-signature")
        assert head.bounding_box()["height"] <= 3.5 * line_height
