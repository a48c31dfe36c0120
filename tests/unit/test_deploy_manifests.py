"""deploy/ validated offline: the Kubernetes manifests parse and hold together, and name what the app has.

No cluster is needed: every YAML file is parsed, every path a kustomization
names exists, probes point at routes the app really serves, container args
are flags ``jaxplay`` really accepts, and every metric the HPA, the adapter
rules and the Grafana dashboard use is one the server really exports.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from urllib.parse import urlsplit

import pytest
import yaml
from starlette.routing import Route

from jaxplay.cli.commands import build_parser
from jaxplay.server.app import create_app
from jaxplay.settings import Settings

DEPLOY = Path(__file__).resolve().parents[2] / "deploy"
KUBE = DEPLOY / "kubernetes"
# Files an operator provides (from the .example beside them), never committed.
OPERATOR_FILES = {"secrets.env"}


def documents(path: Path) -> list[dict]:
    return [d for d in yaml.safe_load_all(path.read_text()) if d is not None]


def all_manifests() -> list[dict]:
    found = []
    for path in sorted(KUBE.rglob("*.yaml")):
        for doc in documents(path):
            # Not manifests: kustomize's own files and the Prometheus Adapter's rules.
            if doc.get("kind") not in ("Kustomization", "Component") and not {"externalRules", "nameReference"} & set(doc):
                found.append(doc)
    return found


def by_kind(kind: str) -> dict[str, dict]:
    return {d["metadata"]["name"]: d for d in all_manifests() if d["kind"] == kind}


def pod_spec(deployment: dict) -> dict:
    return deployment["spec"]["template"]["spec"]


@pytest.fixture(scope="module")
def app_paths(tmp_path_factory) -> set[str]:
    app = create_app(Settings(data_dir=tmp_path_factory.mktemp("app"), local_workers=0))
    return {route.path for route in app.routes if isinstance(route, Route)}


@pytest.fixture(scope="module")
def exported_metrics(tmp_path_factory) -> set[str]:
    app = create_app(Settings(data_dir=tmp_path_factory.mktemp("metrics"), local_workers=0))
    text = app.state.playground.metrics.scrape().decode()
    return set(re.findall(r"^# TYPE (\S+) ", text, flags=re.M))


def test_every_file_parses_and_every_manifest_has_kind_name_and_api_version():
    manifests = all_manifests()
    assert len(manifests) >= 10
    for doc in manifests:
        assert doc.get("apiVersion") and doc.get("kind") and doc["metadata"].get("name"), doc


def test_every_path_a_kustomization_names_exists():
    kustomizations = list(KUBE.rglob("kustomization.yaml"))
    assert {p.parent.name for p in kustomizations} >= {"base", "dev", "production", "gpu-worker", "gvisor"}
    for path in kustomizations:
        spec = documents(path)[0]
        named = [*spec.get("resources", []), *spec.get("components", [])]
        for generator in spec.get("secretGenerator", []):
            named += [f for f in generator.get("envs", []) if f not in OPERATOR_FILES]
            assert all((path.parent / f"{f}.example").exists() for f in generator.get("envs", []) if f in OPERATOR_FILES)
        for name in named:
            assert (path.parent / name).exists(), f"{path} names {name}, which does not exist"


def test_the_server_probes_paths_the_app_serves(app_paths):
    server = by_kind("Deployment")["jaxplay-server"]
    container = pod_spec(server)["containers"][0]
    assert container["livenessProbe"]["httpGet"]["path"] == "/healthz"
    assert container["readinessProbe"]["httpGet"]["path"] == "/readyz"
    for probe in ("livenessProbe", "readinessProbe", "startupProbe"):
        assert container[probe]["httpGet"]["path"] in app_paths
    service = by_kind("Service")["jaxplay-server"]
    assert service["spec"]["selector"] == server["spec"]["template"]["metadata"]["labels"]


def test_container_args_are_flags_jaxplay_accepts():
    parser = build_parser()
    for name, deployment in by_kind("Deployment").items():
        container = pod_spec(deployment)["containers"][0]
        if container.get("args", [None])[0] != "jaxplay":
            continue
        parser.parse_args(container["args"][1:])  # exits (fails the test) on an unknown flag
        env = {e["name"] for e in container.get("env", [])}
        assert "JAXPLAY_WORKER_TOKEN" in env, name


def test_the_gpu_worker_asks_for_exactly_one_gpu():
    gpu = by_kind("Deployment")["jaxplay-worker-gpu"]
    assert pod_spec(gpu)["containers"][0]["resources"]["limits"]["nvidia.com/gpu"] == 1


@pytest.mark.parametrize("name", ["jaxplay-worker-cpu", "jaxplay-worker-gpu"])
def test_workers_get_what_bubblewrap_needs_and_nothing_more(name):
    spec = pod_spec(by_kind("Deployment")[name])
    context = spec["containers"][0]["securityContext"]
    assert context["capabilities"] == {"drop": ["ALL"], "add": ["SYS_ADMIN", "SETUID", "SETGID"]}
    assert context["privileged"] is False and context["allowPrivilegeEscalation"] is False
    assert context["readOnlyRootFilesystem"] is True
    assert spec["hostUsers"] is False and spec["automountServiceAccountToken"] is False


def test_workers_may_reach_only_the_server_and_dns():
    policy = by_kind("NetworkPolicy")["jaxplay-workers-reach-only-the-server"]["spec"]
    assert policy["podSelector"]["matchLabels"] == {"app.kubernetes.io/name": "jaxplay-worker"}
    assert sorted(policy["policyTypes"]) == ["Egress", "Ingress"] and policy["ingress"] == []
    server_rule, dns_rule = policy["egress"]
    assert server_rule["to"] == [{"podSelector": {"matchLabels": {"app.kubernetes.io/name": "jaxplay-server"}}}]
    assert server_rule["ports"] == [{"protocol": "TCP", "port": 8001}]  # the worker listener, not the pages
    assert {p["port"] for p in dns_rule["ports"]} == {53}
    for deployment in by_kind("Deployment").values():
        labels = deployment["spec"]["template"]["metadata"]["labels"]
        if deployment["metadata"]["name"].startswith("jaxplay-worker"):
            assert labels["app.kubernetes.io/name"] == "jaxplay-worker"


def test_workers_dial_the_servers_worker_listener_which_the_service_exposes():
    parser = build_parser()
    server = pod_spec(by_kind("Deployment")["jaxplay-server"])["containers"][0]
    serve = parser.parse_args(server["args"][1:])
    assert serve.worker_host == "0.0.0.0" and serve.worker_port != serve.port
    assert {"name": "workers", "containerPort": serve.worker_port} in server["ports"]
    service = by_kind("Service")["jaxplay-server"]
    assert {"name": "workers", "port": serve.worker_port, "targetPort": "workers"} in service["spec"]["ports"]
    for name in ("jaxplay-worker-cpu", "jaxplay-worker-gpu"):
        args = parser.parse_args(pod_spec(by_kind("Deployment")[name])["containers"][0]["args"][1:])
        url = urlsplit(args.server)
        assert (url.scheme, url.hostname, url.port, url.path) == ("ws", "jaxplay-server", serve.worker_port,
                                                                  "/worker"), name


def test_the_hpa_scales_cpu_workers_on_waiting_and_running_runs_the_server_exports(exported_metrics):
    hpa = by_kind("HorizontalPodAutoscaler")["jaxplay-worker-cpu"]["spec"]
    assert hpa["scaleTargetRef"]["name"] in by_kind("Deployment")
    metric = hpa["metrics"][0]["external"]["metric"]
    rules = documents(KUBE / "monitoring" / "prometheus-adapter-rules.yaml")[0]["externalRules"]
    [rule] = [rule for rule in rules if rule["name"]["as"] == metric["name"]]
    used = set(re.findall(r"\bjaxplay_[a-z_]+", rule["seriesQuery"] + rule["metricsQuery"]))
    assert used == {"jaxplay_queue_depth", "jaxplay_slots_busy"} and used <= exported_metrics
    # Every replica reports the one shared queue: combined with max, never summed (that would count it N times).
    assert "max(jaxplay_queue_depth" in rule["metricsQuery"] and "sum(jaxplay_slots_busy" in rule["metricsQuery"]
    # One run per slot, two slots per CPU worker pod.
    worker_args = pod_spec(by_kind("Deployment")["jaxplay-worker-cpu"])["containers"][0]["args"]
    assert hpa["metrics"][0]["external"]["target"]["averageValue"] == worker_args[worker_args.index("--slots") + 1]


def test_bundled_datastores_say_to_use_a_managed_one():
    assert "USE YOUR MANAGED POSTGRESQL IN PRODUCTION" in (KUBE / "components/bundled-postgres/postgres.yaml").read_text()
    assert "USE YOUR MANAGED REDIS IN PRODUCTION" in (KUBE / "components/bundled-redis/redis.yaml").read_text()


def test_server_replicas_share_a_broker_and_a_session_key():
    server = by_kind("Deployment")["jaxplay-server"]
    container = pod_spec(server)["containers"][0]
    assert server["spec"]["replicas"] >= 2
    assert {"JAXPLAY_BROKER", "JAXPLAY_DATABASE_URL"} <= {e["name"] for e in container["env"]}
    data_dir = container["args"][container["args"].index("--data-dir") + 1]
    assert {"mountPath": f"{data_dir}/session.key", "name": "secrets", "subPath": "session-key",
            "readOnly": True} in container["volumeMounts"]
    example = (KUBE / "overlays/production/secrets.env.example").read_text()
    dev = documents(KUBE / "overlays/dev/kustomization.yaml")[0]["secretGenerator"][0]["literals"]
    for key in ("worker-token", "metrics-token", "database-url", "broker-url", "session-key"):
        assert f"{key}=" in example and any(line.startswith(f"{key}=") for line in dev)


def test_the_server_behind_its_ingress_trusts_only_the_proxy_and_names_its_host():
    from jaxplay.server.clients.hosts import AllowedHosts
    from jaxplay.server.clients.proxies import parse_networks

    container = pod_spec(by_kind("Deployment")["jaxplay-server"])["containers"][0]
    env = {e["name"]: e.get("value") for e in container["env"]}
    networks = parse_networks(env["JAXPLAY_TRUSTED_PROXIES"])
    assert networks and all(n.prefixlen > 0 for n in networks)  # some proxies, never the whole internet
    hosts = AllowedHosts(env["JAXPLAY_ALLOWED_HOSTS"], "0.0.0.0")
    assert not hosts.any and not hosts.allows("evil.example") and hosts.allows("10.1.2.3:8000")


def test_the_grafana_dashboard_shows_only_metrics_the_server_exports(exported_metrics):
    dashboard = json.loads((DEPLOY / "grafana" / "jaxplay-dashboard.json").read_text())
    used = set()
    for panel in dashboard["panels"]:
        for target in panel["targets"]:
            used |= set(re.findall(r"\bjaxplay_[a-z_]+", target["expr"]))
    # A histogram's series are its family name plus _bucket/_count/_sum; a counter's plus _total.
    families = {re.sub(r"_(bucket|count|sum|total)$", "", name) for name in used}
    assert families <= {re.sub(r"_total$", "", name) for name in exported_metrics} | exported_metrics
    assert len(families) >= 17  # every metric the issue lists has a panel
    assert {"jaxplay_dependency_up", "jaxplay_queue_oldest_age_seconds", "jaxplay_broker_memory_used_bytes",
            "jaxplay_broker_memory_max_bytes", "jaxplay_runs_rejected", "jaxplay_sandbox_crashes"} <= families
