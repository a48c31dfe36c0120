"""Accelerators on a worker host: which device nodes a slot owns, its settings, and the refusal to fall back.

Placement: by default one slot per GPU, each sandbox seeing only its own
``/dev/nvidiaN`` (plus the shared control nodes), so one run at a time uses
a GPU. ``--gpu-slots all`` makes one slot that owns every GPU of the host, to
show sharding across real devices. TPU hosts take the same path with their
``/dev/accel*`` nodes (and ``/dev/vfio`` where present).

Memory: XLA's client would preallocate 75% of the card; a run's spare must
fit beside the running run, so preallocation is off and the run's pool is
bounded by ``--gpu-memory-fraction`` of the card.

Never silently on the CPU: a host that has accelerator nodes but whose
probe finds only the CPU backend refuses to start, naming the cause, unless
the operator asked for CPU-only on purpose (``--allow-cpu-fallback``).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from jaxplay.host_devices import nvidia_gpus, tpu_chips, visible_nvidia_gpus
from jaxplay.settings import Settings

NVIDIA_SHARED_NODES = ("/dev/nvidiactl", "/dev/nvidia-uvm", "/dev/nvidia-uvm-tools")
TPU_SHARED_NODES = ("/dev/vfio/vfio",)
# CUDA and the TPU runtime enumerate PCI devices through sysfs; exposed read-only to accelerator slots.
MAX_RUNS_PER_GPU = 16
ACCELERATOR_SYSFS = ("/sys/devices", "/sys/bus", "/sys/class")


def accelerator_nodes(dev: Path = Path("/dev")) -> list[str]:
    return nvidia_gpus(dev) + tpu_chips(dev)


def slot_devices(settings: Settings, dev: Path = Path("/dev"),
                 environ: dict[str, str] | None = None) -> list[tuple[str, ...]]:
    """The device nodes of each slot: one tuple per slot; empty tuples for a CPU worker.

    An operator's ``CUDA_VISIBLE_DEVICES`` (in the worker's environment) is honoured: indices pick
    the GPUs the slots get, an empty value hides every GPU, and any other form (UUIDs, MIG
    instances) gives one slot with every GPU node, to which the value is passed on as it is.
    """
    gpus = visible_nvidia_gpus(dev, environ)
    if gpus is None:
        return [tuple(nvidia_gpus(dev))] * runs_per_accelerator(settings)
    nodes = gpus + tpu_chips(dev)
    if not nodes:
        return [() for _ in range(max(1, settings.slots))]
    sharing = runs_per_accelerator(settings)
    if settings.gpu_slots == "all":
        return [tuple(nodes)] * (1 if tpu_chips(dev) else sharing)
    return [(node,) for node in nodes for _ in range(sharing if "nvidia" in node else 1)]


def runs_per_accelerator(settings: Settings) -> int:
    """``--runs-per-gpu``: slots that share each GPU (TPU chips are never shared: one process owns a chip)."""
    if not 1 <= settings.runs_per_gpu <= MAX_RUNS_PER_GPU:
        raise ValueError(f"--runs-per-gpu must be between 1 and {MAX_RUNS_PER_GPU}; it is {settings.runs_per_gpu}")
    return settings.runs_per_gpu


def device_nodes(devices: tuple[str, ...]) -> list[str]:
    """What a slot that owns ``devices`` may see: those and the shared control nodes they need."""
    if not devices:
        return []
    shared = NVIDIA_SHARED_NODES if any("nvidia" in d for d in devices) else TPU_SHARED_NODES
    return [*devices, *(node for node in shared if os.path.exists(node))]


def gpu_environment(devices: tuple[str, ...], settings: Settings,
                    environ: dict[str, str] | None = None) -> dict[str, str]:
    environ = os.environ if environ is None else environ
    nvidia = [d.removeprefix("/dev/nvidia") for d in devices if d.startswith("/dev/nvidia")]
    tpu = [d.removeprefix("/dev/accel") for d in devices if d.startswith("/dev/accel")]
    env: dict[str, str] = {}
    if nvidia:
        visible = environ.get("CUDA_VISIBLE_DEVICES", "")
        passed_on = visible if visible and not all(v.strip().isdigit() for v in visible.split(",")) else None
        # Allocator warnings and XLA's error-level log lines (an out-of-memory's autotuner trace) are not a
        # result: the exception the program sees carries the cause.
        env |= {"CUDA_VISIBLE_DEVICES": passed_on or ",".join(nvidia), "XLA_PYTHON_CLIENT_PREALLOCATE": "false",
                "XLA_PYTHON_CLIENT_MEM_FRACTION": f"{settings.gpu_memory_fraction / settings.runs_per_gpu:.4g}",
                "TF_CPP_MIN_LOG_LEVEL": "3"}
    if tpu:
        env |= {"TPU_VISIBLE_CHIPS": ",".join(tpu)}
    return env


def backend_failure_cause(platform: str, errors: dict[str, str], plugins: list[str], asked: str) -> str:
    """The real reason JAX did not start ``platform`` (``cuda`` or ``tpu``), as one line an operator can act
    on: a missing plugin, or the plugin's own start-up error, not JAX's later "Unknown backend"."""
    if platform == "cuda" and not any(p.startswith("xla_cuda") for p in plugins):
        return ("no CUDA plugin for JAX is installed in the worker's Python "
                "(pip install 'jax[cuda13]', or 'jax[cuda12]' for a CUDA 12 driver)")
    cause = errors.get(platform) or errors.get("gpu" if platform == "cuda" else platform) or asked
    first = next((line.strip() for line in cause.splitlines() if line.strip()), cause)
    return f"{platform}: {first[:400]}"


def fallback_refusal(probe: dict[str, Any], devices: tuple[str, ...], allow_cpu_fallback: bool) -> str | None:
    """Why this worker must not start, or None: accelerator nodes exist but JAX found only the CPU."""
    if not devices or probe.get("backend") != "cpu" or allow_cpu_fallback:
        return None
    kind = "GPU" if any("nvidia" in d for d in devices) else "TPU"
    cause = probe.get("backend_error") or (
        f"no {kind}-enabled jaxlib is installed (for NVIDIA: pip install 'jax[cuda13]')")
    return (f"This host has {kind} device nodes ({', '.join(devices)}) but JAX started only its CPU backend: "
            f"{cause}. Fix that, or start the worker with --allow-cpu-fallback to serve CPU runs on purpose.")
