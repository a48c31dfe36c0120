"""A test double of a GPU host's worker: the real worker and protocol, announcing a ``gpu`` backend.

It is ``jaxplay worker`` itself (the real agent, warm sandboxes and wire
protocol) whose device probe reports one NVIDIA-like device on a ``gpu``
backend; programs run on one virtual CPU device, so they see what one GPU
would give them in number. The topology tests start it beside servers with
and without a CPU worker, so GPU-only, mixed and CPU-only hosts are tested
on machines without a GPU.

    python -m tests.gpu_double --server ws://127.0.0.1:PORT/worker --token TOKEN [--name NAME]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

from jaxplay.sandbox.agent import WorkerAgent
from jaxplay.sandbox.engine.warm_sandbox import WarmSandbox
from jaxplay.settings import Settings

DEVICE_KIND = "NVIDIA H100 80GB HBM3 (test double)"
DEVICE_MEMORY_BYTES = 80 << 30


class GpuDoubleAgent(WorkerAgent):
    async def probe(self, sandbox: WarmSandbox, calibrate: bool = False) -> dict[str, Any]:
        found = await super().probe(sandbox, calibrate)
        return {**found, "backend": "gpu", "device_kind": DEVICE_KIND, "device_count": 1,
                "device_memory_bytes": DEVICE_MEMORY_BYTES, "backend_error": None}


def start(worker_url: str, token: str, name: str = "gpu-double") -> subprocess.Popen[str]:
    """The double as a process of its own, as a GPU host's worker would be."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("JAXPLAY_")}
    return subprocess.Popen([sys.executable, "-m", "tests.gpu_double", "--server", worker_url, "--token", token,
                             "--name", name], cwd=Path(__file__).resolve().parent.parent, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--server", required=True)
    parser.add_argument("--token", required=True)
    parser.add_argument("--name", default="gpu-double")
    args = parser.parse_args()
    settings = Settings.from_env(cpu_devices=1, slots=1)
    asyncio.run(GpuDoubleAgent(settings, args.server, args.token, args.name).serve_forever())


if __name__ == "__main__":
    main()
