"""Inspect's panes side by side and its memory view, in Chromium on the real server, worker and sandbox,
at a laptop's width (1440 px) and a phone's (390 px).

Panes: three at once with each source line's colour in every pane and in the editor, pointing at a line
outlining its match everywhere, a selection the other panes scroll to, the arrangement in the address,
in a shared link and in an embed. Memory: the chart, the peak and what is alive there, totals equal to
memory_analysis(), links to the HLO instruction and the source line, and an out-of-memory error that
leads to the view of the function that ran out.
"""

from __future__ import annotations

import re

import pytest
from playwright.sync_api import Page, expect

from tests.browser.helpers import PageAt, output_text, replace_code, wait_for_status
from tests.browser.test_accessibility_browser import blocking_violations

pytestmark = [pytest.mark.live, pytest.mark.browser]

WIDE = {"width": 1440, "height": 900}
PHONE = {"width": 390, "height": 844}
SIZES = pytest.mark.parametrize("viewport", [WIDE, PHONE], ids=["1440", "390"])

# Line 9's equations come after line 8's hundred: the jaxpr pane must scroll to show them.
PROGRAM = """import jax
import jax.numpy as jnp

@jax.jit
def step(x):
    y = jnp.sin(x)
    for _ in range(40):
        y = y * 1.01 + jnp.cos(y)
    z = jnp.tanh(y)
    return z.sum(), z * 2

total, scaled = step(jnp.ones((64, 128)))
print(float(total))
"""
TANH_LINE = 9

# A step with temporaries: the gradient's intermediates live between the matmuls that use them.
TRAIN_STEP = """import jax
import jax.numpy as jnp

@jax.jit
def train_step(w, x):
    h = jnp.tanh(x @ w)
    loss = jnp.mean((h @ w.T - x) ** 2)
    grad = jax.grad(lambda w: jnp.mean(jnp.tanh(x @ w) ** 2))(w)
    return loss, w - 0.1 * grad

loss, w = train_step(jnp.ones((256, 256)), jnp.ones((128, 256)))
print(float(loss))
"""

OUT_OF_MEMORY = """import jax
import jax.numpy as jnp

@jax.jit
def outer_square(x):
    y = jnp.outer(x, x)
    return jnp.sum(jnp.sin(y) * y)

print(outer_square(jnp.ones((1 << 19,))))
"""


def run(page: Page, code: str, expected: str = "ok") -> None:
    replace_code(page, code)
    page.click("[data-testid=run]")
    assert wait_for_status(page, "ok", "error", timeout_ms=120_000) == expected, output_text(page)


def open_inspect(page: Page, narrow: bool) -> None:
    if narrow and page.get_attribute("[data-testid=results-enlarge]", "aria-pressed") != "true":
        page.click("[data-testid=results-enlarge]")  # a phone reads Inspect with the results enlarged
    page.click("#tab-inspect")
    page.wait_for_selector(".inspect-compile")


def pane(page: Page, kind: str) -> str:
    return f".pane[data-kind={kind}]"


def hot_lines(page: Page, kind: str) -> list[str]:
    return page.locator(f"{pane(page, kind)} .cm-line[data-hot]").all_inner_texts()


def show_pane(page: Page, kind: str, narrow: bool) -> None:
    """On a phone one pane shows at a time: bring ``kind``'s forward."""
    if narrow:
        index = page.locator(".pane").evaluate_all(f"ps => ps.findIndex(p => p.dataset.kind === '{kind}')")
        page.locator("[data-testid=panes-switch]").nth(index).click()
    expect(page.locator(pane(page, kind))).to_be_visible()


