"""What keeps the rendered overlays serving through node drains, rollouts and scale-downs: disruption budgets
for the server and every worker Deployment, server replicas spread over nodes, and workers given the time to
drain their runs."""

from __future__ import annotations

import pytest

from jaxplay.cli.commands import build_parser
from jaxplay.settings import Settings
from tests.deploy_rendering import OVERLAYS, named, pod_templates, selects

# Beyond the run timeout: the sandbox's kill and exit graces (sandbox/engine/warm_sandbox.py: 5 s + 2 s + 5 s), the
# worker's report, and its leaving.
DRAIN_MARGIN_S = 30
PROTECTED = ("jaxplay-server", "jaxplay-worker-cpu", "jaxplay-worker-gpu")


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_every_server_and_worker_deployment_has_exactly_one_disruption_budget(rendered, overlay):
    docs = rendered[overlay]
    budgets = named(docs, "PodDisruptionBudget")
    deployments = {name: t for name, t in pod_templates(docs).items() if name in PROTECTED}
    assert {"jaxplay-server", "jaxplay-worker-cpu"} <= set(deployments)
    if overlay.endswith("production"):
        assert "jaxplay-worker-gpu" in deployments
    for name, template in deployments.items():
        covering = [b for b, pdb in budgets.items() if selects(pdb["spec"]["selector"], template["metadata"]["labels"])]
        # Two budgets over one pod make every eviction of it fail: exactly one.
        assert covering == [name], f"{overlay}: {name} is covered by {covering}"
    for name, pdb in budgets.items():
        spec = pdb["spec"]
        # One at a time, never "all must stay" (which would block every node drain), and a pod that is not
        # ready never holds a drain up.
        assert spec == {"maxUnavailable": 1, "unhealthyPodEvictionPolicy": "AlwaysAllow", "selector": spec["selector"]}
        assert any(selects(spec["selector"], t["metadata"]["labels"]) for t in deployments.values()), name


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_server_replicas_spread_over_nodes_and_roll_without_dropping_one(rendered, overlay):
    server = named(rendered[overlay], "Deployment")["jaxplay-server"]
    assert server["spec"]["replicas"] >= 2
    assert server["spec"]["strategy"]["rollingUpdate"]["maxUnavailable"] == 0
    template = server["spec"]["template"]
    spread = {c["topologyKey"]: c for c in template["spec"]["topologySpreadConstraints"]}
    by_node = spread["kubernetes.io/hostname"]
    assert (by_node["maxSkew"], by_node["whenUnsatisfiable"]) == (1, "DoNotSchedule")
    assert selects(by_node["labelSelector"], template["metadata"]["labels"])
    # Counted per rollout's ReplicaSet, and over the nodes the server may run on (not tainted GPU nodes).
    assert by_node["matchLabelKeys"] == ["pod-template-hash"] and by_node["nodeTaintsPolicy"] == "Honor"
    assert spread["topology.kubernetes.io/zone"]["whenUnsatisfiable"] == "ScheduleAnyway"


def server_run_timeout_s(docs: list[dict]) -> float:
    """The run timeout the server replicas enforce: their flag, else their environment, else the default."""
    container = named(docs, "Deployment")["jaxplay-server"]["spec"]["template"]["spec"]["containers"][0]
    flags = build_parser().parse_args(container["args"][1:])
    env = {e["name"]: e.get("value") for e in container.get("env", [])}
    if flags.run_timeout_s is not None:
        return flags.run_timeout_s
    return float(env.get("JAXPLAY_RUN_TIMEOUT_S") or Settings().run_timeout_s)


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_workers_have_time_to_finish_the_longest_run_when_told_to_stop(rendered, overlay):
    docs = rendered[overlay]
    timeout_s = server_run_timeout_s(docs)
    workers = {n: t for n, t in pod_templates(docs).items() if n.startswith("jaxplay-worker-")}
    assert workers
    for name, template in workers.items():
        grace = template["spec"]["terminationGracePeriodSeconds"]
        assert grace >= timeout_s + DRAIN_MARGIN_S, f"{overlay}: {name} gets {grace} s to drain {timeout_s} s runs"
    cpu = named(docs, "Deployment")["jaxplay-worker-cpu"]
    assert cpu["spec"]["strategy"]["rollingUpdate"] == {"maxSurge": 1, "maxUnavailable": 0}
