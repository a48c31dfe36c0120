"""The page at every size, in Chromium against the real server, worker and sandbox: embeds in frames from 320 to
1920 px wide and 300 px tall, the header at every window width, and the tab strip and popovers on a phone.

The server is served as ``make run`` serves it (with the JAX version picker in the header), since that picker
is what pushed Run out of an 800 px embed.
"""

from __future__ import annotations

import re
import uuid

import pytest
from playwright.sync_api import FrameLocator, Page, expect

from tests.browser.helpers import PageAt, replace_code, wait_for_status

pytestmark = [pytest.mark.live, pytest.mark.browser]

FRAME_WIDTHS = [320, 480, 800, 900, 1280, 1920]
FRAME_HEIGHTS = [300, 500]
PHONE = {"width": 390, "height": 844}


def share_program(page: Page, body: str) -> str:
    """Shares ``body`` (made unique) with its run; the snippet's id."""
    replace_code(page, f"# {uuid.uuid4().hex[:12]}\n{body}")
    page.click("[data-testid=run]")
    assert wait_for_status(page, "ok") == "ok"
    page.keyboard.press("ControlOrMeta+s")
    snippet = re.search(r"/s/([a-z2-7]+)$", page.input_value("[data-testid=share-url]")).group(1)
    page.keyboard.press("Escape")
    return snippet


def overflow_of(target: Page | FrameLocator) -> dict:
    """How the document fits its window: widths, and where Run and the tab list are."""
    script = """() => {
      const box = (selector) => {
        const e = document.querySelector(selector);
        if (!e) return null;
        const r = e.getBoundingClientRect();
        return { left: r.left, right: r.right, top: r.top, bottom: r.bottom };
      };
      const run = document.querySelector('[data-testid=run]').getBoundingClientRect();
      const hit = document.elementFromPoint(run.left + run.width / 2, run.top + run.height / 2);
      return {
        scrollWidth: document.documentElement.scrollWidth, clientWidth: document.documentElement.clientWidth,
        innerHeight: window.innerHeight, run: box('[data-testid=run]'), runHit: !!hit?.closest('[data-testid=run]'),
        tabs: box('.tab-list'), enlarge: box('[data-testid=results-enlarge]'),
        fit: document.querySelector('.topbar').dataset.fit,
      };
    }"""
    if isinstance(target, Page):
        return target.evaluate(script)
    return target.locator("html").evaluate(f"(_html) => ({script})()")


def assert_fits(state: dict, where: str) -> None:
    width, height = state["clientWidth"], state["innerHeight"]
    assert state["scrollWidth"] <= width, f"{where}: the page is {state['scrollWidth'] - width} px wider than its window"
    run = state["run"]
    assert 0 <= run["left"] and run["right"] <= width and 0 <= run["top"] and run["bottom"] <= height, (where, state)
    assert state["runHit"], f"{where}: something covers Run ({state})"
    tabs = state["tabs"]
    assert tabs["right"] <= width and tabs["bottom"] <= height and tabs["top"] >= 0, (where, state)
    enlarge = state["enlarge"]
    assert enlarge["right"] <= width and enlarge["bottom"] <= height, (where, state)


def test_an_embed_keeps_run_and_every_tab_in_frames_from_320_to_1920_px(page_with_versions_at: PageAt,
                                                                         versions_base_url: str) -> None:
    page = page_with_versions_at("/")
    snippet = share_program(page, "print('on a slide')\n")
    # The slides live on another origin (localhost is not 127.0.0.1), as they would on another site.
    host = page_with_versions_at("/", viewport={"width": 2000, "height": 1200})
    host.goto(versions_base_url.replace("127.0.0.1", "localhost") + "/healthz")
    for height in FRAME_HEIGHTS:
        for width in FRAME_WIDTHS:
            where = f"embed in a {width}x{height} frame"
            host.set_content(f"<iframe id=slide src='{versions_base_url}/e/{snippet}?view=inspect' "
                             f"style='border:0;width:{width}px;height:{height}px'></iframe>")
            frame = host.frame_locator("#slide")
            frame.locator(".conn[data-state=open]").wait_for()
            frame.locator("[data-testid=runtime] option").first.wait_for(state="attached")
            assert_fits(overflow_of(frame), where)
            # Every tab is reachable: the last one can be brought forward and is then in view.
            frame.locator("#tab-compare").click()
            last = frame.locator("#tab-compare").bounding_box()
            slide = host.locator("#slide").bounding_box()
            assert last["x"] >= slide["x"] and last["x"] + last["width"] <= slide["x"] + slide["width"] + 0.5, where
            frame.locator("#tab-output").click()
            # Run is not only visible but works (the result cache answers after the first).
            frame.locator("[data-testid=run]").click()
            frame.locator("[data-testid=status][data-status=ok]").wait_for(timeout=60_000)
            expect(frame.locator("[data-testid=output-log]"), where).to_contain_text("on a slide")


