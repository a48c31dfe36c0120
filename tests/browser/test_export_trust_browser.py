"""An exported notebook carries active content only where this server vouched for it, and text everywhere.

A link's recorded run is whatever the sharer's browser sent: one made up with
``<script>`` HTML, JavaScript, an SVG with ``onload`` and a widget must export
as text (and inert images) only. A run the page really made keeps treescope's
view, in the page and through a link, and every output has a ``text/plain``
form, so GitHub, nbviewer and an untrusted Jupyter show something.
"""

from __future__ import annotations

import json
import re
import uuid

import pytest
from playwright.sync_api import Page

from tests.browser.helpers import PageAt, replace_code, wait_for_status
from tests.browser.test_share_browser import LINK, create_snippet

pytestmark = [pytest.mark.live, pytest.mark.browser]

ACTIVE = re.compile(r"<script|javascript:|\bon[a-z]+\s*=|<foreignObject", re.IGNORECASE)
FORGED_CODE = "print('hello')\n"
FORGED_RUN = [
    {"type": "started", "backend": "cpu", "devices": {"kind": "cpu", "count": 8, "worker": "w"}, "jax_version": "0.10.2"},
    {"type": "stdout", "text": "hello\n"},
    {"type": "display", "mime": "text/html", "role": "result", "data": "<script>window.forged = location.href</script><b>hi</b>",
     "text": "hi", "vouch": "0" * 64},
    {"type": "display", "mime": "application/javascript", "role": "display", "data": "alert(document.domain)"},
    {"type": "display", "mime": "image/svg+xml", "role": "figure",
     "data": '<svg xmlns="http://www.w3.org/2000/svg" onload="alert(1)"><circle r="4"/></svg>'},
    {"type": "display", "mime": "application/vnd.jupyter.widget-view+json", "role": "display",
     "data": '{"model_id": "4c5d", "version_major": 2}'},
    {"type": "done", "status": "ok", "elapsed_ms": 12.0},
]
GENUINE = """import jax.numpy as jnp
import matplotlib.pyplot as plt
print("sum", jnp.arange(4.0).sum())
plt.plot([1, 4, 9])
plt.show()
{"w": jnp.ones((2, 3)), "b": jnp.zeros(3)}
"""


def exported_notebook(page: Page) -> dict:
    page.click("[data-testid=export]")
    with page.expect_download() as download:
        page.click("[data-testid=export-ipynb]")
    with open(download.value.path(), encoding="utf-8") as f:
        return json.load(f)


def rich_outputs(notebook: dict) -> list[dict]:
    return [o for cell in notebook["cells"] for o in cell["outputs"] if o["output_type"] in ("display_data", "execute_result")]


@pytest.mark.attack("forged output")
def test_a_forged_recorded_runs_export_carries_no_script_html_javascript_handlers_or_widgets(
        page_at: PageAt, base_url: str) -> None:
    snippet = create_snippet(page_at("/"), base_url, code=FORGED_CODE, recorded_run=FORGED_RUN)
    page = page_at(f"/s/{snippet}")
    page.wait_for_selector("[data-testid=run-banner][data-kind=recorded]")
    notebook = exported_notebook(page)
    outputs = rich_outputs(notebook)
    assert len(outputs) == 4
    for output in outputs:
        assert set(output["data"]) == {"text/plain"}, output["data"].keys()
    dumped = json.dumps(notebook["cells"][-1]["outputs"])
    assert not ACTIVE.search(dumped), ACTIVE.search(dumped)
    assert "hello" in "".join(notebook["cells"][-1]["outputs"][0]["text"])
    stored = page.request.get(f"{base_url}/api/snippets/{snippet}").json()
    assert not any("vouch" in e for e in stored["recorded_run"])  # the sharer's word vouches for nothing


@pytest.mark.attack("forged output")
def test_a_genuine_runs_export_keeps_treescope_html_and_has_text_for_every_output(page_at: PageAt) -> None:
    page = page_at("/")
    code = f"# {uuid.uuid4().hex[:12]}\n{GENUINE}"
    replace_code(page, code)
    page.click("[data-testid=run]")
    assert wait_for_status(page, "ok", "error") == "ok"

    def check(notebook: dict) -> None:
        outputs = rich_outputs(notebook)
        assert outputs and all(o["data"].get("text/plain") for o in outputs), outputs
        (result,) = [o for o in outputs if o["output_type"] == "execute_result"]
        assert "treescope" in "".join(result["data"]["text/html"]) and "'w': Array(" in "".join(result["data"]["text/plain"])
        (figure,) = [o for o in outputs if "image/png" in o["data"]]
        assert "Figure size" in "".join(figure["data"]["text/plain"])

    check(exported_notebook(page))
    # Through a link: its recorded run keeps the server's vouch, so the view survives the round trip.
    page.click("[data-testid=share]")
    page.wait_for_selector("[data-testid=share-url]")
    assert page.is_checked("[data-testid=share-include-run]")
    snippet = LINK.search(page.input_value("[data-testid=share-url]")).group(1)
    opened = page_at(f"/s/{snippet}")
    opened.wait_for_selector("[data-testid=run-banner][data-kind=recorded]")
    check(exported_notebook(opened))
