"""Out-of-memory errors a person can act on: which memory ran out, how much the run asked for, and the limit.

Two memories run out, and they read differently:

- the accelerator's: XLA raises ``RESOURCE_EXHAUSTED: Out of memory while
  trying to allocate 200.02GiB with allocator GPU_0_bfc`` (or ``... N bytes``).
  That becomes "Out of GPU memory: this run asked for 200 GiB; the slot has
  71.3 GiB" (the device's limit from the backend's memory statistics);
- the host's, on any backend: numpy raises ``MemoryError: Unable to allocate
  8.00 GiB for an array ...`` and XLA's CPU client its own RESOURCE_EXHAUSTED.
  That names the run's memory limit, never the GPU's.
"""

from __future__ import annotations

import re

from jaxplay.sandbox.isolation.limits import format_bytes

# "allocate 200.02GiB", "allocate 8.00 GiB", "allocate 1073741824 bytes", XLA CPU's "allocating 17179869184 bytes"
ASKED = re.compile(r"allocat(?:e|ing) (\d+(?:\.\d+)?)\s*(bytes|[KMGTP]i?B|B)?\b", re.IGNORECASE)
UNITS = {"": 1, "b": 1, "bytes": 1, "kb": 10**3, "mb": 10**6, "gb": 10**9, "tb": 10**12, "pb": 10**15,
         "kib": 2**10, "mib": 2**20, "gib": 2**30, "tib": 2**40, "pib": 2**50}
DEVICE_OOM = re.compile(r"RESOURCE_EXHAUSTED.*(Out of memory while trying to allocate|with allocator (GPU|TPU))",
                        re.IGNORECASE | re.DOTALL)
OOM_MESSAGE = (
    "The run used more memory than its limit of {limit}. "
    "Use smaller arrays, fewer intermediate copies, or split the work."
)
ACCELERATOR_NAMES = {"gpu": "GPU", "cuda": "GPU", "rocm": "GPU", "tpu": "TPU"}


# XLA's own words where its status code is not RESOURCE_EXHAUSTED: the CPU client of JAX 0.4.x reports a
# failed allocation as "FAILED_PRECONDITION: ... Out of memory allocating 17196646400 bytes."
XLA_OOM_WORDS = ("out of memory allocating", "ran out of memory in memory space")


def is_out_of_memory(exc: BaseException, message: str) -> bool:
    lowered = message.lower()
    return (isinstance(exc, MemoryError) or ("RESOURCE_EXHAUSTED" in message and "memory" in lowered)
            or any(words in lowered for words in XLA_OOM_WORDS))


def asked_bytes(message: str) -> int | None:
    """How much the failed allocation asked for, in bytes, from XLA's or numpy's text."""
    match = ASKED.search(message)
    if match is None:
        return None
    return int(float(match.group(1)) * UNITS[(match.group(2) or "").lower()])


def is_device_oom(message: str) -> bool:
    """XLA's own report of an exhausted accelerator (not numpy's, nor the host allocator's)."""
    return bool(DEVICE_OOM.search(message)) and "Unable to allocate" not in message


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
    asked = asked_bytes(message)
    device = device_limit_bytes() if is_device_oom(message) else None
    if device is not None:
        platform, limit = device
        kind = ACCELERATOR_NAMES.get(platform, platform.upper())
        text = f"Out of {kind} memory: this run asked for {format_bytes(asked) if asked else 'more'}"
        text += f"; the slot has {format_bytes(limit)}." if limit else " than the device has."
        return text + " Use smaller arrays or batches, or fewer live intermediates."
    text = OOM_MESSAGE.format(limit=memory_limit)
    if asked:
        text += f" The allocation that failed asked for {format_bytes(asked)} of the host's memory."
    return text + (f" ({message})" if message else "")
