"""Sharing in the browser on the real path: Share and Ctrl+S, opening the link, forks, the embed view
in an iframe, export, and the cached-result label."""

from __future__ import annotations

import base64
import json
import os
import re
import subprocess
import sys
import uuid

import pytest
from playwright.sync_api import Page, expect

from tests.browser.conftest import VIEWPORT
from tests.browser.helpers import PageAt, output_text, replace_code, wait_for_status

pytestmark = [pytest.mark.live, pytest.mark.browser]

LINK = re.compile(r"http://[^/]+/s/([a-z2-7]{8,})")


def unique_program(body: str) -> str:
    return f"# {uuid.uuid4().hex[:12]}\n{body}"


def run_and_wait(page: Page, status: str = "ok") -> None:
    page.click("[data-testid=run]")
    assert wait_for_status(page, "ok", "error") == status


def create_snippet(page: Page, base_url: str, **fields) -> str:
    response = page.request.post(f"{base_url}/api/snippets", data=json.dumps(fields),
                                 headers={"content-type": "application/json"})
    assert response.status in (200, 201), response.text()
    return response.json()["id"]


def test_ctrl_s_copies_a_link_that_opens_the_same_code_and_the_recorded_run(page_at: PageAt) -> None:
    page = page_at("/")
    page.context.grant_permissions(["clipboard-read", "clipboard-write"])
    code = unique_program("import jax.numpy as jnp\nprint('shared output', jnp.arange(3) * 2)\njnp.eye(2)\n")
    replace_code(page, code)
    run_and_wait(page)

    page.click(".cm-content")  # the shortcut works while typing, not only from the page
    page.keyboard.press("ControlOrMeta+s")

    page.wait_for_selector("[data-testid=share-copied][data-copied=true]")
    url = page.input_value("[data-testid=share-url]")
    assert LINK.fullmatch(url) and page.evaluate("navigator.clipboard.readText()") == url
    assert page.is_checked("[data-testid=share-include-run]")
    snippet_id = LINK.fullmatch(url).group(1)
    assert page.inner_text("[data-testid=snippet-link]") == snippet_id
    # Sharing again without a change gives the same link.
    page.keyboard.press("Escape")
    page.click("[data-testid=share]")
    page.wait_for_selector("[data-testid=share-copied][data-copied=true]")
    assert page.input_value("[data-testid=share-url]") == url

    viewer = page_at(f"/s/{snippet_id}")
    assert viewer.evaluate("window.jaxplay.editor.getCode()") == code
    viewer.wait_for_selector("[data-testid=run-banner][data-kind=recorded]")
    banner = viewer.text_content("[data-testid=run-banner]")
    assert "Recorded run" in banner and "cpu" in banner and "jax " in banner and "jaxlib " in banner
    assert "shared output [0 2 4]" in output_text(viewer)
    assert viewer.locator("[data-testid=output-log] .output-display").count() == 1
    assert viewer.get_attribute("[data-testid=status]", "data-status") == "ok"

    # Run runs it live: the banner goes, the output comes back from the worker (or its cache).
    run_and_wait(viewer)
    assert viewer.locator("[data-testid=run-banner][data-kind=recorded]").count() == 0
    assert "shared output [0 2 4]" in output_text(viewer)


def test_editing_a_shared_snippet_and_sharing_again_makes_a_fork(page_at: PageAt, base_url: str) -> None:
    page = page_at("/")
    parent = create_snippet(page, base_url, code=unique_program("print('parent')\n"), backend="cpu")
    editor = page_at(f"/s/{parent}")
    assert editor.inner_text("[data-testid=snippet-link]") == parent
    assert editor.locator("[data-testid=forked-from]").count() == 0

    editor.click(".cm-content")
    editor.keyboard.press("ControlOrMeta+End")
    editor.keyboard.insert_text("\nprint('child')\n")
    editor.click("[data-testid=share]")
    editor.wait_for_selector("[data-testid=share-copied]")
    child = LINK.fullmatch(editor.input_value("[data-testid=share-url]")).group(1)
    assert child != parent
    assert editor.inner_text("[data-testid=forked-from]") == parent
    # No run since the edit: the link carries the code only.
    assert editor.is_disabled("[data-testid=share-include-run]")

    opened = page_at(f"/s/{child}")
    assert "print('child')" in opened.evaluate("window.jaxplay.editor.getCode()")
    assert opened.inner_text("[data-testid=forked-from]") == parent
    assert opened.get_attribute("[data-testid=forked-from]", "href") == f"/s/{parent}"
    assert opened.locator("[data-testid=run-banner][data-kind=recorded]").count() == 0


