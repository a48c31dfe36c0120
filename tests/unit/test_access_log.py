"""The access log (server/ops/access_log.py): a line per request and per websocket, never code or output."""

from __future__ import annotations

import json
import logging

import pytest
from starlette.testclient import TestClient
from starlette.websockets import WebSocketDisconnect

from jaxplay.server.app import create_app
from jaxplay.server.ops.access_log import MAX_PATH_CHARS, path_of
from jaxplay.settings import Settings

SECRET = "print('s3cret-program-text')"


def app_with(tmp_path, **changes):
    return create_app(Settings(data_dir=tmp_path, local_workers=0, allowed_hosts="testserver", **changes))


def access_records(caplog) -> list[logging.LogRecord]:
    return [r for r in caplog.records if r.name == "jaxplay.access"]


def everything_logged(records: list[logging.LogRecord]) -> str:
    return "\n".join(f"{r.getMessage()} {r.__dict__}" for r in records)


def test_a_request_is_one_line_with_status_method_path_and_duration_but_no_query(tmp_path, caplog):
    caplog.set_level(logging.INFO, logger="jaxplay.access")
    with TestClient(app_with(tmp_path)) as client:
        assert client.get("/healthz", params={"code": SECRET}).status_code == 200
        # Refused by a middleware further in (a Host this server does not answer to): logged all the same.
        assert client.get("/healthz", headers={"host": "evil.example"}).status_code == 400
    ok, refused = access_records(caplog)
    assert (ok.method, ok.path, ok.status, ok.client_network) == ("GET", "/healthz", 200, "testclient")
    assert ok.getMessage().startswith('testclient "GET /healthz" 200 ') and ok.getMessage().endswith("ms")
    assert ok.levelno == logging.INFO and ok.duration_ms >= 0
    assert (refused.path, refused.status) == ("/healthz", 400)
    assert "s3cret" not in everything_logged(access_records(caplog))


def test_a_websocket_is_logged_when_it_ends_without_what_it_carried(tmp_path, caplog):
    caplog.set_level(logging.INFO, logger="jaxplay.access")
    with TestClient(app_with(tmp_path, expected_backends="cpu")) as client:  # so a tpu run is refused at once
        with client.websocket_connect("/ws") as ws:
            ws.send_text(json.dumps({"type": "run", "id": "r1", "code": SECRET, "backend": "tpu"}))
            done = json.loads(ws.receive_text())
            assert done["status"] == "rejected" and "tpu" in done["message"]
    [line] = [r for r in access_records(caplog) if r.method == "WS"]
    assert (line.path, line.status, line.close_code) == ("/ws", 101, 1000)
    assert line.getMessage().startswith('testclient "WS /ws" 101 close=1000 ')
    assert "s3cret" not in everything_logged(access_records(caplog))


def test_a_refused_websocket_handshake_is_logged_with_its_status(tmp_path, caplog):
    caplog.set_level(logging.INFO, logger="jaxplay.access")
    with TestClient(app_with(tmp_path)) as client:
        with pytest.raises(WebSocketDisconnect), client.websocket_connect("/ws", headers={"origin": "https://evil.example"}):
            pass
    [line] = [r for r in access_records(caplog) if r.method == "WS"]
    assert (line.path, line.status) == ("/ws", 403)


def test_the_setting_turns_it_off(tmp_path, caplog):
    caplog.set_level(logging.INFO, logger="jaxplay.access")
    with TestClient(app_with(tmp_path, access_log=False)) as client:
        assert client.get("/healthz").status_code == 200
    assert access_records(caplog) == []


@pytest.mark.parametrize("scope, logged", [
    ({"raw_path": b"/s/Ab3xY9", "path": "/s/Ab3xY9"}, "/s/Ab3xY9"),
    ({"raw_path": b"/x%0A%22forged%22?code=print(1)", "path": '/x\n"forged"'}, "/x%0A%22forged%22"),
    ({"path": '/x\n"forged" 200'}, '/x\\n\\x22forged\\x22 200'),
    ({"raw_path": b"/" + b"a" * 500, "path": "/" + "a" * 500}, "/" + "a" * (MAX_PATH_CHARS - 1) + "..."),
])
def test_a_path_can_never_forge_a_line_or_carry_a_query(scope, logged):
    assert path_of(scope) == logged
