"""Displayed values in the page: results, figures, explorable pytrees, and the
sandboxed frame that keeps a run's HTML away from the page; real server,
worker and sandbox behind the page."""

from __future__ import annotations

import json
import time

import pytest
from playwright.sync_api import Page

from tests.browser.helpers import PageAt, output_text, replace_code, run_ok, wait_for_status

pytestmark = [pytest.mark.live, pytest.mark.browser]

FRAME = "[data-testid=display-frame]"
IMAGE = "[data-testid=display-image]"


def frame_height(page: Page, index: int = 0) -> int:
    return int(page.locator(FRAME).nth(index).evaluate("f => parseFloat(f.style.height)"))


def wait_for_frame_sized(page: Page, index: int = 0) -> int:
    """The frame reports its content height once treescope has built its view."""
    page.wait_for_function(
        "([sel, i]) => { const f = document.querySelectorAll(sel)[i]; return f && f.srcdoc && parseFloat(f.style.height) !== 48; }",
        arg=[FRAME, index],
    )
    return frame_height(page, index)


def test_the_last_expression_shows_its_value_after_the_output(page_at: PageAt) -> None:
    page = page_at("/")
    run_ok(page, 'print("printed first")\n6 * 7\n')
    result = page.locator(".output-display[data-role=result]")
    assert result.count() == 1
    assert result.inner_text().split() == ["RESULT", "42"] or result.inner_text().split()[-1] == "42"
    text = output_text(page)
    assert text.index("printed first") < text.index("42")

    run_ok(page, "x = 1\nNone\n")
    assert page.locator(".output-display").count() == 0


def test_a_result_frame_starts_loading_the_moment_it_is_placed_and_later_ones_when_near_the_view(
        page_at: PageAt) -> None:
    """A result's treescope frame used to wait for the Output's next animation frame and then an
    IntersectionObserver round before its document started, with "drawing..." meanwhile. The first
    frames on the page now carry their document from the start; past those, frames fill near the view."""
    page = page_at("/")
    page.evaluate("""() => {
        window.placedWithoutDocument = [];
        new MutationObserver((records) => {
          for (const record of records) for (const node of record.addedNodes) {
            const frames = node.matches?.('iframe.display-frame') ? [node] : [...(node.querySelectorAll?.('iframe.display-frame') ?? [])];
            for (const frame of frames) if (!frame.hasAttribute('srcdoc')) window.placedWithoutDocument.push(frame.dataset.fill);
          }
        }).observe(document.body, { subtree: true, childList: true });
    }""")
    # Lines first; once they are shown the reader scrolls back to the top, so the Output stops following
    # the end, and the seven values arrive far below the view. (Placed at a followed end instead, a
    # value is legitimately in view for the frames until more lines arrive.)
    replace_code(page, "import time\nimport jax.numpy as jnp\nfrom playground import display\n"
                       "print('\\n' * 600)\ntime.sleep(4)\n"
                       "for i in range(7):\n    display(jnp.arange(4.0) + i)\n")
    page.click("[data-testid=run]")
    page.wait_for_function("() => document.querySelector('[data-testid=output-log]').scrollHeight > 5000")
    page.evaluate("() => { const log = document.querySelector('[data-testid=output-log]'); log.scrollTop = 0; }")
    assert wait_for_status(page, "ok", "error") == "ok", output_text(page)
    frames = page.locator(FRAME)
    assert frames.count() == 7
    modes = frames.evaluate_all("fs => fs.map(f => f.dataset.fill)")
    assert modes[:4] == ["at-once"] * 4 and set(modes[4:]) == {"when-visible"}, modes
    # Placed with their documents already set: no frame of the first four waited for one.
    assert page.evaluate("window.placedWithoutDocument").count("at-once") == 0
    assert wait_for_frame_sized(page, 0) > 0
    # The later ones, far from the view, wait until they come near it.
    assert page.evaluate("() => document.querySelector('[data-testid=output-log]').scrollTop") == 0
    far = frames.nth(6)
    assert far.evaluate("f => f.hasAttribute('srcdoc')") is False
    far.scroll_into_view_if_needed()
    page.wait_for_function("f => f.hasAttribute('srcdoc')", arg=far.element_handle())


def test_a_figure_shows_an_image_of_the_right_size(page_at: PageAt) -> None:
    page = page_at("/")
    run_ok(page, """
import matplotlib.pyplot as plt
plt.figure(figsize=(4, 3), dpi=100)
plt.plot([1, 3, 2])
plt.show()
print("after the figure")
""")
    image = page.locator(IMAGE)
    assert image.count() == 1
    page.wait_for_function("(sel) => document.querySelector(sel).complete", arg=IMAGE)
    size = image.evaluate(
        "img => ({w: img.getBoundingClientRect().width, h: img.getBoundingClientRect().height,"
        " nw: img.naturalWidth, nh: img.naturalHeight})"
    )
    # A 4x3 inch figure at 100 dpi, margins trimmed: just under 400x300 CSS pixels,
    # drawn at twice that for high-density screens.
    assert 300 < size["w"] <= 400 and 200 < size["h"] <= 300, size
    assert abs(size["nw"] - 2 * size["w"]) <= 2 and abs(size["nh"] - 2 * size["h"]) <= 2, size
    assert page.locator(".output-display[data-role=figure]").count() == 1
    # The figure sits where plt.show() ran: before the text printed after it.
    order = page.evaluate(
        """() => [...document.querySelector('[data-testid=output-log]').children]
              .map(n => n.matches('.output-display') ? 'figure' : n.innerText.trim())"""
    )
    assert order == ["figure", "after the figure"]