def test_a_link_page_says_when_its_code_was_changed_and_offers_share_again_and_a_room(page_at: PageAt,
                                                                                     base_url: str) -> None:
    page = page_at("/")
    code = unique_program("print('as shared')\n")
    snippet = create_snippet(page, base_url, code=code, backend="cpu")
    for width in (1280, 390):
        viewer = page_at(f"/s/{snippet}", viewport={"width": width, "height": 800})
        expect(viewer.locator("[data-testid=draft-note]")).to_be_hidden()
        viewer.click(".cm-content")
        viewer.keyboard.press("ControlOrMeta+End")
        viewer.keyboard.insert_text("print('changed')\n")
        note = viewer.locator("[data-testid=draft-note]")
        expect(note).to_be_visible()
        expect(note).to_contain_text("modified")
        assert viewer.evaluate("location.pathname") == f"/s/{snippet}"  # the address still names the old code
    viewer.click("[data-testid=draft-revert]")
    expect(viewer.locator("[data-testid=draft-note]")).to_be_hidden()
    assert viewer.evaluate("window.jaxplay.editor.getCode()") == code

    viewer.click(".cm-content")
    viewer.keyboard.press("ControlOrMeta+End")
    viewer.keyboard.insert_text("print('changed again')\n")
    viewer.click("[data-testid=share-again]")
    viewer.wait_for_selector("[data-testid=share-copied]")
    child = LINK.fullmatch(viewer.input_value("[data-testid=share-url]")).group(1)
    assert child != snippet and viewer.evaluate("location.pathname") == f"/s/{child}"
    expect(viewer.locator("[data-testid=draft-note]")).to_be_hidden()

    # A link's page can start a room with its code, as the home page can.
    viewer.keyboard.press("Escape")
    viewer.click("[data-testid=room-menu]")
    viewer.click("[data-testid=room-start]")
    viewer.wait_for_url(re.compile(r"/r/jax-[2-9A-Z]{5}-[2-9A-Z]{5}#presenter="))
    expect(viewer.locator("[data-testid=room-bar]")).to_be_visible()
    assert viewer.evaluate("window.jaxplay.editor.getCode()") == code + "print('changed again')\n"


def test_a_link_whose_code_holds_crlf_or_a_lone_cr_opens_unmodified(page_at: PageAt, base_url: str) -> None:
    """The editor reads \\r\\n and a lone \\r as line breaks and holds \\n: the link's code is compared as the
    editor holds it, while the link keeps the code exactly as it was shared (its id is its content's)."""
    page = page_at("/")
    code = unique_program("x = 1\r\nprint(x)\rprint('end')\r\n")
    snippet = create_snippet(page, base_url, code=code, backend="cpu")
    assert page.request.get(f"{base_url}/api/snippets/{snippet}").json()["code"] == code
    viewer = page_at(f"/s/{snippet}")
    expect(viewer.locator("[data-testid=snippet-link]")).to_have_text(snippet)
    expect(viewer.locator("[data-testid=draft-note]")).to_be_hidden()
    as_editor = code.replace("\r\n", "\n").replace("\r", "\n")
    assert viewer.evaluate("window.jaxplay.editor.getCode()") == as_editor
    viewer.click(".cm-content")
    viewer.keyboard.press("ControlOrMeta+End")
    viewer.keyboard.insert_text("print('changed')\n")
    expect(viewer.locator("[data-testid=draft-note]")).to_be_visible()
    viewer.click("[data-testid=draft-revert]")
    expect(viewer.locator("[data-testid=draft-note]")).to_be_hidden()
    viewer.reload()  # no draft was kept of the unedited code: it opens as the link again
    expect(viewer.locator("[data-testid=snippet-link]")).to_have_text(snippet)
    expect(viewer.locator("[data-testid=draft-note]")).to_be_hidden()
    assert viewer.evaluate("window.jaxplay.editor.getCode()") == as_editor


