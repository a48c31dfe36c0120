"""/metrics has every labelled series from the start, and counts each outcome a browser is told exactly once.

A series that appears only at its first increment is invisible to ``rate()``
and to an alert until then (and its first increment is never counted). The
in-process app here has no worker: what it refuses, what it holds waiting and
what a cancel ends are real outcomes of its real browser socket.
"""

from __future__ import annotations

import ast
import json
import time
from pathlib import Path

from prometheus_client.parser import text_string_to_metric_families
from starlette.testclient import TestClient

from jaxplay import browser_protocol as bp
from jaxplay import worker_protocol as wp
from jaxplay.server.app import create_app
from jaxplay.settings import Settings

ROOT = Path(__file__).resolve().parents[2]
TOKEN = {"authorization": "Bearer metrics-test-token"}


def app_with(tmp_path, **changes):
    return create_app(Settings(data_dir=tmp_path, local_workers=0, allowed_hosts="testserver", metrics="token",
                               metrics_token="metrics-test-token", expected_backends="cpu", **changes))


def scrape(client: TestClient) -> dict[tuple[str, tuple], float]:
    response = client.get("/metrics", headers=TOKEN)
    assert response.status_code == 200
    return {(s.name, tuple(sorted(s.labels.items()))): s.value
            for family in text_string_to_metric_families(response.text) for s in family.samples}


def sample(samples: dict, name: str, **labels: str) -> float | None:
    return samples.get((name, tuple(sorted(labels.items()))))


def test_a_fresh_server_exports_every_labelled_series_at_zero(tmp_path):
    with TestClient(app_with(tmp_path)) as client:
        samples = scrape(client)
    for name in ("jaxplay_sandbox_crashes_total", "jaxplay_sandbox_oom_kills_total",
                 "jaxplay_queue_oldest_age_seconds"):
        assert sample(samples, name, backend="cpu") == 0.0, name
    for kind in wp.RUN_KINDS:
        for name in ("jaxplay_queue_wait_seconds_count", "jaxplay_run_duration_seconds_count"):
            assert sample(samples, name, backend="cpu", kind=kind) == 0.0, (name, kind)
        for status in ("ok", "error", "timeout", "cancelled", "crashed"):
            assert sample(samples, "jaxplay_runs_total", backend="cpu", kind=kind, status=status) == 0.0, status
        for reason in bp.REJECTION_REASONS:
            assert sample(samples, "jaxplay_runs_rejected_total", reason=reason, kind=kind) == 0.0, reason


def test_each_outcome_told_is_counted_once_and_a_rejection_names_its_reason(tmp_path):
    with TestClient(app_with(tmp_path)) as client:
        with client.websocket_connect("/ws") as ws:
            ws.send_text(json.dumps({"type": "run", "id": "far", "code": "print(1)", "backend": "tpu"}))
            refused = json.loads(ws.receive_text())
            ws.send_text(json.dumps({"type": "run", "id": "long", "code": "print(1)", "timeout_s": 10_000}))
            too_long = json.loads(ws.receive_text())
            ws.send_text("{not json")  # no run id to answer: told by a notice, not counted as a run
            assert json.loads(ws.receive_text())["type"] == "notice"
            # No worker is connected: the run waits, and its age shows while it does.
            ws.send_text(json.dumps({"type": "run", "id": "waits", "code": "print('never runs')"}))
            assert json.loads(ws.receive_text())["type"] == "queued"
            time.sleep(0.3)
            waiting = scrape(client)
            ws.send_text(json.dumps({"type": "cancel", "id": "waits"}))
            cancelled = json.loads(ws.receive_text())
            ws.send_text(json.dumps({"type": "cancel", "id": "waits"}))  # ended already: a notice
            assert json.loads(ws.receive_text())["type"] == "notice"
        after = scrape(client)
    assert (refused["type"], refused["status"], refused["reason"]) == ("done", "rejected", "unknown_backend")
    assert (too_long["status"], too_long["reason"]) == ("rejected", "timeout_too_long")
    assert (cancelled["type"], cancelled["status"]) == ("done", "cancelled") and "reason" not in cancelled
    assert sample(waiting, "jaxplay_queue_oldest_age_seconds", backend="cpu") >= 0.3
    assert sample(after, "jaxplay_queue_oldest_age_seconds", backend="cpu") == 0.0
    assert sample(after, "jaxplay_runs_rejected_total", reason="unknown_backend", kind="run") == 1
    assert sample(after, "jaxplay_runs_rejected_total", reason="timeout_too_long", kind="run") == 1
    assert sample(after, "jaxplay_runs_total", backend="cpu", kind="run", status="cancelled") == 1
    assert sum(v for (name, _), v in after.items() if name == "jaxplay_runs_rejected_total") == 2
    assert sum(v for (name, _), v in after.items() if name == "jaxplay_runs_total") == 1


def _called(call: ast.Call) -> str | None:
    return call.func.attr if isinstance(call.func, ast.Attribute) else getattr(call.func, "id", None)


def _python_files() -> list[Path]:
    return [p for folder in ("jaxplay", "server", "sandbox") for p in sorted((ROOT / folder).rglob("*.py"))]


def test_every_rejection_reason_the_code_names_is_known_up_front():
    """The reasons are label values pre-initialised from ``REJECTION_REASONS``: one missing from it would
    appear only at its first rejection, which ``rate()`` and the alerts then miss."""
    named = set()
    for path in _python_files():
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if not isinstance(node, ast.Call) or _called(node) not in ("ProtocolError", "finish", "_end", "rejected"):
                continue
            named |= {k.value.value for k in node.keywords if k.arg == "reason" and isinstance(k.value, ast.Constant)}
    assert {"queue_full", "unknown_runtime", "broker_unreachable", "code_too_large"} <= named
    assert named <= set(bp.REJECTION_REASONS), named - set(bp.REJECTION_REASONS)


def test_every_run_the_server_ends_as_rejected_says_why():
    """A ``finish``/``_end`` with ``RunStatus.REJECTED`` passes ``reason=``: the done carries it, to the
    browser and across replicas, and the metrics count it under it (not under "other")."""
    calls = []
    for path in _python_files():
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Call) and _called(node) in ("finish", "_end") and any(
                    isinstance(a, ast.Attribute) and a.attr == "REJECTED" for a in node.args):
                calls.append((path.relative_to(ROOT), node.lineno, {k.arg for k in node.keywords}))
    assert len(calls) >= 4
    assert all("reason" in keywords for _, _, keywords in calls), [c for c in calls if "reason" not in c[2]]