def test_a_pytree_shows_an_expandable_view_with_a_heatmap(page_at: PageAt) -> None:
    page = page_at("/")
    run_ok(page, """
import jax, jax.numpy as jnp
params = {"dense": {"w": jax.random.normal(jax.random.key(0), (8, 16)), "b": jnp.zeros(16)},
          "steps": list(range(40))}
params
""")
    assert page.locator(".output-display[data-role=result] " + FRAME).count() == 1
    collapsed_height = wait_for_frame_sized(page)
    view = page.frame_locator(FRAME)
    # Shape, dtype and statistics of each array are in the summary line.
    summary = view.locator(".treescope_root").inner_text()
    assert "float32(8, 16)" in summary and "zero:16" in summary
    heatmaps = view.locator(".arrayviz_container >> visible=true")
    shown = heatmaps.count()  # treescope unfolds what fits: here the 8x16 'w'
    # Unfold the folded 16-element 'b': its heat-map appears and the frame grows to fit it.
    folded_b = view.locator(".foldable_node:has(> label > .foldable_node_toggle:not(:checked))", has_text="float32(16,)")
    folded_b.locator("> label").first.click()
    page.wait_for_function(
        "([sel, h]) => parseFloat(document.querySelector(sel).style.height) > h + 20", arg=[FRAME, collapsed_height]
    )
    assert heatmaps.count() == shown + 1


PROBE_HTML = """
<div id="probe">probe</div>
<script>
const results = {};
function attempt(name, fn) {
  try { results[name] = "reached: " + String(fn()).slice(0, 80); }
  catch (e) { results[name] = "blocked: " + e.name; }
}
attempt("read parent body", () => parent.document.body.innerHTML);
attempt("write parent body", () => { parent.document.body.innerHTML = "pwned"; return "written"; });
attempt("parent location", () => parent.location.href);
attempt("top location", () => top.location.href);
attempt("frame cookie", () => document.cookie);
attempt("parent cookie", () => parent.document.cookie);
attempt("parent app and its websocket", () => parent.jaxplay);
attempt("parent storage", () => parent.localStorage.length);
attempt("navigate the page", () => { top.location = "about:blank#pwned"; return "navigated"; });
const pending = [
  new Promise((done) => {
    try {
      const ws = new WebSocket(WS_URL);
      ws.onopen = () => {
        ws.send(JSON.stringify({type: "run", id: "from-frame", code: "print('pwned')"}));
        results["new websocket"] = "reached: opened"; done();
      };
      ws.onerror = () => { results["new websocket"] = "blocked: error"; done(); };
    } catch (e) { results["new websocket"] = "blocked: " + e.name; done(); }
  }),
  fetch(HTTP_URL + "/healthz").then(
    () => { results["fetch"] = "reached: fetched"; },
    (e) => { results["fetch"] = "blocked: " + e.name; }),
];
Promise.all(pending).then(() => parent.postMessage({ probe: results }, "*"));
</script>
"""


@pytest.mark.attack("frame escape")
def test_a_script_in_user_html_cannot_reach_the_page(page_at: PageAt, base_url: str) -> None:
    page = page_at("/")
    page.evaluate("document.cookie = 'secret=page-cookie; path=/'")
    page.evaluate(
        "window.addEventListener('message', (e) => { if (e.data && e.data.probe) window.probe = e.data.probe; })"
    )
    sockets: list[str] = []
    page.on("websocket", lambda ws: sockets.append(ws.url))
    probe = PROBE_HTML.replace("WS_URL", json.dumps(base_url.replace("http", "ws", 1) + "/ws")).replace(
        "HTTP_URL", json.dumps(base_url)
    )
    run_ok(page, f"from playground import HTML, display\ndisplay(HTML({probe!r}))\n")
    page.wait_for_function("() => window.probe !== undefined", timeout=20_000)
    results = page.evaluate("window.probe")
    assert set(results) == {
        "read parent body", "write parent body", "parent location", "top location", "frame cookie",
        "parent cookie", "parent app and its websocket", "parent storage", "navigate the page",
        "new websocket", "fetch",
    }
    reached = {name: outcome for name, outcome in results.items() if not outcome.startswith("blocked")}
    assert reached == {}, results
    # The page is untouched: same URL, editor in place, no socket but its own, no run from the frame.
    assert page.url == base_url + "/"
    assert page.locator(".cm-content").count() == 1
    assert sockets == []
    assert "pwned" not in output_text(page)
    assert page.evaluate("document.cookie").startswith("secret=page-cookie")


