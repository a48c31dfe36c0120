"""The Sharding tab in Chromium, with the real server, worker and sandbox behind it."""

from __future__ import annotations

from pathlib import Path

import pytest
from playwright.sync_api import Locator, Page

from tests.browser.helpers import PageAt, run_ok

pytestmark = [pytest.mark.live, pytest.mark.browser]

GALLERY = Path(__file__).resolve().parents[2] / "frontend" / "src" / "examples" / "gallery"
ARRAY = "[data-testid=sharding-array]"
TOOLTIP = "[data-testid=sharding-tooltip]"


def run_and_open_sharding(page: Page, code: str) -> None:
    run_ok(page, code)
    page.click("#tab-sharding")


def card(page: Page, name: str) -> Locator:
    return page.locator(f"{ARRAY}[data-name='{name}']")


def block_fills(block: Locator) -> list[str]:
    return block.evaluate("g => [...g.querySelectorAll('rect')].map(r => getComputedStyle(r).fill)")


def test_model_parallel_example_draws_eight_device_blocks(page_at: PageAt) -> None:
    page = page_at("/")
    run_and_open_sharding(page, (GALLERY / "sharding_2_model_parallel_matmul.py").read_text())
    assert page.locator("#tab-sharding .tab-badge").inner_text() == "6"  # 4 arrays + 2 functions

    h = card(page, "h")
    assert "P('x', 'y')" in h.inner_text() and "float32[8@x,32@y]" in h.inner_text()
    blocks = h.locator("[data-testid=sharding-grid] .sharding-block")
    assert blocks.count() == 8
    assert [blocks.nth(i).text_content() for i in range(8)] == [str(d) for d in range(8)]
    assert [blocks.nth(i).get_attribute("data-devices") for i in range(8)] == [str(d) for d in range(8)]
    colours = {block_fills(blocks.nth(i))[0] for i in range(8)}
    assert len(colours) == 8, colours  # one colour per device

    # Hovering device 5's block: the tooltip names it with its index range and bytes,
    # and the other devices' blocks step back.
    blocks.nth(5).hover()
    tooltip = page.locator(TOOLTIP)
    assert tooltip.is_visible()
    text = tooltip.inner_text()
    assert "CPU 5" in text and "[4:8, 8:16]" in text and "128 B" in text
    assert h.locator(".sharding-block.is-hl").count() == 1
    assert h.locator(".sharding-mesh-cell.is-hl").text_content() == "5"

    # Hovering device 3 in the mesh highlights its block.
    h.locator(".sharding-mesh-cell[data-devices='3']").hover()
    assert h.locator(".sharding-block.is-hl").get_attribute("data-devices") == "3"
    assert "mesh position x=0, y=3" in tooltip.inner_text()

    # x is split over "x" only: 2 blocks, each held by the 4 devices of a mesh row.
    x_blocks = card(page, "x").locator("[data-testid=sharding-grid] .sharding-block")
    assert [x_blocks.nth(i).get_attribute("data-devices") for i in range(2)] == ["0 1 2 3", "4 5 6 7"]
    assert x_blocks.nth(0).text_content() == "0,1,2,3 ×4"
    x_blocks.nth(1).hover()
    assert "replicated ×4" in tooltip.inner_text() and "[4:8, 0:16]" in tooltip.inner_text()

    # The second layer's card lists the all-reduce XLA inserted.
    layer2 = page.locator("[data-testid=sharding-fn][data-fn=layer2]")
    assert layer2.locator(".sharding-chip.is-on[data-op=all-reduce]").inner_text().split() == ["all-reduce", "1"]
    assert layer2.locator("tr[data-name=h]").count() == 1 and layer2.locator("tr[data-name=out]").count() == 1


