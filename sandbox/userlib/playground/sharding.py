"""``show_sharding``: draw how an array is laid out over the devices, in the Sharding panel.

Works on a concrete array, on a pytree of arrays (one view per leaf, named by
its path) and on values inside ``jax.jit`` or ``shard_map`` (drawn once per
compilation, when XLA has decided the layout).
"""

from __future__ import annotations

from typing import Any

from jaxplay.sandbox.capture import sharding as _capture


def show_sharding(x: Any, name: str | None = None) -> None:
    """Show ``x``'s sharding: a grid of blocks coloured by device, with its mesh.

    ``name`` labels the view (e.g. ``show_sharding(w, name="w")``); for a pytree
    each leaf is labelled ``name`` followed by its path, e.g. ``params['w']``.
    """
    _capture.show_sharding(x, name=name)


__all__ = ["show_sharding"]
