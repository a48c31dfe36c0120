"""The Kubernetes overlays as Kubernetes would get them: ``kubectl kustomize`` of each, parsed.

Shared by the tests/unit/test_deploy_*.py files (the ``rendered`` fixture in tests/unit/conftest.py renders
once per session). Besides the shipped overlays, two that only the tests compose: dev and production with
KEDA in place of the HPA. The production overlay's secrets.env is the example's, filled in.
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path
from typing import Any

import yaml

KUBE = Path(__file__).resolve().parents[1] / "deploy" / "kubernetes"
KEDA_OVERLAY = """apiVersion: kustomize.config.k8s.io/v1beta1
kind: Kustomization
namespace: jaxplay
resources:
  - ../{base}
components:
  - ../../components/keda-autoscaling
"""
OVERLAYS = ("dev", "production", "keda", "keda-production")
# The overlays that bundle Redis and PostgreSQL (components/bundled-*).
BUNDLING = ("dev", "keda")
MISSING_KUBECTL = "Rendering the overlays needs kubectl (Debian package 'kubectl'; `make test` installs it)"


def render_all(kubectl: str, workdir: Path) -> dict[str, list[dict[str, Any]]]:
    tree = workdir / "kubernetes"
    shutil.copytree(KUBE, tree)
    production = tree / "overlays" / "production"
    example = (production / "secrets.env.example").read_text()
    (production / "secrets.env").write_text(example.replace("=\n", "=filled-in-by-the-operator\n"))
    for name, base in (("keda", "dev"), ("keda-production", "production")):
        (tree / "overlays" / name).mkdir()
        (tree / "overlays" / name / "kustomization.yaml").write_text(KEDA_OVERLAY.format(base=base))
    outputs = {}
    for overlay in OVERLAYS:
        result = subprocess.run([kubectl, "kustomize", str(tree / "overlays" / overlay)], capture_output=True,
                                text=True, timeout=120)
        assert result.returncode == 0, result.stderr
        outputs[overlay] = [doc for doc in yaml.safe_load_all(result.stdout) if doc]
    return outputs


def named(docs: list[dict[str, Any]], kind: str) -> dict[str, dict[str, Any]]:
    return {d["metadata"]["name"]: d for d in docs if d["kind"] == kind}


def pod_templates(docs: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """Name -> pod template of every Deployment and StatefulSet."""
    return {d["metadata"]["name"]: d["spec"]["template"] for d in docs if d["kind"] in ("Deployment", "StatefulSet")}


def selects(selector: dict[str, Any], labels: dict[str, str]) -> bool:
    """A Kubernetes label selector (matchLabels and matchExpressions) against a pod's labels."""
    if not selector.get("matchLabels", {}).items() <= labels.items():
        return False
    for expression in selector.get("matchExpressions", []):
        key, operator, values = expression["key"], expression["operator"], expression.get("values", [])
        held = {"In": key in labels and labels[key] in values, "NotIn": labels.get(key) not in values,
                "Exists": key in labels, "DoesNotExist": key not in labels}[operator]
        if not held:
            return False
    return True


def quantity_bytes(text: str) -> int:
    """A Kubernetes memory quantity ("512Mi", "1G") or a Redis one ("384mb", "1gb") in bytes."""
    units = {"ki": 1 << 10, "mi": 1 << 20, "gi": 1 << 30, "k": 1000, "m": 1000**2, "g": 1000**3,
             "kb": 1 << 10, "mb": 1 << 20, "gb": 1 << 30}
    lowered = text.strip().lower()
    for unit in sorted(units, key=len, reverse=True):
        if lowered.endswith(unit):
            return int(float(lowered[: -len(unit)]) * units[unit])
    return int(lowered)