@pytest.mark.parametrize("path", ["/", "link"])
def test_the_header_fits_every_window_width(page_with_versions_at: PageAt, versions_base_url: str, path: str) -> None:
    page = page_with_versions_at("/")
    if path == "link":  # a link's page also shows the snippet's id in the header
        path = f"/s/{share_program(page, 'x = 1')}"
    for width in [320, 390, 600, 700, 761, 800, 900, 1000, 1100, 1280, 1440, 1920]:
        page.set_viewport_size({"width": width, "height": 700})
        page.goto(versions_base_url + path)
        page.wait_for_selector(".conn[data-state=open]")
        page.wait_for_selector("[data-testid=runtime] option", state="attached")
        state = overflow_of(page)
        assert_fits(state, f"{path} at {width} px")
        # Wide windows keep one row, with the shortcut on Run.
        if width >= 1440:
            assert state["fit"] == "wide", (width, state)
            expect(page.locator("[data-testid=run] kbd")).to_be_visible()


def test_on_a_phone_the_tab_strip_shows_it_scrolls_and_reaches_every_tab(page_at: PageAt) -> None:
    page = page_at("/", viewport=PHONE)
    more = page.locator("[data-testid=tabs-scroll-on]")
    expect(more).to_be_visible()
    expect(page.locator("[data-testid=tabs-scroll-back]")).to_be_hidden()
    # The enlarge button sits beside the strip, always on screen.
    enlarge = page.locator("[data-testid=results-enlarge]").bounding_box()
    assert enlarge["x"] >= 0 and enlarge["x"] + enlarge["width"] <= PHONE["width"]
    gallery = page.locator("#tab-gallery")
    strip = page.locator(".tab-list").bounding_box()
    assert gallery.bounding_box()["x"] > strip["x"] + strip["width"]  # off the strip before scrolling
    more.click()
    page.wait_for_function("document.querySelector('.tab-list').scrollLeft > 0")
    expect(page.locator("[data-testid=tabs-scroll-back]")).to_be_visible()
    # From the keyboard: End brings the last tab forward, scrolled clear of the chevrons.
    page.focus("#tab-output")
    page.keyboard.press("End")
    assert page.get_attribute("#tab-gallery", "aria-selected") == "true"
    page.wait_for_function("""() => {
      const tab = document.querySelector('#tab-gallery').getBoundingClientRect();
      const strip = document.querySelector('.tab-list').getBoundingClientRect();
      return tab.left >= strip.left && tab.right <= strip.right;
    }""")
    expect(more).to_be_hidden()  # nothing further on
    page.keyboard.press("Home")
    assert page.get_attribute("#tab-output", "aria-selected") == "true"
    assert page.evaluate("document.documentElement.scrollWidth") <= PHONE["width"]


def test_on_a_phone_the_room_popover_covers_no_header_control(page_at: PageAt) -> None:
    page = page_at("/", viewport=PHONE)
    page.wait_for_selector("[data-testid=backend] option[value=cpu]", state="attached")
    page.click("[data-testid=room-menu]")
    panel = page.locator("[data-testid=room-menu-panel]")
    expect(panel).to_be_visible()
    box = panel.bounding_box()
    header = page.locator("header.topbar").bounding_box()
    assert box["y"] >= header["y"] + header["height"], (box, header)
    assert box["x"] >= 0 and box["x"] + box["width"] <= PHONE["width"]
    # So Libraries can be reached with the popover open: a tap there opens it and closes the Room popover.
    libraries = page.locator("[data-testid=backend-libraries]").bounding_box()
    page.mouse.click(libraries["x"] + libraries["width"] / 2, libraries["y"] + libraries["height"] / 2)
    expect(page.locator("[data-testid=libraries-popover]")).to_be_visible()
    expect(panel).to_be_hidden()
    popover = page.locator("[data-testid=libraries-popover]").bounding_box()
    assert popover["y"] >= header["y"] + header["height"]