@pytest.mark.attack("frame escape")
def test_only_a_frames_own_height_message_is_accepted_and_clamped(page_at: PageAt) -> None:
    page = page_at("/")
    run_ok(page, """
from playground import HTML, display
display(HTML("<p>first</p>"), HTML('''<p>second</p><script>
addEventListener("load", () => setTimeout(() => {
  parent.postMessage({ jaxplayFrameHeight: "900" }, "*");
  parent.postMessage({ jaxplayFrameHeight: 1e9 }, "*");
}, 300));
</script>'''))
""")
    wait_for_frame_sized(page, 0)
    first = frame_height(page, 0)
    assert 20 < first < 100
    # The second frame's 1e9 is clamped to the page's limit; its string is ignored.
    page.wait_for_function("(sel) => parseFloat(document.querySelectorAll(sel)[1].style.height) === 4000", arg=FRAME)
    # A message the page posts to itself is not from any frame: ignored.
    page.evaluate("window.postMessage({ jaxplayFrameHeight: 700 }, '*')")
    time.sleep(0.3)
    assert frame_height(page, 0) == first


def test_the_page_stays_responsive_with_20_figures_and_a_large_pytree(page_at: PageAt) -> None:
    page = page_at("/")
    page.evaluate(
        """window.longTasks = [];
        new PerformanceObserver((list) => {
          for (const entry of list.getEntries()) window.longTasks.push(entry.duration);
        }).observe({ type: "longtask" });"""
    )
    run_ok(page, """
import matplotlib.pyplot as plt
import numpy as np
import jax.numpy as jnp
for i in range(20):
    plt.figure(figsize=(6, 4))
    plt.plot(np.sin(np.linspace(0, 10, 500) + i))
    plt.show()
{f"layer{i}": {"w": jnp.full((4, 4), i, jnp.float32), "b": jnp.zeros(4)} for i in range(600)}
""")
    assert page.locator(IMAGE).count() == 20
    page.locator(FRAME).scroll_into_view_if_needed()
    wait_for_frame_sized(page)
    # The editor answers a keystroke at once while all of it is on the page.
    page.click(".cm-content")
    page.keyboard.press("ControlOrMeta+End")
    started = time.monotonic()
    page.keyboard.type("#")
    page.wait_for_function("() => window.jaxplay.editor.getCode().trimEnd().endsWith('#')")
    assert time.monotonic() - started < 5.0  # a blocked page takes tens of seconds; generous on a shared host
    longest = max(page.evaluate("window.longTasks"), default=0)
    assert longest < 1000, f"the main thread was blocked for {longest:.0f} ms"


LEAVE_THE_FRAME = """
<form id="f" action="TARGET/form" method="get"><input name="q" value="1"></form>
<a id="a" href="TARGET/anchor">x</a>
<script>
  const tries = [
    () => window.open("TARGET/open"),
    () => document.getElementById("f").submit(),
    () => document.getElementById("a").click(),
    () => { const m = document.createElement("meta"); m.httpEquiv = "refresh";
            m.content = "0;url=TARGET/refresh"; document.head.appendChild(m); },
    () => { location.href = "TARGET/location"; },
  ];
  tries.forEach((attempt, i) => setTimeout(() => { try { attempt(); } catch (e) {} }, 50 * i));
</script>
"""


@pytest.mark.attack("frame escape")
def test_user_html_cannot_navigate_its_frame_anywhere(page_at: PageAt) -> None:
    """location, a link, <meta refresh>, a form, window.open: none reaches the network or shows a foreign page."""
    import http.server
    import threading

    hits: list[str] = []

    class Tracker(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:  # noqa: N802 - the http.server API
            hits.append(self.path)
            self.send_response(200)
            self.end_headers()
            self.wfile.write(b"<h1>FOREIGN PAGE</h1>")

        def log_message(self, *args: object) -> None:
            pass

    tracker = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Tracker)
    threading.Thread(target=tracker.serve_forever, daemon=True).start()
    try:
        target = f"http://127.0.0.1:{tracker.server_address[1]}"
        page = page_at("/")
        html = LEAVE_THE_FRAME.replace("TARGET", target)
        run_ok(page, f"from playground import HTML, display\ndisplay(HTML({html!r}))\n")
        page.wait_for_selector(f"{FRAME}[srcdoc]")
        time.sleep(2.0)  # every attempt has fired
        assert hits == []
        frame_text = page.frame_locator(FRAME).locator("body").inner_text()
        assert "FOREIGN PAGE" not in frame_text
        assert page.url.endswith("/") and page.locator(".cm-content").count() == 1
    finally:
        tracker.shutdown()
