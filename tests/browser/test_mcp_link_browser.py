"""The link an assistant gets from /mcp's run tool opens in the browser on the recorded run."""

from __future__ import annotations

from pathlib import Path

from tests.browser.helpers import PageAt, output_text
from tests.mcp_client import call, issue_token

DEFAULT_EXAMPLE = (Path(__file__).resolve().parents[2] / "frontend" / "src" / "examples" / "default.py").read_text()


def test_the_link_from_the_run_tool_opens_the_default_example_on_its_recorded_run(page_at: PageAt, live) -> None:
    token = issue_token(live.log_path.parent, "browser-link")
    result = call(live.http_url, token, "run", code=DEFAULT_EXAMPLE)
    answer = result.structured_content
    assert not result.is_error and answer["status"] == "ok", result.content[0].text
    inspected = call(live.http_url, token, "inspect", code=DEFAULT_EXAMPLE).structured_content
    assert any(fn["hlo"].startswith("HloModule jit_update") for fn in inspected["functions"])

    viewer = page_at(answer["link"].removeprefix(live.http_url))
    assert viewer.evaluate("window.jaxplay.editor.getCode()") == DEFAULT_EXAMPLE
    viewer.wait_for_selector("[data-testid=run-banner][data-kind=recorded]")
    assert "Recorded run" in viewer.text_content("[data-testid=run-banner]")
    shown = output_text(viewer)
    assert "step 7: loss" in shown and "per-example loss:" in shown
    assert viewer.get_attribute("[data-testid=status]", "data-status") == "ok"