@SIZES
def test_panes_show_each_source_line_in_one_colour_and_follow_a_selection(page_at: PageAt, viewport: dict) -> None:
    narrow = viewport is PHONE
    page = page_at("/", viewport=viewport)
    run(page, PROGRAM)
    open_inspect(page, narrow)
    page.click("[data-testid=inspect-view-panes]")
    page.wait_for_selector("[data-testid=panes] .cm-band")
    assert page.locator(".pane").evaluate_all("ps => ps.map(p => p.dataset.kind)") == ["source", "jaxpr", "hlo"]
    assert re.search(r"[?&]panes=source,jaxpr,hlo\b", page.url), page.url

    visible = [page.locator(pane(page, k)).is_visible() for k in ("source", "jaxpr", "hlo")]
    if narrow:
        assert visible == [True, False, False]  # one at a time; the buttons above switch
    else:
        boxes = [page.locator(pane(page, k)).bounding_box() for k in ("source", "jaxpr", "hlo")]
        assert all(visible) and boxes[0]["x"] < boxes[1]["x"] < boxes[2]["x"] and len({round(b["y"]) for b in boxes}) == 1

    # Colours stay on: each source line the IR came from has its band, in the source pane and the editor.
    source_bands = page.locator(f"{pane(page, 'source')} .cm-line.cm-band")
    assert source_bands.count() >= 4
    colours = source_bands.evaluate_all("ls => [...new Set(ls.map(l => getComputedStyle(l).backgroundColor))]")
    assert len(colours) >= 4
    editor_bands = page.locator("[data-testid=editor] .cm-line.cm-band")
    assert editor_bands.count() == source_bands.count()
    band_of = "l => l.dataset.band"
    tanh_in_source = page.locator(f"{pane(page, 'source')} .cm-line", has_text="z = jnp.tanh(y)")
    assert tanh_in_source.evaluate(band_of) == page.locator("[data-testid=editor] .cm-line", has_text="z = jnp.tanh(y)").evaluate(band_of)

    if not narrow:
        # Pointing at an IR line outlines its source line in the source pane and the editor, in its colour.
        first_equation = page.locator(f"{pane(page, 'jaxpr')} .cm-line.cm-band", has_text=" cos ").first  # line 8
        first_equation.hover()
        hot_source = page.locator(f"{pane(page, 'source')} .cm-line[data-hot]")
        expect(hot_source).to_have_count(1)
        assert hot_source.evaluate(band_of) == first_equation.evaluate(band_of)
        expect(page.locator("[data-testid=editor] .cm-mark-line-hover")).to_have_text(hot_source.inner_text())
        # ...and every line compiled from that source line in the panes, not only the one pointed at.
        assert len(hot_lines(page, "jaxpr")) > 1
    # Selecting it (a click) scrolls the jaxpr pane to the tanh, far below its first screen.
    tanh_in_source.click()
    show_pane(page, "jaxpr", narrow)
    tanh = page.locator(f"{pane(page, 'jaxpr')} .cm-line[data-hot]", has_text="tanh")
    expect(tanh).to_be_visible()
    scrolled = page.locator(f"{pane(page, 'jaxpr')} .cm-scroller").evaluate("s => s.scrollTop")
    assert scrolled > 200
    band = tanh_in_source.evaluate(band_of)
    assert tanh.first.evaluate(band_of) == band  # the same colour as its source line
    if not narrow:
        # Pointing at an IR line lights its source line in the editor too.
        page.locator(f"{pane(page, 'jaxpr')} .cm-line[data-hot]", has_text="tanh").first.hover()
        expect(page.locator("[data-testid=editor] .cm-mark-line-hover", has_text="z = jnp.tanh(y)")).to_be_visible()


@SIZES
def test_the_arrangement_is_in_the_address_a_shared_link_and_an_embed(page_at: PageAt, base_url: str, viewport: dict) -> None:
    narrow = viewport is PHONE
    page = page_at("/", viewport=viewport)
    page.context.grant_permissions(["clipboard-read", "clipboard-write"])
    run(page, PROGRAM + f"# {viewport['width']}\n")
    open_inspect(page, narrow)
    page.click("[data-testid=inspect-view-panes]")
    page.locator("[data-testid=pane-kind]").first.select_option("stablehlo")
    expect(page.locator(".pane").first).to_have_attribute("data-kind", "stablehlo")
    assert "panes=stablehlo,jaxpr,hlo" in page.url

    page.keyboard.press("ControlOrMeta+s")
    page.wait_for_selector("[data-testid=share-copied][data-copied=true]")
    snippet_id = re.search(r"/s/([a-z2-7]+)", page.input_value("[data-testid=share-url]")).group(1)

    # The link keeps the panes: its page shows the recorded run in them.
    shared = page_at(f"/s/{snippet_id}", viewport=viewport)
    open_inspect(shared, narrow)
    shared.wait_for_selector("[data-testid=panes] .cm-band")
    assert shared.locator(".pane").evaluate_all("ps => ps.map(p => p.dataset.kind)") == ["stablehlo", "jaxpr", "hlo"]

    # An embed opens on the panes its address names.
    embed = page_at(f"/e/{snippet_id}?view=inspect&panes=source,hlo", viewport=viewport)
    expect(embed.locator("#tab-inspect")).to_have_attribute("aria-selected", "true")
    embed.wait_for_selector("[data-testid=panes] .cm-band")
    assert embed.locator(".pane").evaluate_all("ps => ps.map(p => p.dataset.kind)") == ["source", "hlo"]
    expect(embed.locator("[data-testid=inspect-view-panes]")).to_have_attribute("aria-selected", "true")


