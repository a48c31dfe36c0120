"""Snippets over real HTTP: the API's answers, the share and embed pages, and who may frame them."""

from __future__ import annotations

import html
import json
import re
import urllib.error
import urllib.request
import uuid
from typing import Any

import pytest

from tests.conftest import done_of

pytestmark = pytest.mark.live


def request(live, method: str, path: str, body: bytes | None = None,
            headers: dict[str, str] | None = None) -> tuple[int, dict[str, str], bytes]:
    req = urllib.request.Request(live.http_url + path, data=body, method=method,
                                 headers={"content-type": "application/json", **(headers or {})})
    try:
        with urllib.request.urlopen(req, timeout=30) as response:
            return response.status, {k.lower(): v for k, v in response.headers.items()}, response.read()
    except urllib.error.HTTPError as error:
        return error.code, {k.lower(): v for k, v in error.headers.items()}, error.read()


def share(live, **fields: Any) -> tuple[int, dict[str, Any]]:
    status, _, body = request(live, "POST", "/api/snippets", json.dumps(fields).encode())
    return status, json.loads(body)


def unique_code(text: str = "print('shared')") -> str:
    return f"# {uuid.uuid4().hex}\n{text}\n"


def test_create_then_load_and_sharing_twice_gives_the_same_link(live):
    code = unique_code()
    status, created = share(live, code=code, backend="cpu", settings={"inspect": True})
    assert status == 201 and created["created"] is True
    assert re.fullmatch(r"[a-z2-7]{8}", created["id"])
    assert created["url"] == f"{live.http_url}/s/{created['id']}"
    assert created["embed_url"] == f"{live.http_url}/e/{created['id']}"

    status, again = share(live, code=code, backend="cpu", settings={"inspect": True})
    assert status == 201 and again["id"] == created["id"] and again["created"] is False
    status, other = share(live, code=code + "# edited\n", backend="cpu", settings={"inspect": True})
    assert status == 201 and other["id"] != created["id"]

    status, headers, body = request(live, "GET", f"/api/snippets/{created['id']}")
    snippet = json.loads(body)
    assert status == 200 and headers["content-type"] == "application/json"
    assert "immutable" in headers["cache-control"]
    assert snippet["code"] == code and snippet["backend"] == "cpu" and snippet["settings"] == {"inspect": True}
    assert snippet["recorded_run"] is None and snippet["forked_from"] is None and snippet["id"] == created["id"]


def test_a_recorded_run_from_the_real_worker_is_stored_as_sent(live):
    code = unique_code("import jax.numpy as jnp\nprint(jnp.arange(3) * 2)")
    events = live.run(code)
    assert done_of(events)["status"] == "ok"
    status, created = share(live, code=code, backend="cpu", recorded_run=events, recorded_at="2025-05-01T12:00:00Z")
    assert status == 201
    snippet = live.get_json(f"/api/snippets/{created['id']}")
    assert snippet["recorded_run"] == [{k: v for k, v in e.items() if k != "id"} for e in events]
    assert snippet["recorded_at"] == "2025-05-01T12:00:00Z"


def test_a_fork_records_where_it_came_from(live):
    _, parent = share(live, code=unique_code())
    status, child = share(live, code=unique_code("print('edited')"), forked_from=parent["id"])
    assert status == 201 and live.get_json(f"/api/snippets/{child['id']}")["forked_from"] == parent["id"]
    status, body = share(live, code=unique_code(), forked_from="zzzzzzzz")
    assert status == 400 and "'zzzzzzzz'" in body["message"]


@pytest.mark.parametrize(("body", "status", "words"), [
    (b"{oops", 400, "not valid JSON"),
    (b'{"code": 1}', 400, "'code'"),
    (json.dumps({"code": "#" * (256 * 1024 + 1)}).encode(), 413, "256 KiB"),
    (json.dumps({"code": "1", "recorded_run": [{"type": "stdout", "text": "x" * (11 << 20)}, {"type": "done"}]}).encode(),
     413, "10 MiB"),
])
def test_bad_requests_get_a_status_and_a_json_message(live, body, status, words):
    answer, headers, raw = request(live, "POST", "/api/snippets", body)
    assert answer == status and headers["content-type"] == "application/json"
    assert words in json.loads(raw)["message"]


def test_an_unknown_id_is_404_with_a_json_message(live):
    status, headers, raw = request(live, "GET", "/api/snippets/abcdefgh")
    assert status == 404 and "'abcdefgh'" in json.loads(raw)["message"]


def boot_of(page: bytes) -> dict[str, Any]:
    match = re.search(rb'<script id="boot" type="application/json">(.*?)</script>', page, re.S)
    assert match, page[:500]
    return json.loads(html.unescape(match.group(1).decode()))


def test_share_and_embed_pages_carry_the_snippet_and_only_embeds_may_be_framed(live):
    code = unique_code("# Rotations with jnp\nprint('</script><b>not markup</b>')")
    _, created = share(live, code=code, backend="cpu")
    status, headers, page = request(live, "GET", f"/s/{created['id']}")
    boot = boot_of(page)
    assert status == 200 and boot["mode"] == "editor" and boot["snippet"]["code"] == code
    assert boot["snippet"]["id"] == created["id"] and b"<b>not markup</b>" not in page
    assert headers["content-security-policy"] == "frame-ancestors 'none'; frame-src 'none'" and headers["x-frame-options"] == "DENY"

    status, headers, page = request(live, "GET", f"/e/{created['id']}")
    assert status == 200 and boot_of(page)["mode"] == "embed" and boot_of(page)["snippet"]["code"] == code
    assert headers["content-security-policy"] == "frame-ancestors * file:; frame-src 'none'" and "x-frame-options" not in headers
    # The page needs nothing from the internet: every script and stylesheet is this server's.
    assert not re.search(rb'(src|href)="(https?:)?//', page)

    status, headers, _ = request(live, "GET", "/")
    assert headers["content-security-policy"] == "frame-ancestors 'none'; frame-src 'none'" and headers["x-frame-options"] == "DENY"


def test_pages_of_an_unknown_snippet_say_so(live):
    for prefix in ("/s/", "/e/"):
        status, headers, page = request(live, "GET", prefix + "abcdefgh")
        assert status == 404 and b"No snippet abcdefgh" in page and b'href=\'/\'' in page
