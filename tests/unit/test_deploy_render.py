"""Every overlay rendered as Kubernetes would get it (`kubectl kustomize`), then validated against the API's
schemas (kubernetes-validate, strict: unknown fields are errors) and checked for what holds them together.

kubernetes-validate ships the schemas of every Kubernetes version it knows inside the package
(kubernetes_validate/kubernetes-json-schema/v1.NN.0-local-strict), so it needs no network. It has
none for custom resources (the Prometheus Operator's ServiceMonitor and PrometheusRule, KEDA's ScaledObject
and TriggerAuthentication): those are checked here by what they must reference. What keeps the service up
(disruption budgets, spread, drains) is in test_deploy_resilience.py; who may reach the datastores and how
Redis is bounded and locked, in test_deploy_datastores.py.
"""

from __future__ import annotations

import base64
from urllib.parse import urlsplit

import pytest

from jaxplay.server.runs.broker_keys import queue_key
from tests.deploy_rendering import OVERLAYS, named

kubernetes_validate = pytest.importorskip("kubernetes_validate", reason="the test extra installs kubernetes-validate")

# The oldest Kubernetes docs/deploy.md supports (pod user namespaces, procMount).
KUBERNETES_VERSION = "1.33.0"
CUSTOM_KINDS = {"ServiceMonitor", "PrometheusRule", "ScaledObject", "TriggerAuthentication"}


@pytest.mark.parametrize("overlay", OVERLAYS)
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
    assert {"Namespace", "Deployment", "Service", "Secret", "NetworkPolicy", "PodDisruptionBudget"} <= kinds


@pytest.mark.parametrize("overlay", OVERLAYS)
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
    """(secret name, key) for every secretKeyRef, secret volume, ServiceMonitor credential and KEDA secretTargetRef
    in a document."""
    if isinstance(value, dict):
        if parent_key in ("secretKeyRef", "credentials", "bearerTokenSecret", "secretTargetRef"):
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


@pytest.mark.parametrize("overlay", ["keda", "keda-production"])
def test_keda_scales_workers_on_the_brokers_own_queue_and_replaces_the_hpa(rendered, overlay):
    docs = rendered[overlay]
    assert not named(docs, "HorizontalPodAutoscaler")  # KEDA owns the HPA it makes: two would fight
    scaled = named(docs, "ScaledObject")["jaxplay-worker-cpu"]
    assert scaled["spec"]["scaleTargetRef"]["name"] in named(docs, "Deployment")
    [redis_trigger] = [t for t in scaled["spec"]["triggers"] if t["type"] == "redis"]
    assert redis_trigger["metadata"]["listName"] == queue_key("cpu")
    # No address, user or password written into the trigger: the TriggerAuthentication has them from the Secret.
    assert not {"address", "host", "port", "username", "password", "enableTLS"} & set(redis_trigger["metadata"])
    auth = named(docs, "TriggerAuthentication")[redis_trigger["authenticationRef"]["name"]]
    [secret] = named(docs, "Secret").values()
    values = {key: base64.b64decode(v).decode() for key, v in secret["data"].items()}
    given = {}
    for ref in auth["spec"]["secretTargetRef"]:
        assert ref["name"] == secret["metadata"]["name"]
        given[ref["parameter"]] = values[ref["key"]]
    assert set(given) == {"address", "username", "password", "tls"}
    # KEDA reads the very Redis the replicas use: the host:port, database and TLS of the secret's broker-url.
    broker = urlsplit(values["broker-url"])
    assert given["address"] == f"{broker.hostname}:{broker.port}"
    assert redis_trigger["metadata"]["databaseIndex"] == broker.path.strip("/")
    assert given["tls"] == ("enable" if broker.scheme == "rediss" else "disable")


def test_the_hpa_is_rendered_where_keda_is_not(rendered):
    for overlay in ("dev", "production"):
        hpa = named(rendered[overlay], "HorizontalPodAutoscaler")["jaxplay-worker-cpu"]
        assert hpa["spec"]["scaleTargetRef"]["name"] in named(rendered[overlay], "Deployment")
