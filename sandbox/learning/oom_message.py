"""Out-of-memory errors a person can act on: how much the run asked for, and what the slot has.

XLA reports an exhausted device as ``RESOURCE_EXHAUSTED: Out of memory while
trying to allocate N bytes``. On an accelerator that becomes "Out of GPU
memory: this run asked for 200 GiB; the slot has 78 GiB" (the device's
limit comes from the backend's memory statistics); on the CPU, the run's
memory limit is named instead.
"""

from __future__ import annotations

import re

from jaxplay.sandbox.isolation.limits import format_bytes

ASKED = re.compile(r"allocate (\d+) bytes")
OOM_MESSAGE = (
    "The run used more memory than its limit of {limit}. "
    "Use smaller arrays, fewer intermediate copies, or split the work."
)


def is_out_of_memory(exc: BaseException, message: str) -> bool:
    return isinstance(exc, MemoryError) or ("RESOURCE_EXHAUSTED" in message and "memory" in message.lower())


def device_limit_bytes() -> tuple[str, int] | None:
    """(platform, bytes) of the first accelerator, if the run's backend is one and says its limit."""
    try:
        import jax

        device = jax.devices()[0]
        if device.platform == "cpu":
            return None
        stats = device.memory_stats() or {}
        return device.platform, int(stats.get("bytes_limit") or 0)
    except Exception:  # noqa: BLE001 - a failing backend must not hide the user's own error
        return None


def out_of_memory_text(message: str, memory_limit: str) -> str:
    device = device_limit_bytes()
    asked = ASKED.search(message)
    if device is not None:
        platform, limit = device
        kind = {"gpu": "GPU", "cuda": "GPU", "rocm": "GPU", "tpu": "TPU"}.get(platform, platform.upper())
        text = f"Out of {kind} memory: this run asked for {format_bytes(int(asked.group(1))) if asked else 'more'}"
        text += f"; the slot has {format_bytes(limit)}." if limit else "than the device has."
        return text + " Use smaller arrays or batches, or fewer live intermediates."
    return OOM_MESSAGE.format(limit=memory_limit) + (f" ({message})" if message else "")
