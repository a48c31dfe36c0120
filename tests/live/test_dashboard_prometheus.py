"""The Grafana dashboard and the alert rules against a real Prometheus scraping a real, fresh server.

Debian's ``prometheus`` scrapes one ``jaxplay serve --broker`` (a real Redis) every second and loads the
shipped rules. Before any run, every panel's expression must already return data: a labelled series that
appears only at its first increment leaves its panel empty (and its first increment uncounted), as three
panels were. Every rule must evaluate without error.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import time
import urllib.parse
import urllib.request
from pathlib import Path

import pytest

from tests.live_server import LiveServer, free_port

pytestmark = pytest.mark.live

ROOT = Path(__file__).resolve().parents[2]
DASHBOARD = ROOT / "deploy" / "grafana" / "jaxplay-dashboard.json"
RULES = ROOT / "deploy" / "prometheus" / "jaxplay-alerts.yml"
MISSING = "Needs Debian's 'prometheus' package (the server, beside promtool); `make test` installs it"
CONFIG = """global: {{scrape_interval: 1s, evaluation_interval: 1s}}
rule_files: ["{rules}"]
scrape_configs:
  - job_name: jaxplay
    metrics_path: /metrics
    static_configs: [{{targets: ["127.0.0.1:{port}"]}}]
"""


def api(base: str, path: str, **query: str) -> dict:
    url = f"{base}{path}?{urllib.parse.urlencode(query)}" if query else base + path
    with urllib.request.urlopen(url, timeout=10) as response:
        answer = json.load(response)
    assert answer["status"] == "success", answer
    return answer["data"]


@pytest.fixture
def prometheus_scraping(redis_server, tmp_path):
    binary = shutil.which("prometheus")
    if binary is None:
        pytest.skip(MISSING)
    server = LiveServer(tmp_path / "server", ["--broker", redis_server.url])
    process = None
    try:
        server.wait_ready()
        (tmp_path / "prometheus.yml").write_text(CONFIG.format(rules=RULES, port=server.port))
        port = free_port()
        log = open(tmp_path / "prometheus.log", "w")
        process = subprocess.Popen([binary, f"--config.file={tmp_path / 'prometheus.yml'}",
                                    f"--storage.tsdb.path={tmp_path / 'tsdb'}",
                                    f"--web.listen-address=127.0.0.1:{port}", "--log.level=warn"],
                                   stdout=log, stderr=subprocess.STDOUT)
        base = f"http://127.0.0.1:{port}"
        deadline = time.monotonic() + 60
        while True:  # ready, and three scrapes in: rate() over them has data
            assert process.poll() is None, (tmp_path / "prometheus.log").read_text()
            try:
                scrapes = api(base, "/api/v1/query", query="count_over_time(up[1m])")["result"]
                if scrapes and float(scrapes[0]["value"][1]) >= 3:
                    break
            except OSError:
                pass
            assert time.monotonic() < deadline, (tmp_path / "prometheus.log").read_text()
            time.sleep(0.5)
        yield base
    finally:
        if process is not None:
            process.terminate()
            process.wait(10)
        server.stop()


def test_every_panel_has_data_and_every_rule_evaluates_on_a_fresh_server(prometheus_scraping):
    base = prometheus_scraping
    [up] = api(base, "/api/v1/query", query="up")["result"]
    assert up["value"][1] == "1"  # the scrape itself works (loopback may read /metrics)
    empty = []
    for panel in json.loads(DASHBOARD.read_text())["panels"]:
        for target in panel["targets"]:
            if not api(base, "/api/v1/query", query=target["expr"])["result"]:
                empty.append(f"{panel['title']}: {target['expr']}")
    assert empty == [], "panels without data on a fresh server:\n" + "\n".join(empty)
    deadline = time.monotonic() + 10
    while True:  # every rule evaluated at least once since it was loaded
        rules = [rule for group in api(base, "/api/v1/rules")["groups"] for rule in group["rules"]]
        if rules and not any(rule.get("lastEvaluation", "0001").startswith("0001") for rule in rules):
            break
        assert time.monotonic() < deadline, rules
        time.sleep(0.5)
    assert len(rules) >= 8
    assert [(r["name"], r.get("lastError")) for r in rules if r["health"] != "ok"] == []
    firing = {rule["name"] for rule in rules for alert in rule.get("alerts", []) if alert["state"] == "firing"}
    assert not firing & {"JaxplayNoWorkers", "JaxplayDependencyDown", "JaxplayNotScraped"}, firing
