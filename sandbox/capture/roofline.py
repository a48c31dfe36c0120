"""Roofline figures of each compiled function that ran: is it compute- or memory-bound, and how close to the roof?

The two axes come from XLA's cost analysis of the compiled function
(``flops`` and ``bytes accessed``, per device program); the time is the
median of its calls timed until ready (the jit capture's own samples, calls
that compiled left out); the roof is the device's measured peak
(``sandbox/engine/calibration.py``: a matmul for FLOP/s, a copy for bytes/s),
which the worker gives every run as ``SandboxRun.device_peak``.

    intensity = flops / bytes                  (FLOP per byte)
    ridge     = peak_flops / peak_bytes        (the intensity where the two roofs meet)
    roof      = min(peak_flops, intensity * peak_bytes)
    bound     = "compute" if intensity >= ridge else "memory"
    fraction  = (flops / time) / roof

``RooflineCollector.hook`` is a ``jit_capture.COMPILED_HOOKS`` entry (the
renderer thread); ``event`` is built once, at the end of the run. The jit
capture tells a function's compilations' calls apart with ``call_signature``.
"""

from __future__ import annotations

import math
import threading
from typing import Any

from jaxplay.worker_protocol import DevicePeak, to_wire

BYTES_KEY = "bytes accessed"
MAX_ROWS = 1000  # compilations listed; a program that compiles more is told in ``left_out``


def figures(flops: float | None, bytes_accessed: float | None, seconds: float | None,
            peak: DevicePeak | None) -> dict[str, Any]:
    """Everything the page plots for one function; a figure that cannot be known is null."""
    known = flops is not None and bytes_accessed is not None and flops >= 0 and bytes_accessed > 0
    intensity = flops / bytes_accessed if known else None  # type: ignore[operator]
    timed = seconds is not None and seconds > 0
    result: dict[str, Any] = {
        "intensity": intensity,
        "achieved_flops_per_s": flops / seconds if timed and flops is not None else None,  # type: ignore[operator]
        "achieved_bytes_per_s": bytes_accessed / seconds if timed and bytes_accessed is not None else None,  # type: ignore[operator]
        "roof_flops_per_s": None, "bound": None, "fraction_of_roof": None,
    }
    if peak is None or intensity is None:
        return result
    roof = min(peak.flops_per_s, intensity * peak.bytes_per_s)
    result["bound"] = "compute" if intensity >= peak.ridge else "memory"
    result["roof_flops_per_s"] = roof
    if timed:
        if roof > 0:
            result["fraction_of_roof"] = result["achieved_flops_per_s"] / roof
        else:  # no arithmetic at all (a copy, a transpose): how much of the bandwidth it used
            result["fraction_of_roof"] = result["achieved_bytes_per_s"] / peak.bytes_per_s
    return result


def _number(cost: dict[str, Any] | None, key: str) -> float | None:
    value = (cost or {}).get(key)
    return float(value) if isinstance(value, int | float) and math.isfinite(value) else None


class RooflineCollector:
    """Cost of every compilation the renderer sent, by key, until the run's end."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._compiled: dict[str, dict[str, Any]] = {}

    def hook(self, event: dict[str, Any], compiled: Any) -> None:
        cost = event.get("cost")
        with self._lock:
            self._compiled[event["key"]] = {
                "key": event["key"], "fn_id": event["fn_id"], "fn": event["fn"], "line": event["line"],
                "compile_index": event["compile_index"],
                "flops": _number(cost, "flops"), "bytes": _number(cost, BYTES_KEY),
            }

    def clear(self) -> None:
        with self._lock:
            self._compiled = {}

    def event(self, timings: dict[str, tuple[int, float | None]], peak: DevicePeak | None) -> dict[str, Any] | None:
        """``timings``: key -> (timed calls, median seconds); None when nothing compiled."""
        with self._lock:
            compiled = list(self._compiled.values())
        if not compiled:
            return None
        rows = []
        for entry in compiled[:MAX_ROWS]:
            calls, median_s = timings.get(entry["key"], (0, None))
            rows.append({**entry, "timed_calls": calls,
                         "median_ms": None if median_s is None else round(median_s * 1e3, 6),
                         **figures(entry["flops"], entry["bytes"], median_s, peak)})
        return {"type": "roofline", "peak": to_wire(peak), "functions": rows,
                "left_out": max(0, len(compiled) - MAX_ROWS)}


def call_signature(args: tuple, kwargs: dict) -> Any:
    """What tells a function's compilations apart, cheaply: the tree, and each leaf's shape and dtype
    (arrays) or value (static and Python values). Computed for every call only once a function has
    compiled more than once."""
    import jax

    leaves, tree = jax.tree_util.tree_flatten((args, kwargs))
    parts: list[Any] = [tree]
    for leaf in leaves:
        if hasattr(leaf, "weak_type"):  # a jax.Array (numpy dtypes hash; str() of one costs ~4 us)
            parts.append((leaf.shape, leaf.dtype, leaf.weak_type))
        elif hasattr(leaf, "shape") and hasattr(leaf, "dtype"):
            parts.append((leaf.shape, leaf.dtype))
        else:
            try:
                hash(leaf)
                parts.append((type(leaf), leaf))
            except TypeError:
                parts.append((type(leaf), id(leaf)))
    return tuple(parts)
