"""A real server's log at its default level: the access log has a line per request and per websocket, and no
line anywhere in the log holds a run's code or output, a shared program, or a query string."""

from __future__ import annotations

import json
import re
import time
import urllib.request

import pytest

from tests.live_server import LiveServer, done_of, output_text

pytestmark = pytest.mark.live

MARK = "zq7-access-log-mark"
CODE = f"x = '{MARK}-in-code'\nprint('{MARK}-in-output')"


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    server = LiveServer(tmp_path_factory.mktemp("access"))
    try:
        server.wait_ready()
        yield server
    finally:
        server.stop()


def access_lines(server: LiveServer) -> list[str]:
    return [line for line in server.log_path.read_text().splitlines() if " jaxplay.access: " in line]


def test_the_log_has_every_request_and_never_code_output_or_a_query(server):
    events = server.run(CODE)
    assert done_of(events)["status"] == "ok" and output_text(events) == f"{MARK}-in-output\n"
    body = json.dumps({"code": f"print('{MARK}-shared')"}).encode()
    created = urllib.request.Request(server.http_url + "/api/snippets", data=body, method="POST",
                                     headers={"content-type": "application/json"})
    with urllib.request.urlopen(created, timeout=10) as response:
        link = json.load(response)["id"]
    with urllib.request.urlopen(f"{server.http_url}/api/snippets/{link}?code={MARK}-query", timeout=10) as response:
        assert MARK in response.read().decode()
    time.sleep(0.5)  # the websocket's line is written when its connection has ended

    lines = access_lines(server)
    def one(pattern: str) -> str:
        found = [line for line in lines if re.search(pattern, line)]
        assert found, f"no access line matches {pattern!r} in:\n" + "\n".join(lines[-20:])
        return found[-1]

    one(r'127\.0\.0\.1 "WS /ws" 101 close=\d+ [\d.]+ms$')
    one(r'127\.0\.0\.1 "POST /api/snippets" 201 [\d.]+ms$')
    one(rf'127\.0\.0\.1 "GET /api/snippets/{re.escape(link)}" 200 [\d.]+ms$')
    one(r'"GET /healthz" 200 ')  # the readiness wait's polls
    log = server.log_path.read_text()
    assert MARK not in log, [line for line in log.splitlines() if MARK in line]
