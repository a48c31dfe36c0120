"""/metrics is never open to the world by default; /readyz names what is missing."""

from __future__ import annotations

import pytest
from prometheus_client.parser import text_string_to_metric_families
from starlette.testclient import TestClient

from jaxplay.server.app import create_app
from jaxplay.settings import Settings


def app_with(tmp_path, **changes):
    # The test client asks for the host "testserver", which a server answers to only when told (--allowed-hosts).
    return create_app(Settings(data_dir=tmp_path, local_workers=0, allowed_hosts="testserver", **changes))


def test_by_default_a_client_on_another_host_is_refused_and_told_how_to_allow_it(tmp_path):
    with TestClient(app_with(tmp_path)) as client:  # the test client's address is not loopback
        response = client.get("/metrics")
    assert response.status_code == 403 and "--metrics token" in response.text


def test_token_mode_needs_the_bearer_token(tmp_path):
    with TestClient(app_with(tmp_path, metrics="token", metrics_token="s3cret")) as client:
        assert client.get("/metrics").status_code == 401
        assert client.get("/metrics", headers={"authorization": "Bearer wrong"}).status_code == 401
        response = client.get("/metrics", headers={"authorization": "Bearer s3cret"})
    assert response.status_code == 200
    names = {family.name for family in text_string_to_metric_families(response.text)}
    assert {"jaxplay_runs", "jaxplay_queue_depth", "jaxplay_queue_wait_seconds", "jaxplay_run_duration_seconds",
            "jaxplay_slots_total", "jaxplay_slots_busy", "jaxplay_workers_connected", "jaxplay_result_cache_hits",
            "jaxplay_result_cache_misses", "jaxplay_result_cache_bytes", "jaxplay_snippets_created",
            "jaxplay_browser_connections", "jaxplay_runs_rejected", "jaxplay_sandbox_crashes",
            "jaxplay_sandbox_oom_kills"} <= names


def test_off_hides_the_page(tmp_path):
    with TestClient(app_with(tmp_path, metrics="off")) as client:
        assert client.get("/metrics").status_code == 404


@pytest.mark.parametrize("changes, words", [({"metrics": "token"}, "JAXPLAY_METRICS_TOKEN"),
                                            ({"metrics": "everyone"}, "--metrics must be one of")])
def test_settings_that_cannot_work_are_refused_at_start(tmp_path, changes, words):
    with pytest.raises(ValueError, match=words):
        app_with(tmp_path, **changes)


def test_readyz_names_the_backend_without_a_worker(tmp_path):
    with TestClient(app_with(tmp_path, expected_backends="gpu, cpu")) as client:
        response = client.get("/readyz")
        assert client.get("/healthz").json()["ok"] is True
    assert response.status_code == 503
    assert response.json()["missing_backends"] == ["cpu", "gpu"]
    assert response.json()["checks"]["storage"] == "writable"
