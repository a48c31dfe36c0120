"""The server's vouch on a rich output: given only by this server, only for the code that made it.

The whole path (a real run's treescope view kept through a link, a forged
recorded run exported as text) is tests/browser/test_export_trust_browser.py.
"""

from __future__ import annotations

import secrets

import pytest

from jaxplay.server.clients.sessions import SessionKeys
from jaxplay.server.runs import output_vouch
from jaxplay.server.sharing.snippets import SnippetContent, with_checked_vouches

KEYS = SessionKeys(secrets.token_bytes(32))
CODE = "import jax.numpy as jnp\njnp.ones(3)\n"
VIEW = {"type": "display", "mime": "text/html", "role": "result", "data": "<script>treescope()</script>",
        "text": "Array([1., 1., 1.], dtype=float32)"}


def content(events: list[dict], code: str = CODE) -> SnippetContent:
    return SnippetContent(code=code, backend="cpu", settings={}, recorded_run=[*events, {"type": "done"}],
                          recorded_at=None, forked_from=None, runtime=None)


@pytest.mark.attack("forged output")
def test_a_vouch_checks_only_for_the_same_server_code_and_content():
    vouched = output_vouch.vouched(KEYS, CODE, VIEW)
    assert output_vouch.checks(KEYS, CODE, vouched)
    assert output_vouch.checks(KEYS, CODE, {**vouched, "id": "another-run"})  # the browser's run id is no part
    assert not output_vouch.checks(KEYS, CODE + "#", vouched)  # another program's output
    assert not output_vouch.checks(KEYS, CODE, {**vouched, "data": "<script>evil()</script>"})
    assert not output_vouch.checks(KEYS, CODE, {**vouched, "mime": "application/javascript"})
    assert not output_vouch.checks(SessionKeys(secrets.token_bytes(32)), CODE, vouched)  # another server's key
    assert not output_vouch.checks(KEYS, CODE, VIEW)
    assert "vouch" not in output_vouch.vouched(KEYS, CODE, {"type": "stdout", "text": "hi"})


@pytest.mark.attack("forged output")
def test_a_runs_own_vouch_is_replaced_and_a_links_keeps_only_vouches_that_check():
    claimed = {**VIEW, "vouch": "0" * 64}
    assert output_vouch.vouched(KEYS, CODE, claimed)["vouch"] != "0" * 64
    genuine = output_vouch.vouched(KEYS, CODE, VIEW)
    kept = with_checked_vouches(content([claimed, genuine]), KEYS).recorded_run
    assert kept is not None and "vouch" not in kept[0] and kept[1] == genuine
    moved = with_checked_vouches(content([genuine], code="print('another program')\n"), KEYS).recorded_run
    assert moved is not None and "vouch" not in moved[0]  # a genuine output pasted under other code
    assert "vouch" not in with_checked_vouches(content([genuine]), None).recorded_run[0]