def test_the_embed_view_runs_inside_an_iframe_and_is_read_only_until_edit(page_at: PageAt, base_url: str) -> None:
    host = page_at("/")
    recorded = [{"type": "stdout", "text": "from the recording\n"}, {"type": "done", "status": "ok", "elapsed_ms": 5.0}]
    code = unique_program("print('live in the embed')\n")
    snippet_id = create_snippet(host, base_url, code=code, backend="cpu", recorded_run=recorded)
    # The slides live on another origin (localhost is not 127.0.0.1), as they would on another site.
    other_origin = base_url.replace("127.0.0.1", "localhost")
    assert other_origin != base_url
    host.goto(f"{other_origin}/healthz")
    host.set_content(f"<h1>Slides</h1><iframe id=embed src='{base_url}/e/{snippet_id}' width=900 height=500></iframe>"
                     f"<iframe id=denied src='{base_url}/s/{snippet_id}' width=300 height=200></iframe>")
    frame = host.frame_locator("#embed")
    frame.locator(".cm-content").wait_for()
    frame.locator(".conn[data-state=open]").wait_for()

    # Compact: the editor and the results' tabs (no Gallery), the recording shown and labelled.
    assert frame.locator("#tab-inspect").is_visible() and frame.locator("#tab-sharding").is_visible()
    assert frame.locator("#tab-gallery").is_hidden()
    assert "from the recording" in frame.locator("[data-testid=output-log]").inner_text()
    assert "Recorded run" in frame.locator("[data-testid=run-banner]").text_content()
    assert frame.locator("[data-testid=share]").count() == 0

    # Read-only until the viewer chooses to edit.
    frame.locator(".cm-content").click()
    host.keyboard.type("oops")
    assert "oops" not in frame.locator(".cm-content").inner_text()
    frame.locator("[data-testid=edit]").click()
    host.keyboard.press("ControlOrMeta+End")
    host.keyboard.insert_text("\nprint('edited in the embed')\n")
    assert "edited in the embed" in frame.locator(".cm-content").inner_text()

    frame.locator("[data-testid=run]").click()
    frame.locator("[data-testid=status][data-status=ok]").wait_for(timeout=60_000)
    out = frame.locator("[data-testid=output-log]").inner_text()
    assert "live in the embed" in out and "edited in the embed" in out and "from the recording" not in out

    # The share page itself refuses to be framed.
    denied = host.query_selector("#denied").content_frame()
    host.wait_for_timeout(500)
    assert denied is None or denied.query_selector(".cm-content") is None


SHARDED = """import jax, jax.numpy as jnp
from jax.sharding import NamedSharding, PartitionSpec as P
mesh = jax.make_mesh((8,), ("x",))
x = jax.device_put(jnp.arange(16.0), NamedSharding(mesh, P("x")))
jax.debug.visualize_array_sharding(x)
"""


def test_an_embed_reaches_every_view_and_its_link_can_open_on_one(page_at: PageAt, base_url: str) -> None:
    page = page_at("/")
    replace_code(page, SHARDED)
    page.click("[data-testid=run]")
    assert wait_for_status(page, "ok", "error") == "ok", output_text(page)
    page.click("[data-testid=share]")
    page.select_option("[data-testid=share-embed-view]", "sharding")
    embed_code = page.input_value("[data-testid=share-embed-code]")
    embed_url = re.search(r'src="([^"]+)"', embed_code).group(1)
    assert embed_url.endswith("?view=sharding"), embed_code

    embed = page_at(embed_url.removeprefix(base_url))
    expect(embed.locator("#tab-sharding")).to_have_attribute("aria-selected", "true")
    expect(embed.locator("[data-testid=sharding-array]").first).to_be_visible()
    embed.click("#tab-output")
    embed.click("[data-testid=sharding-pointer] button")  # "drawn in the Sharding tab" leads there
    expect(embed.locator("#tab-sharding")).to_have_attribute("aria-selected", "true")
    embed.click("#tab-inspect")
    expect(embed.locator("#panel-inspect")).to_be_visible()


def test_export_downloads_the_code_as_py_and_as_a_notebook(page_at: PageAt) -> None:
    page = page_at("/")
    code = unique_program("import jax\nprint(jax.devices())\n")
    replace_code(page, code)

    page.click("[data-testid=export]")
    with page.expect_download() as download:
        page.click("[data-testid=export-py]")
    assert download.value.suggested_filename == "jax-playground.py"
    with open(download.value.path(), encoding="utf-8") as f:
        assert f.read().rstrip("\n") == code.rstrip("\n")

    page.click("[data-testid=export]")
    with page.expect_download() as download:
        page.click("[data-testid=export-ipynb]")
    assert download.value.suggested_filename == "jax-playground.ipynb"
    with open(download.value.path(), encoding="utf-8") as f:
        notebook = json.load(f)
    assert notebook["nbformat"] == 4 and notebook["metadata"]["kernelspec"]["name"] == "python3"
    (cell,) = notebook["cells"]
    assert cell["cell_type"] == "code" and cell["outputs"] == [] and "".join(cell["source"]) == code.rstrip("\n")


