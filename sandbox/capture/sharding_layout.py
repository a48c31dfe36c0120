"""How an array is laid out over devices, as plain JSON-ready data.

``describe_layout(shape, dtype, sharding)`` turns a JAX ``Sharding`` and a
global shape into the fields of a ``sharding`` event (and of the
``in_shardings``/``out_shardings`` entries of a ``compiled`` event): the mesh,
the PartitionSpec text and, for every device, the index range it holds and its
replica id. The numbers come from JAX itself (``devices_indices_map`` and, for
a concrete array, ``addressable_shards``) so they are what JAX will do, not our
reading of the spec. Only when JAX refuses (a sharding that does not divide
the shape, which XLA pads inside a jitted function) do we compute the ranges
from the HLO sharding with XLA's rule: ceil-sized tiles, the last ones short
or empty.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Sequence
from typing import Any

import numpy as np


def describe_mesh(mesh: Any) -> dict[str, Any]:
    """Axis names, sizes and types, and the device ids in row-major mesh order."""
    return {
        "axis_names": [str(name) for name in mesh.axis_names],
        "axis_sizes": [int(size) for size in mesh.axis_sizes],
        "axis_types": [axis_type_name(t) for t in mesh.axis_types],
        "device_ids": [int(i) for i in np.asarray(mesh.device_ids).reshape(-1)],
    }


def axis_type_name(axis_type: Any) -> str:
    # AxisType.Explicit prints as "Explicit" in current JAX; older ones as "AxisType.Explicit".
    return getattr(axis_type, "name", str(axis_type)).split(".")[-1]


def spec_text(sharding: Any, ndim: int) -> str:
    """The PartitionSpec as the user would write it; other shardings as their HLO sharding."""
    spec = getattr(sharding, "spec", None)
    if spec is not None:
        return str(spec)
    if type(sharding).__name__ == "SingleDeviceSharding":
        return "P()"
    try:
        return str(sharding._to_xla_hlo_sharding(ndim))
    except Exception:
        return str(sharding)


def slice_bounds(index: Any, dim: int) -> list[int]:
    """[start, stop) of one dimension of a device's index, with ``slice(None)`` made explicit."""
    if isinstance(index, int | np.integer):
        return [int(index), int(index) + 1]
    start, stop, _ = index.indices(dim)
    return [int(start), int(max(start, stop))]


def device_indices(sharding: Any, shape: Sequence[int]) -> list[tuple[Any, list[list[int]]]]:
    """(device, [[start, stop] per dimension]) in JAX's device-assignment order."""
    shape = tuple(int(d) for d in shape)
    try:
        mapping = sharding.devices_indices_map(shape)
    except Exception as exc:
        # IndivisibleError (uneven shards) and unreduced specs: JAX gives no
        # map, but XLA still places ceil-sized tiles on the devices.
        if type(exc).__name__ not in ("IndivisibleError", "NotImplementedError"):
            raise
        return padded_device_indices(sharding, shape)
    return [(device, [slice_bounds(idx, dim) for idx, dim in zip(index, shape, strict=True)])
            for device, index in mapping.items()]


def padded_device_indices(sharding: Any, shape: tuple[int, ...]) -> list[tuple[Any, list[list[int]]]]:
    """XLA's placement when tiles do not divide the shape: tile = ceil(dim / parts)."""
    devices = list(sharding._device_assignment)
    hlo = sharding._to_xla_hlo_sharding(len(shape))
    if len(devices) == 1 or hlo.is_replicated() or hlo.is_unreduced() or not hlo.is_tiled():
        return [(device, [[0, dim] for dim in shape]) for device in devices]
    dims = list(hlo.tile_assignment_dimensions())
    partitions = dims[: len(shape)]
    # Trailing tile dimensions (replicated/unreduced subgroups) hold copies.
    copies = math.prod(dims[len(shape):])
    per_dim: list[list[list[int]]] = []
    for dim, parts in zip(shape, partitions, strict=True):
        tile = -(-dim // parts) if parts > 1 else dim
        per_dim.append([[min(i * tile, dim), min((i + 1) * tile, dim)] for i in range(parts)])
    order = list(hlo.tile_assignment_devices())
    out: dict[int, list[list[int]]] = {}
    position = 0
    for tile_index in np.ndindex(*partitions):
        bounds = [per_dim[d][i] for d, i in enumerate(tile_index)]
        for _ in range(copies):
            out[order[position]] = bounds
            position += 1
    return [(device, out[i]) for i, device in enumerate(devices)]


def replica_ids(indexed: list[tuple[Any, list[list[int]]]]) -> dict[int, int]:
    """JAX's rule (``device_replica_id_map``): the n-th device holding the same block is replica n."""
    seen: Counter[tuple[tuple[int, int], ...]] = Counter()
    out: dict[int, int] = {}
    for device, bounds in indexed:
        key = tuple((start, stop) for start, stop in bounds)
        out[int(device.id)] = seen[key]
        seen[key] += 1
    return out


def describe_layout(shape: Sequence[int], dtype: Any, sharding: Any, array: Any = None) -> dict[str, Any]:
    """The layout fields shared by ``sharding`` events and compiled in/out shardings."""
    shape = [int(d) for d in shape]
    itemsize = np.dtype(dtype).itemsize if dtype is not None else None
    indexed = device_indices(sharding, shape)
    replicas = replica_ids(indexed)
    if array is not None:
        # A concrete array reports its own replica ids; prefer them over our rule.
        try:
            replicas.update({int(s.device.id): int(s.replica_id) for s in array.addressable_shards})
        except Exception:
            pass
    shards = []
    for device, bounds in indexed:
        elements = math.prod(stop - start for start, stop in bounds)
        shards.append({
            "device": int(device.id),
            "index": bounds,
            "replica": replicas[int(device.id)],
            "bytes": elements * itemsize if itemsize is not None else None,
        })
    mesh = getattr(sharding, "mesh", None)
    first = indexed[0][0] if indexed else None
    return {
        "shape": shape,
        "dtype": str(np.dtype(dtype)) if dtype is not None else None,
        "sharding_type": type(sharding).__name__,
        "spec": spec_text(sharding, len(shape)),
        "mesh": describe_mesh(mesh) if mesh is not None and hasattr(mesh, "device_ids") else None,
        "devices": [int(device.id) for device, _ in indexed],
        "device_kind": getattr(first, "device_kind", None),
        "platform": getattr(first, "platform", None),
        "memory_kind": getattr(sharding, "memory_kind", None),
        "bytes": math.prod(shape) * itemsize if itemsize is not None else None,
        "uneven": is_uneven(indexed, len(shape)),
        "shards": shards,
    }


def is_uneven(indexed: list[tuple[Any, list[list[int]]]], ndim: int) -> bool:
    """True when some dimension's blocks differ in size (XLA padded the last tiles)."""
    for dim in range(ndim):
        sizes = {b[dim][1] - b[dim][0] for _, b in indexed}
        if len(sizes) > 1:
            return True
    return False
