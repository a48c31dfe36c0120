"""What loading the page costs a browser: bytes over the wire and time until Run works.

A real server (its real worker) and Debian's Chromium over loopback. Each round
opens the page in a fresh browser context (an empty cache: a first visit), then
again in the same context (a second visit), and counts with the DevTools protocol
what every HTTP request of the page transferred (``encodedDataLength``: headers and
body as sent, so compressed where compressed; 0 for what came from the cache).
The same first visit with ``Accept-Encoding: identity`` shows what compression saves.

Times, from the navigation's start: the HTML document's DOMContentLoaded (for this
page that includes fetching and running its module script, which the document
waits for) and ready to run (the page's ``jaxplay:ready-to-run`` mark: the socket
is open, so Run starts a run at once).

Targets (issue 37): a first visit transfers at most 350 KB, a second at most 10 KB,
and ready to run comes at most 1.5x as late as DOMContentLoaded.
Usage: python bench/page_load.py [--rounds 5]
"""

from __future__ import annotations

import argparse
import statistics
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from playwright.sync_api import BrowserContext, sync_playwright

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from tests.live_server import running_server  # noqa: E402

CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
                 "--disable-component-update", "--no-first-run"]
READY_MARK = "jaxplay:ready-to-run"
FIRST_LOAD_KB, SECOND_LOAD_KB, READY_RATIO = 350, 10, 1.5


@dataclass
class Visit:
    transferred: dict[str, int] = field(default_factory=dict)  # url -> bytes on the wire
    encodings: dict[str, str] = field(default_factory=dict)
    websocket_bytes: int = 0
    dcl_ms: float = 0.0
    ready_ms: float = 0.0

    @property
    def kb(self) -> float:
        return sum(self.transferred.values()) / 1000


def visit(context: BrowserContext, url: str, identity: bool = False) -> Visit:
    page = context.new_page()
    cdp = context.new_cdp_session(page)
    cdp.send("Network.enable")
    if identity:
        cdp.send("Network.setExtraHTTPHeaders", {"headers": {"Accept-Encoding": "identity"}})
    result = Visit()
    urls: dict[str, str] = {}

    def on_response(event: dict[str, Any]) -> None:
        urls[event["requestId"]] = event["response"]["url"]
        headers = {k.lower(): v for k, v in event["response"].get("headers", {}).items()}
        result.encodings[event["response"]["url"]] = headers.get("content-encoding", "")

    def on_finished(event: dict[str, Any]) -> None:
        url = urls.get(event["requestId"], event["requestId"])
        result.transferred[url] = result.transferred.get(url, 0) + int(event["encodedDataLength"])

    def on_frame(event: dict[str, Any]) -> None:
        result.websocket_bytes += len(event["response"].get("payloadData", ""))

    cdp.on("Network.responseReceived", on_response)
    cdp.on("Network.loadingFinished", on_finished)
    cdp.on("Network.webSocketFrameReceived", on_frame)
    page.goto(url)
    page.wait_for_function(f"performance.getEntriesByName('{READY_MARK}').length > 0", timeout=60_000)
    page.wait_for_load_state("networkidle")
    timing = page.evaluate(f"""() => {{
        const nav = performance.getEntriesByType('navigation')[0];
        return {{dcl: nav.domContentLoadedEventEnd, ready: performance.getEntriesByName('{READY_MARK}')[0].startTime}};
    }}""")
    result.dcl_ms, result.ready_ms = timing["dcl"], timing["ready"]
    page.close()
    return result


def median(values: list[float]) -> float:
    return statistics.median(values) if values else float("nan")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    firsts: list[Visit] = []
    seconds: list[Visit] = []
    plains: list[Visit] = []
    with running_server() as server, sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        url = server.http_url + "/"
        visit(browser.new_context(), url)  # warms the server's first page render and the OS's file cache
        for _ in range(args.rounds):
            context = browser.new_context()
            firsts.append(visit(context, url))
            seconds.append(visit(context, url))
            context.close()
            context = browser.new_context()
            plains.append(visit(context, url, identity=True))
            context.close()
        browser.close()

    first, second, plain = firsts[-1], seconds[-1], plains[-1]
    print(f"page load over loopback, Chromium, {args.rounds} rounds (medians; requests of the last round)")
    print(f"{'':34}{'measured':>12}{'target':>12}{'uncompressed':>16}")
    print(f"{'first visit, transferred':34}{median([v.kb for v in firsts]):>9.1f} KB{'<= ' + str(FIRST_LOAD_KB):>9} KB"
          f"{median([v.kb for v in plains]):>13.1f} KB")
    print(f"{'second visit, transferred':34}{median([v.kb for v in seconds]):>9.1f} KB{'<= ' + str(SECOND_LOAD_KB):>9} KB")
    dcl = median([v.dcl_ms for v in firsts])
    ready = median([v.ready_ms for v in firsts])
    print(f"{'first visit, DOMContentLoaded':34}{dcl:>9.0f} ms{'':12}{median([v.dcl_ms for v in plains]):>13.0f} ms")
    print(f"{'first visit, ready to run':34}{ready:>9.0f} ms{'':12}{median([v.ready_ms for v in plains]):>13.0f} ms")
    print(f"{'  ready / DOMContentLoaded':34}{ready / dcl:>10.2f}x{'<= ' + str(READY_RATIO):>10}x")
    dcl2 = median([v.dcl_ms for v in seconds])
    ready2 = median([v.ready_ms for v in seconds])
    print(f"{'second visit, DOMContentLoaded':34}{dcl2:>9.0f} ms")
    print(f"{'second visit, ready to run':34}{ready2:>9.0f} ms")
    print(f"{'  ready / DOMContentLoaded':34}{ready2 / dcl2:>10.2f}x{'<= ' + str(READY_RATIO):>10}x")
    for name, shown in (("first visit", first), ("second visit", second), ("uncompressed first visit", plain)):
        print(f"\n{name}: {len(shown.transferred)} requests, websocket frames received {shown.websocket_bytes} B")
        for request, size in sorted(shown.transferred.items(), key=lambda item: -item[1]):
            path = request.removeprefix(server.http_url)
            print(f"  {size / 1000:8.1f} KB  {shown.encodings.get(request, '') or '-':6} {path}")
    index_fetched = any("/api/api-index/" in u for v in firsts + seconds for u in v.transferred)
    print(f"\nAPI index fetched during a load: {'yes' if index_fetched else 'no (it loads when completion needs it)'}")


if __name__ == "__main__":
    main()
