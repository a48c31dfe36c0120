"""The Dockerfile's stages and docker-compose.yml, checked without a Docker engine:
the compose file is validated by the compose client itself, and the Dockerfile is
read stage by stage (its steps are run outside Docker by test_installed_wheel.py)."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from dataclasses import dataclass, field

import pytest
import yaml

from tests.live_server import PROJECT_ROOT

DOCKERFILE = PROJECT_ROOT / "Dockerfile"


@dataclass
class Stage:
    base: str
    name: str
    instructions: list[tuple[str, str]] = field(default_factory=list)

    def runs(self) -> str:
        return "\n".join(args for op, args in self.instructions if op == "RUN")

    def copies(self) -> list[str]:
        return [args for op, args in self.instructions if op == "COPY"]


def dockerfile_stages(text: str) -> list[Stage]:
    """Instructions per stage, continuation lines joined, comments dropped."""
    joined = re.sub(r"\\\n\s*", " ", "\n".join(line for line in text.splitlines() if not line.lstrip().startswith("#")))
    stages: list[Stage] = []
    for line in filter(None, (raw.strip() for raw in joined.splitlines())):
        op, _, args = line.partition(" ")
        if op.upper() == "FROM":
            match = re.fullmatch(r"(\S+)(?:\s+AS\s+(\S+))?", args.strip(), re.IGNORECASE)
            assert match, line
            stages.append(Stage(match.group(1), match.group(2) or str(len(stages))))
        else:
            stages[-1].instructions.append((op.upper(), args.strip()))
    return stages


@pytest.fixture(scope="module")
def stages() -> dict[str, Stage]:
    return {stage.name: stage for stage in dockerfile_stages(DOCKERFILE.read_text())}


def test_node_stage_builds_the_page_with_a_supported_node(stages):
    page = stages["page"]
    match = re.fullmatch(r"node:(\d+)(?:\.(\d+))?\S*", page.base)
    assert match, page.base
    major = int(match.group(1))
    assert major >= 22 or (major == 20 and int(match.group(2) or 0) >= 19), page.base
    assert "npm ci" in page.runs() and "npm run build" in page.runs()


def test_wheel_stage_packs_the_built_page(stages):
    wheel = stages["wheel"]
    assert any(c.startswith("--from=page") and "frontend/dist" in c for c in wheel.copies())
    assert "python -m build" in wheel.runs()


def test_runtime_stages_install_the_wheel_and_bubblewrap_without_node(stages):
    cpu, gpu = stages["cpu"], stages["gpu"]
    assert re.fullmatch(r"python:3\.1[1-9]\S*-slim\S*", cpu.base), cpu.base
    assert re.fullmatch(r"nvidia/cuda:\S+-runtime-\S+", gpu.base), gpu.base
    for stage in (cpu, gpu):
        assert any(c.startswith("--from=wheel") for c in stage.copies())
        assert "bubblewrap" in stage.runs() and re.search(r"pip install .*jaxplay-\*\.whl", stage.runs())
        assert "nodejs" not in stage.runs() and "npm" not in stage.runs()
    assert '"jax[cuda13]==0.12.0.1"' in gpu.runs()  # the newest JAX, as a CPU host offers it


def test_the_default_target_is_the_cpu_image(stages):
    assert list(stages)[-1] == "cpu"


def test_every_file_the_dockerfile_copies_exists(stages):
    for stage in stages.values():
        for copy in stage.copies():
            if copy.startswith("--from="):
                continue
            *sources, _target = copy.split()
            for source in sources:
                assert (PROJECT_ROOT / source).exists(), f"{stage.name}: COPY {source}"


def test_build_context_leaves_out_local_builds_and_secrets():
    ignored = set((PROJECT_ROOT / ".dockerignore").read_text().split())
    assert {".git", ".venv", "frontend/node_modules", "frontend/dist", "data"} <= ignored


def compose_command() -> list[str]:
    if shutil.which("docker"):
        probe = subprocess.run(["docker", "compose", "version"], capture_output=True, text=True)
        if probe.returncode == 0:
            return ["docker", "compose"]
    if shutil.which("docker-compose"):
        return ["docker-compose"]
    pytest.skip("no docker compose client here (make test installs Debian's docker-compose)")


def compose_config(*args: str) -> dict:
    command = [*compose_command(), "--project-directory", str(PROJECT_ROOT), "-f",
               str(PROJECT_ROOT / "docker-compose.yml"), *args, "config"]
    result = subprocess.run(command, capture_output=True, text=True, timeout=60, cwd=PROJECT_ROOT,
                            env={**os.environ, "JAXPLAY_WORKER_TOKEN": "test-token"})
    assert result.returncode == 0, result.stderr
    return yaml.safe_load(result.stdout)


def active_services(config: dict, profiles: set[str]) -> set[str]:
    return {name for name, service in config["services"].items()
            if not service.get("profiles") or profiles & set(service["profiles"])}


def test_compose_without_profiles_runs_server_and_cpu_worker_only():
    config = compose_config()
    assert active_services(config, set()) == {"server", "cpu-worker"}
    server = config["services"]["server"]
    assert server["environment"]["JAXPLAY_WORKER_TOKEN"] == "test-token"
    assert "--no-local-worker" in server["command"]
    listener = server["command"][server["command"].index("--worker-port") + 1]
    worker = config["services"]["cpu-worker"]["command"]
    assert worker[worker.index("--server") + 1] == f"ws://server:{listener}/worker"


def test_compose_gpu_profile_adds_a_worker_with_an_nvidia_reservation():
    config = compose_config("--profile", "gpu")
    assert active_services(config, {"gpu"}) == {"server", "cpu-worker", "gpu-worker"}
    gpu = config["services"]["gpu-worker"]
    [device] = gpu["deploy"]["resources"]["reservations"]["devices"]
    assert device["driver"] == "nvidia" and "gpu" in device["capabilities"]
    assert gpu["build"]["target"] == "gpu"
    assert "ws://server:8001/worker" in gpu["command"]


def test_compose_refuses_to_start_without_a_worker_token():
    command = [*compose_command(), "-f", str(PROJECT_ROOT / "docker-compose.yml"), "config"]
    env = {k: v for k, v in os.environ.items() if k != "JAXPLAY_WORKER_TOKEN"}
    result = subprocess.run(command, capture_output=True, text=True, timeout=60, cwd=PROJECT_ROOT, env=env)
    assert result.returncode != 0 and "JAXPLAY_WORKER_TOKEN" in result.stderr