def test_a_three_dimensional_array_shows_a_chosen_slice(page_at: PageAt) -> None:
    page = page_at("/")
    run_and_open_sharding(page, """
import jax, jax.numpy as jnp
from jax.sharding import NamedSharding, PartitionSpec as P
from playground import show_sharding
mesh = jax.make_mesh((2, 2, 2), ("a", "b", "c"))
show_sharding(jax.device_put(jnp.zeros((4, 6, 8)), NamedSharding(mesh, P("a", "b", "c"))), name="t")
""")
    t = card(page, "t")
    grid_blocks = t.locator("[data-testid=sharding-grid] .sharding-block")
    # By default the view shows dims 1 and 2 (the last split dims) at the first block of dim 0.
    assert t.locator("select[data-role=rows]").input_value() == "1"
    assert t.locator("select[data-role=cols]").input_value() == "2"
    assert sorted(grid_blocks.nth(i).get_attribute("data-devices") for i in range(4)) == ["0", "1", "2", "3"]
    t.locator("select[data-role=dim-0]").select_option("1")  # the second block along dim 0
    assert sorted(grid_blocks.nth(i).get_attribute("data-devices") for i in range(4)) == ["4", "5", "6", "7"]
    t.locator("select[data-role=rows]").select_option("0")  # rows: dim 0, cols: dim 2, slice of dim 1
    assert t.locator("[data-role=dim-1]").count() == 1
    assert sorted(grid_blocks.nth(i).get_attribute("data-devices") for i in range(4)) == ["0", "1", "4", "5"]
    grid_blocks.first.hover()
    assert "[0:2, 0:3, 0:4]" in page.locator(TOOLTIP).inner_text()


def test_legend_and_empty_state(page_at: PageAt) -> None:
    page = page_at("/")
    run_and_open_sharding(page, "print('no arrays')")
    assert "visualize_array_sharding" in page.locator("[data-testid=sharding-panel]").inner_text()
    assert page.locator("[data-testid=sharding-legend]").is_hidden()

    run_and_open_sharding(page, """
import jax, jax.numpy as jnp
from jax.sharding import NamedSharding, PartitionSpec as P
mesh = jax.make_mesh((4,), ("d",), devices=jax.devices()[4:])
jax.debug.visualize_array_sharding(jax.device_put(jnp.zeros(8), NamedSharding(mesh, P("d"))))
""")
    legend = page.locator("[data-testid=sharding-legend] .sharding-legend-chip")
    assert [legend.nth(i).inner_text() for i in range(legend.count())] == ["4", "5", "6", "7"]
    legend.nth(2).hover()
    assert page.locator(f"{ARRAY} .sharding-block.is-hl").get_attribute("data-devices") == "6"


def test_on_a_phone_the_colour_key_shows_and_the_pictures_stay_in_their_cards(page_at: PageAt) -> None:
    page = page_at("/", viewport={"width": 390, "height": 844})
    run_and_open_sharding(page, (GALLERY / "sharding_2_model_parallel_matmul.py").read_text())
    chips = page.locator("[data-testid=sharding-legend] .sharding-legend-chip")
    assert chips.count() == 8
    for i in range(8):
        box = chips.nth(i).bounding_box()
        assert box and box["width"] > 10 and 0 <= box["x"] and box["x"] + box["width"] <= 390, (i, box)
    # Drawn where they are, not cut away by a key squeezed to no width.
    seen = chips.evaluate_all("cs => cs.filter(c => { const r = c.getBoundingClientRect();"
                              " return c.contains(document.elementFromPoint(r.x + r.width / 2, r.y + r.height / 2)); }).length")
    assert seen == 8
    for array in page.locator(ARRAY).all():
        edge = array.bounding_box()
        for picture in array.locator("svg.sharding-grid, svg.sharding-mesh-grid").all():
            box = picture.bounding_box()
            assert box["x"] >= edge["x"] and box["x"] + box["width"] <= edge["x"] + edge["width"] + 0.5, (box, edge)
    assert page.evaluate("document.documentElement.scrollWidth") <= 390
