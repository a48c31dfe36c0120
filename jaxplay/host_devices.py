"""The accelerators of this host, by their device nodes: what the server and the worker both read.

The worker's slots take these nodes (sandbox/isolation/gpu.py); the server,
which never imports JAX, reads them to know what its own local workers will
offer before they have joined (``gpu`` on a GPU host, else ``cpu``).
"""

from __future__ import annotations

import os
from pathlib import Path

DEV = Path("/dev")


def _numbered(dev: Path, prefix: str) -> list[str]:
    nodes = [p for p in dev.glob(f"{prefix}*") if p.name[len(prefix):].isdigit()]
    return [str(p) for p in sorted(nodes, key=lambda p: int(p.name[len(prefix):]))]


def nvidia_gpus(dev: Path = DEV) -> list[str]:
    """This host's NVIDIA GPU device nodes, in index order (/dev/nvidia0, ...)."""
    return _numbered(dev, "nvidia")


def tpu_chips(dev: Path = DEV) -> list[str]:
    return _numbered(dev, "accel")


def visible_nvidia_gpus(dev: Path = DEV, environ: dict[str, str] | None = None) -> list[str] | None:
    """The GPUs an operator's ``CUDA_VISIBLE_DEVICES`` leaves visible: a subset by index, none for an
    empty value, all of them otherwise; None when the value names devices another way (UUIDs, MIG)."""
    environ = os.environ if environ is None else environ
    gpus = nvidia_gpus(dev)
    visible = environ.get("CUDA_VISIBLE_DEVICES")
    if visible is None or not gpus:
        return gpus
    indices = [v.strip() for v in visible.split(",") if v.strip()]
    if not all(i.isdigit() for i in indices):
        return None
    return [g for g in gpus if g.removeprefix(str(dev / "nvidia")) in indices]


def local_backend(dev: Path = DEV, environ: dict[str, str] | None = None) -> str:
    """The backend a worker on this host offers, as its devices say (its probe has the last word)."""
    visible = visible_nvidia_gpus(dev, environ)
    if visible is None or visible:
        return "gpu"
    return "tpu" if tpu_chips(dev) else "cpu"
