"""Every overlay rendered as Kubernetes would get it (`kubectl kustomize`), then validated against the API's
schemas (kubernetes-validate, strict: unknown fields are errors) and checked for what holds them together.

kubernetes-validate ships the schemas of every Kubernetes version it knows inside the package
(kubernetes_validate/kubernetes-json-schema/v1.NN.0-local-strict), so it needs no network. It has
none for custom resources (the Prometheus Operator's ServiceMonitor, KEDA's ScaledObject): those are
checked here by what they must reference.
"""

from __future__ import annotations

import base64
import shutil
import subprocess
from pathlib import Path
from urllib.parse import urlsplit

import pytest
import yaml

from jaxplay.server.runs.broker_keys import queue_key

kubernetes_validate = pytest.importorskip("kubernetes_validate", reason="the test extra installs kubernetes-validate")

KUBE = Path(__file__).resolve().parents[2] / "deploy" / "kubernetes"
# The oldest Kubernetes docs/deploy.md supports (pod user namespaces, procMount).
KUBERNETES_VERSION = "1.33.0"
CUSTOM_KINDS = {"ServiceMonitor", "ScaledObject"}
# An overlay that only this test composes: the dev overlay with KEDA in place of the HPA.
KEDA_OVERLAY = """apiVersion: kustomize.config.k8s.io/v1beta1
kind: Kustomization
namespace: jaxplay
resources:
  - ../dev
components:
  - ../../components/keda-autoscaling
"""


@pytest.fixture(scope="module")
def rendered(tmp_path_factory) -> dict[str, list[dict]]:
    kubectl = shutil.which("kubectl")
    if kubectl is None:
        pytest.skip("Rendering the overlays needs kubectl (Debian package 'kubectl'; `make test` installs it)")
    tree = tmp_path_factory.mktemp("deploy") / "kubernetes"
    shutil.copytree(KUBE, tree)
    production = tree / "overlays" / "production"
    example = (production / "secrets.env.example").read_text()
    (production / "secrets.env").write_text(example.replace("=\n", "=filled-in-by-the-operator\n"))
    (tree / "overlays" / "keda").mkdir()
    (tree / "overlays" / "keda" / "kustomization.yaml").write_text(KEDA_OVERLAY)
    outputs = {}
    for overlay in ("dev", "production", "keda"):
        result = subprocess.run([kubectl, "kustomize", str(tree / "overlays" / overlay)], capture_output=True,
                                text=True, timeout=120)
        assert result.returncode == 0, result.stderr
        outputs[overlay] = [doc for doc in yaml.safe_load_all(result.stdout) if doc]
    return outputs


def named(docs: list[dict], kind: str) -> dict[str, dict]:
    return {d["metadata"]["name"]: d for d in docs if d["kind"] == kind}


@pytest.mark.parametrize("overlay", ["dev", "production", "keda"])
def test_every_rendered_object_validates_strictly(rendered, overlay):
    kinds = set()
    for doc in rendered[overlay]:
        kinds.add(doc["kind"])
        if doc["kind"] in CUSTOM_KINDS:
            continue
        try:
            kubernetes_validate.validate(doc, KUBERNETES_VERSION, strict=True)
        except kubernetes_validate.ValidationError as error:
            pytest.fail(f"{overlay}: {doc['kind']}/{doc['metadata']['name']}: {'.'.join(map(str, error.path))}: "
                        f"{error.message}")
    assert {"Namespace", "Deployment", "Service", "Secret", "NetworkPolicy"} <= kinds


@pytest.mark.parametrize("overlay", ["dev", "production", "keda"])
def test_every_secret_reference_names_a_rendered_secret_and_key(rendered, overlay):
    """The generator hashes the Secret's name: every reference must carry the same hash, ServiceMonitor's too."""
    docs = rendered[overlay]
    secrets = {name: set(doc.get("data", {})) for name, doc in named(docs, "Secret").items()}
    [generated] = secrets  # one Secret, jaxplay-secrets-<hash>
    assert generated.startswith("jaxplay-secrets-")
    references = []
    for doc in docs:
        references += list(_secret_references(doc))
    assert len(references) >= 6
    for name, key in references:
        assert name in secrets, f"{overlay}: a reference to Secret {name!r}, which is not rendered ({generated})"
        assert key is None or key in secrets[name], f"{overlay}: Secret {name} has no key {key!r}"


def _secret_references(value, parent_key: str = ""):
    """(secret name, key) for every secretKeyRef, secret volume and ServiceMonitor credential in a document."""
    if isinstance(value, dict):
        if parent_key in ("secretKeyRef", "credentials", "bearerTokenSecret"):
            yield value["name"], value.get("key")
        if parent_key == "secret" and "secretName" in value:
            for item in value.get("items", [{"key": None}]):
                yield value["secretName"], item["key"]
        for key, inner in value.items():
            yield from _secret_references(inner, key)
    elif isinstance(value, list):
        for inner in value:
            yield from _secret_references(inner, parent_key)


def test_the_service_monitor_scrapes_the_server_service_and_is_selectable(rendered):
    docs = rendered["production"]
    monitor = named(docs, "ServiceMonitor")["jaxplay-server"]
    assert monitor["metadata"]["namespace"] == "jaxplay"
    assert monitor["metadata"]["labels"]["release"]  # what kube-prometheus-stack's serviceMonitorSelector matches
    service = named(docs, "Service")["jaxplay-server"]
    assert monitor["spec"]["selector"]["matchLabels"].items() <= service["metadata"]["labels"].items()
    [endpoint] = monitor["spec"]["endpoints"]
    assert endpoint["port"] in {p["name"] for p in service["spec"]["ports"]} and endpoint["path"] == "/metrics"
    assert endpoint["authorization"]["credentials"]["key"] == "metrics-token"


@pytest.mark.parametrize("overlay", ["dev", "production"])
def test_the_namespace_admits_the_privileged_workers(rendered, overlay):
    [namespace] = named(rendered[overlay], "Namespace").values()
    assert namespace["metadata"]["labels"]["pod-security.kubernetes.io/enforce"] == "privileged"


def test_keda_scales_workers_on_the_brokers_own_queue_and_replaces_the_hpa(rendered):
    docs = rendered["keda"]
    assert not named(docs, "HorizontalPodAutoscaler")  # KEDA owns the HPA it makes: two would fight
    scaled = named(docs, "ScaledObject")["jaxplay-worker-cpu"]
    assert scaled["spec"]["scaleTargetRef"]["name"] in named(docs, "Deployment")
    [redis_trigger] = [t for t in scaled["spec"]["triggers"] if t["type"] == "redis"]
    assert redis_trigger["metadata"]["listName"] == queue_key("cpu")
    # KEDA reads the very Redis the replicas use: the host:port of the secret's broker-url.
    [secret] = named(docs, "Secret").values()
    broker = urlsplit(base64.b64decode(secret["data"]["broker-url"]).decode())
    assert redis_trigger["metadata"]["address"] == f"{broker.hostname}:{broker.port}"
    assert redis_trigger["metadata"]["databaseIndex"] == broker.path.strip("/")


def test_the_hpa_is_rendered_where_keda_is_not(rendered):
    for overlay in ("dev", "production"):
        hpa = named(rendered[overlay], "HorizontalPodAutoscaler")["jaxplay-worker-cpu"]
        assert hpa["spec"]["scaleTargetRef"]["name"] in named(rendered[overlay], "Deployment")
