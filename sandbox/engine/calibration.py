"""The device's peak, measured: a matmul for FLOP/s and a copy for bytes/s.

The roofline of a run (``sandbox/capture/roofline.py``) needs the two roofs
of the device it ran on. A table by device name would be a guess for a
CPU (its cores, its memory, whatever else runs on the host); a measurement
is not. The worker runs this in a sandboxed probe with no user code in it,
at its first start on a host and again whenever the host is idle
(``sandbox/engine/peak_keeping.py`` keeps the best figures,
``sandbox/engine/peak_cache.py`` stores them), so runs never pay for it.

Both figures use the same yardsticks as the runs they are compared with:
FLOPs and bytes from XLA's own cost analysis of the measured function, time
from dispatch until the result is ready, the best of several repetitions
(a peak is what the device can do, not what it did on average).
"""

from __future__ import annotations

import functools
import time
from typing import Any

REPEATS = 7
# Big enough to reach the roof (the copy well beyond the caches), small enough to measure in a
# fraction of a second on a loaded CPU.
MATMUL_SIDE = {"cpu": 1024, "gpu": 8192, "tpu": 8192}
COPY_BYTES = {"cpu": 256 << 20, "gpu": 1 << 30, "tpu": 1 << 30}
MIN_SAMPLE_S = 0.02  # calls are repeated within one sample until it lasts this long


def _best_seconds_per_call(step: Any, state: Any) -> tuple[float, int]:
    """The fastest of REPEATS samples, each a loop of ``state = step(state)`` blocked until ready;
    and the loop count. Feeding each result back lets a step reuse its input's memory (donation)."""
    import jax

    state = jax.block_until_ready(step(state))  # compile and warm
    loops = 1
    while True:
        start = time.perf_counter()
        for _ in range(loops):
            state = step(state)
        jax.block_until_ready(state)
        elapsed = time.perf_counter() - start
        if elapsed >= MIN_SAMPLE_S or loops >= 1024:
            break
        loops *= 2
    best = elapsed / loops
    for _ in range(REPEATS - 1):
        start = time.perf_counter()
        for _ in range(loops):
            state = step(state)
        jax.block_until_ready(state)
        best = min(best, (time.perf_counter() - start) / loops)
    return best, loops


def _times(matmul: Any, b: Any, a: Any) -> Any:
    return matmul(a, b)


def _cost(fn: Any, *args: Any) -> dict[str, float]:
    cost = fn.lower(*args).compile().cost_analysis()
    if isinstance(cost, list | tuple):
        cost = cost[0] if cost else {}
    return {key: float(value) for key, value in (cost or {}).items() if isinstance(value, int | float)}


def measure() -> dict[str, Any]:
    """Peak FLOP/s and bytes/s of the first device, with how they were measured."""
    import jax
    import jax.numpy as jnp

    device = jax.devices()[0]
    platform = device.platform if device.platform in MATMUL_SIDE else "gpu"
    side = MATMUL_SIDE[platform]
    key_a, key_b = jax.random.split(jax.random.key(0))
    a = jax.device_put(jax.random.normal(key_a, (side, side), jnp.float32), device)
    # Scaled so that multiplying by it again and again keeps the values' size (no overflow to inf).
    b = jax.device_put(jax.random.normal(key_b, (side, side), jnp.float32) / side**0.5, device)
    matmul = jax.jit(lambda x, y: x @ y)
    flops = _cost(matmul, a, b).get("flops") or 2.0 * side**3
    matmul_s, matmul_loops = _best_seconds_per_call(functools.partial(_times, matmul, b), a)

    elements = COPY_BYTES[platform] // 4
    x = jax.device_put(jnp.full((elements,), 0.5, jnp.float32), device)
    # Reads the array and writes it back scaled, in place (donated): memory traffic XLA cannot skip,
    # without the page faults of a fresh output buffer every call.
    scale = jax.jit(lambda v: v * 1.0000001, donate_argnums=0)
    moved = _cost(scale, x).get("bytes accessed") or 8.0 * elements
    copy_s, copy_loops = _best_seconds_per_call(scale, x)

    return {
        "flops_per_s": flops / matmul_s,
        "bytes_per_s": moved / copy_s,
        "device_kind": device.device_kind,
        "how": (f"float32 matmul {side}x{side} @ {side}x{side} ({flops:.3g} FLOP by XLA's cost analysis) and "
                f"x * c in place over {COPY_BYTES[platform] >> 20} MiB ({moved:.3g} bytes read and written), each the "
                f"best of {REPEATS} samples of {matmul_loops} and {copy_loops} calls timed until ready, "
                f"on one {device.device_kind} device"),
        "measured_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
    }