@SIZES
def test_the_memory_view_charts_the_peak_and_links_to_the_hlo_and_the_source(page_at: PageAt, viewport: dict) -> None:
    narrow = viewport is PHONE
    page = page_at("/", viewport=viewport)
    run(page, TRAIN_STEP)
    open_inspect(page, narrow)
    page.click("[data-testid=inspect-view-memory]")
    chart = page.locator("[data-testid=memory-chart]")
    expect(chart).to_be_visible()
    assert chart.locator("path.memory-area").count() >= 3  # arguments, outputs, temporaries
    summary = page.inner_text("[data-testid=memory-summary]")
    assert re.fullmatch(r"Peak [\d.]+ (B|KiB|MiB) at position \d+ of \d+, while \S+ runs \(line \d+\)\.", summary), summary
    expect(page.locator("[data-testid=memory-agreement] [data-agrees=true]")).to_be_visible()
    rows = page.locator("[data-testid=memory-peak-table] tbody tr")
    assert set(rows.evaluate_all("rs => rs.map(r => r.dataset.kind)")) == {"argument", "output", "temp"}

    # The chart says what is alive where the pointer is.
    chart.scroll_into_view_if_needed()
    box = chart.bounding_box()
    page.mouse.move(box["x"] + 2, box["y"] + box["height"] / 2)
    assert page.inner_text("[data-testid=memory-readout]").startswith("Position 1 of ")

    # A temporary's maker opens the optimized HLO on its line; its source link goes to the program's line.
    temp = rows.locator("xpath=self::tr[@data-kind='temp']").first
    name = temp.locator("[data-testid=memory-hlo-link]").inner_text()
    line = int(temp.locator("[data-testid=memory-source-link]").inner_text().removeprefix("line "))
    temp.locator("[data-testid=memory-hlo-link]").click()
    expect(page.locator(".inspect-artifact-tab[data-artifact=hlo]")).to_have_attribute("aria-selected", "true")
    expect(page.locator("[data-testid=inspect-code] .cm-activeLine")).to_contain_text(f"%{name} = ")
    page.click("[data-testid=inspect-view-memory]")
    if narrow:
        page.click("[data-testid=results-enlarge]")  # the editor comes back
    temp.locator("[data-testid=memory-source-link]").click()
    code_line = TRAIN_STEP.splitlines()[line - 1].strip()
    expect(page.locator("[data-testid=editor] .cm-activeLine")).to_contain_text(code_line)


@SIZES
def test_an_out_of_memory_error_leads_to_the_memory_view_of_the_function_that_ran_out(page_at: PageAt, viewport: dict) -> None:
    narrow = viewport is PHONE
    page = page_at("/", viewport=viewport)
    run(page, OUT_OF_MEMORY, expected="error")
    hint = page.locator("[data-testid=hint-memory]")
    expect(hint).to_contain_text("outer_square (line 5) ran out of memory: its peak is ")
    peak = re.search(r"its peak is ([\d.]+ \w+)", hint.inner_text()).group(1)
    if narrow:
        page.click("[data-testid=results-enlarge]")
    page.click("[data-testid=hint-memory-open]")
    expect(page.locator("#tab-inspect")).to_have_attribute("aria-selected", "true")
    expect(page.locator("[data-testid=inspect-view-memory]")).to_have_attribute("aria-selected", "true")
    expect(page.locator("[data-testid=memory-peak]")).to_have_text(peak)
    expect(page.locator(".inspect-detail-head .inspect-fn-name")).to_have_text("outer_square")


@pytest.mark.parametrize("scheme", ["light", "dark"])
def test_panes_and_memory_views_pass_axe_in_both_colour_schemes(page_at: PageAt, scheme: str) -> None:
    page = page_at("/", color_scheme=scheme, viewport=WIDE)
    run(page, PROGRAM)
    open_inspect(page, narrow=False)
    page.click("[data-testid=inspect-view-panes]")
    page.wait_for_selector("[data-testid=panes] .cm-band")
    page.locator(f"{pane(page, 'source')} .cm-line", has_text="z = jnp.tanh(y)").click()  # hot lines too
    page.wait_for_timeout(300)
    assert blocking_violations(page, "#panel-inspect") == []
    assert blocking_violations(page, "[data-testid=editor]") == []
    page.click("[data-testid=inspect-view-memory]")
    page.wait_for_selector("[data-testid=memory-chart]")
    page.wait_for_timeout(300)
    assert blocking_violations(page, "#panel-inspect") == []
