"""What this worker offers: backend, device kind and count, versions.

Runs in a sandboxed child (the zygote itself must never initialize a
backend), so it sees exactly the devices a run will see.
"""

from __future__ import annotations

import platform

from sandbox import events, libraries


def describe() -> dict:
    import jax
    import jaxlib

    devices = jax.devices()
    backend = jax.default_backend()
    client = devices[0].client
    return {
        "type": "probe",
        "backend": backend,
        "device_kind": devices[0].device_kind,
        "device_count": len(devices),
        "jax_version": jax.__version__,
        "jaxlib_version": jaxlib.__version__,
        "platform_version": str(getattr(client, "platform_version", "")) or platform.platform(),
        "libraries": libraries.installed(),
    }


def report() -> None:
    events.emit(describe())
