"""What this worker offers: backend, device kind and count, versions.

Runs in a sandboxed child (the zygote itself must never initialize a
backend), so it sees exactly the devices a run will see.
"""

from __future__ import annotations

import platform

from jaxplay.sandbox.engine import libraries
from jaxplay.sandbox.output import events


def describe() -> dict:
    import jax
    import jaxlib

    devices = jax.devices()
    backend = jax.default_backend()
    client = devices[0].client
    stats = devices[0].memory_stats() if backend != "cpu" else None
    return {
        "backend_error": accelerator_error() if backend == "cpu" else None,
        "device_memory_bytes": int((stats or {}).get("bytes_limit") or 0),
        "type": "probe",
        "backend": backend,
        "device_kind": devices[0].device_kind,
        "device_count": len(devices),
        "jax_version": jax.__version__,
        "jaxlib_version": jaxlib.__version__,
        "platform_version": str(getattr(client, "platform_version", "")) or platform.platform(),
        "libraries": libraries.installed(),
    }


def accelerator_error() -> str | None:
    """Why JAX did not start an accelerator backend on a host that has accelerator nodes."""
    from jaxplay.sandbox.isolation import gpu

    platform = "cuda" if gpu.nvidia_gpus() else "tpu" if gpu.tpu_chips() else None
    if platform is None:
        return None
    import jax

    try:
        jax.devices(platform)
    except RuntimeError as exc:
        return gpu.backend_failure_cause(platform, backend_errors(), installed_plugins(), str(exc))
    return None


def backend_errors() -> dict[str, str]:
    """Why each of JAX's backends failed to start: JAX keeps the real cause (``cuInit(0) failed: ...``)
    and raises only "Unknown backend cuda" when asked for it later."""
    try:
        from jax._src import xla_bridge

        return {str(k): str(v) for k, v in getattr(xla_bridge, "_backend_errors", {}).items()}
    except ImportError:
        return {}


def installed_plugins() -> list[str]:
    """The PJRT plugins JAX discovers (``jax_plugins.xla_cuda13``, ...), by module name."""
    try:
        import pkgutil

        import jax_plugins

        return sorted(m.name for m in pkgutil.iter_modules(jax_plugins.__path__))
    except ImportError:
        return []


def report(calibrate: bool) -> None:
    """The devices; with ``calibrate`` also their measured peak (``device_peak``)."""
    description = describe()
    if calibrate:
        from jaxplay.sandbox.engine import calibration

        try:
            description["device_peak"] = calibration.measure()
        except Exception as exc:  # noqa: BLE001 - a worker without a roofline still serves runs
            description["device_peak_error"] = f"{type(exc).__name__}: {exc}"[:500]
    events.emit(description)
