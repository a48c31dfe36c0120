"""The shipped alerts (deploy/prometheus/jaxplay-alerts.yml and the prometheus-operator component's
PrometheusRule): valid, tested with ``promtool test rules``, built only from metrics the server exports, each
with a runbook in docs/operations.md."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

from jaxplay.server.app import create_app
from jaxplay.settings import Settings
from tests.deploy_rendering import named

ROOT = Path(__file__).resolve().parents[2]
RULES = ROOT / "deploy" / "prometheus" / "jaxplay-alerts.yml"
RULE_TESTS = ROOT / "deploy" / "prometheus" / "jaxplay-alerts.test.yml"
OPERATOR_RULE = ROOT / "deploy" / "kubernetes" / "components" / "prometheus-operator" / "prometheusrule.yaml"
OPERATIONS = ROOT / "docs" / "operations.md"
REQUIRED = {"JaxplayDependencyDown", "JaxplayRedisMemoryHigh", "JaxplayRedisMemoryFull", "JaxplayRunsWaitingLong",
            "JaxplayRunsCrashing", "JaxplayNoWorkers"}
MISSING_PROMTOOL = "Testing the alert rules needs promtool (Debian package 'prometheus'; `make test` installs it)"


def rules() -> list[dict]:
    return [rule for group in yaml.safe_load(RULES.read_text())["groups"] for rule in group["rules"]]


def promtool(*args: str) -> subprocess.CompletedProcess[str]:
    binary = shutil.which("promtool")
    if binary is None:
        pytest.skip(MISSING_PROMTOOL)
    return subprocess.run([binary, *args], capture_output=True, text=True, timeout=120, cwd=RULES.parent)


def test_the_rules_are_valid_prometheus_rules():
    result = promtool("check", "rules", RULES.name)
    assert result.returncode == 0, result.stdout + result.stderr
    assert f"SUCCESS: {len(rules())} rules found" in result.stdout


def test_the_rules_pass_their_promtool_unit_tests():
    result = promtool("test", "rules", RULE_TESTS.name)
    assert result.returncode == 0 and "SUCCESS" in result.stdout, result.stdout + result.stderr


def test_every_alert_the_issue_asks_for_fires_in_a_unit_test():
    alerts = {rule["alert"] for rule in rules()}
    assert REQUIRED <= alerts
    fired = set()
    for case in yaml.safe_load(RULE_TESTS.read_text())["tests"]:
        fired |= {check["alertname"] for check in case.get("alert_rule_test", []) if check["exp_alerts"]}
    assert fired == alerts  # and none that is never seen firing


def test_the_operator_rule_holds_the_same_groups(rendered):
    rule = yaml.safe_load(OPERATOR_RULE.read_text())
    assert rule["spec"]["groups"] == yaml.safe_load(RULES.read_text())["groups"]
    assert rule["metadata"]["labels"]["release"]  # what kube-prometheus-stack's ruleSelector matches
    rendered_rule = named(rendered["production"], "PrometheusRule")["jaxplay-alerts"]
    assert rendered_rule["spec"]["groups"] == rule["spec"]["groups"]
    monitor = named(rendered["production"], "ServiceMonitor")["jaxplay-server"]
    assert rendered_rule["metadata"]["labels"]["release"] == monitor["metadata"]["labels"]["release"]


def test_the_rules_use_only_metrics_the_server_exports(tmp_path):
    app = create_app(Settings(data_dir=tmp_path, local_workers=0, expected_backends="cpu"))
    exported = set(re.findall(r"^# TYPE (\S+) ", app.state.playground.metrics.scrape().decode(), flags=re.M))
    used = {name for rule in rules() for name in re.findall(r"\bjaxplay_[a-z_]+", rule["expr"])}
    assert {"jaxplay_dependency_up", "jaxplay_broker_memory_used_bytes", "jaxplay_broker_memory_max_bytes",
            "jaxplay_queue_oldest_age_seconds", "jaxplay_runs_total", "jaxplay_workers_connected"} <= used
    assert used <= exported, used - exported


def test_every_alert_has_a_runbook_in_the_operations_doc():
    headings = {re.sub(r"[^a-z0-9 -]", "", h.strip().lower()).replace(" ", "-")
                for h in re.findall(r"^#+ (.+)$", OPERATIONS.read_text(), flags=re.M)}
    for rule in rules():
        runbook = rule["annotations"]["runbook"]
        page, _, anchor = runbook.partition("#")
        assert (ROOT / page).resolve() == OPERATIONS and anchor == rule["alert"].lower(), runbook
        assert anchor in headings, f"docs/operations.md has no section {rule['alert']}"
        assert rule["labels"]["severity"] in ("warning", "critical")