USES_HELPERS = """import jax.numpy as jnp
import matplotlib.pyplot as plt
from playground import display, show_sharding, timeit

x = jnp.arange(4.0)
print("sum", x.sum())
display(x * 2)
show_sharding(x)
plt.plot([1, 4, 9])
plt.show()
timeit(jnp.sin, x, number=10, repeat=2)
"""


def test_exports_run_outside_the_playground_and_the_notebook_keeps_the_outputs(page_at: PageAt, tmp_path) -> None:
    page = page_at("/")
    replace_code(page, USES_HELPERS)
    run_and_wait(page)

    page.click("[data-testid=export]")
    with page.expect_download() as download:
        page.click("[data-testid=export-py]")
    exported = tmp_path / "exported.py"
    download.value.save_as(exported)
    assert exported.read_text().endswith(USES_HELPERS)
    # A plain Python with jax but without the playground's helpers runs it.
    ran = subprocess.run([sys.executable, "-I", str(exported)], cwd=tmp_path, capture_output=True, text=True,
                         timeout=300, env={**os.environ, "JAX_PLATFORMS": "cpu", "MPLBACKEND": "Agg"})
    assert ran.returncode == 0, ran.stderr[-2000:]
    assert "sum 6.0" in ran.stdout and "sin: " in ran.stdout and "per loop" in ran.stdout, ran.stdout

    page.click("[data-testid=export]")
    with page.expect_download() as download:
        page.click("[data-testid=export-ipynb]")
    with open(download.value.path(), encoding="utf-8") as f:
        notebook = json.load(f)
    helpers, program = notebook["cells"]
    assert "".join(program["source"]) == USES_HELPERS.rstrip("\n") and "playground" in "".join(helpers["source"])
    outputs = program["outputs"]
    streams = "".join("".join(o["text"]) for o in outputs if o["output_type"] == "stream")
    assert "sum 6.0" in streams and program["execution_count"] == 1
    images = [o["data"]["image/png"] for o in outputs if "image/png" in o.get("data", {})]
    assert images and base64.b64decode(images[0]).startswith(b"\x89PNG")
    assert any("text/html" in o.get("data", {}) or "text/plain" in o.get("data", {}) for o in outputs)

    # An edit since the run: its outputs no longer belong to the code, so the notebook leaves them out.
    replace_code(page, USES_HELPERS + "print('edited')\n")
    page.click("[data-testid=export]")
    with page.expect_download() as download:
        page.click("[data-testid=export-ipynb]")
    with open(download.value.path(), encoding="utf-8") as f:
        assert json.load(f)["cells"][-1]["outputs"] == []


def test_a_cached_result_is_labelled_and_run_fresh_runs_it_again(page_at: PageAt) -> None:
    page = page_at("/")
    replace_code(page, unique_program("import jax.numpy as jnp\nprint('cache me', jnp.ones(2).sum())\n"))
    run_and_wait(page)
    assert page.locator("[data-testid=run-banner]").is_hidden()
    page.wait_for_timeout(300)  # the first result is stored just after its done

    run_and_wait(page)
    page.wait_for_selector("[data-testid=run-banner][data-kind=cached]")
    banner = page.text_content("[data-testid=run-banner]")
    assert "Cached result" in banner and "timings" in banner and "cpu" in banner
    assert "cache me 2.0" in output_text(page)

    # On a phone the banner is one line, not a block that pushes the output down.
    page.set_viewport_size({"width": 390, "height": 844})
    box = page.locator("[data-testid=run-banner]").bounding_box()
    fresh = page.locator("[data-testid=run-fresh]").bounding_box()
    assert box and fresh and box["height"] <= 48 and fresh["x"] + fresh["width"] <= 390, (box, fresh)
    page.set_viewport_size(VIEWPORT)

    page.click("[data-testid=run-fresh]")
    assert wait_for_status(page, "ok", "error") == "ok"
    assert page.locator("[data-testid=run-banner]").is_hidden()
    assert "cache me 2.0" in output_text(page)


def test_a_snippet_opens_with_the_inspect_setting_it_was_shared_with(page_at: PageAt, base_url: str) -> None:
    page = page_at("/")
    off = create_snippet(page, base_url, code=unique_program("print(1)"), backend="cpu", settings={"inspect": False})
    on = create_snippet(page, base_url, code=unique_program("print(2)"), backend="cpu", settings={"inspect": True})
    assert not page_at(f"/s/{off}").is_checked("[data-testid=inspect-toggle]")
    assert page_at(f"/s/{on}").is_checked("[data-testid=inspect-toggle]")
