"""Fixtures of the unit tests: the Kubernetes overlays, rendered once for every tests/unit/test_deploy_*.py."""

from __future__ import annotations

import shutil
from typing import Any

import pytest

from tests.deploy_rendering import MISSING_KUBECTL, render_all


@pytest.fixture(scope="session")
def rendered(tmp_path_factory: pytest.TempPathFactory) -> dict[str, list[dict[str, Any]]]:
    kubectl = shutil.which("kubectl")
    if kubectl is None:
        pytest.skip(MISSING_KUBECTL)
    return render_all(kubectl, tmp_path_factory.mktemp("deploy"))
