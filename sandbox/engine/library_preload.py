"""Which worker libraries the zygote imports before it forks, so a run's ``import`` is a dictionary look-up.

Decided per library from its import time inside a run and the memory it
adds to every zygote (bench/libraries.py measures both; docs/libraries.md
has the figures). A library is preloaded when programs commonly import it,
importing it in a run costs more than a few tens of milliseconds, and it
neither initializes a JAX backend nor starts a thread at import (either
would break or endanger the zygote's fork):

- preloaded: optax, flax.nnx (with flax), equinox, chex, einops, jaxtyping;
  ``import optax, flax.nnx as nnx, equinox`` would otherwise cost a run ~0.6 s;
- imported on demand: pandas, orbax.checkpoint, diffrax, lineax, optimistix
  (0.3-1.2 s each and 6-30 MB each, used by few programs), numpyro and
  scikit-learn (their import starts a native thread, and scikit-learn adds ~100 MB),
  scipy (its submodules load lazily: ``import scipy`` is ~10 ms).

``JAXPLAY_PRELOAD_LIBRARIES`` (comma-separated module names, or ``none``)
replaces the list; the benchmark uses it to measure a zygote without them.
"""

from __future__ import annotations

import importlib
import logging
import os

PRELOADED = ("optax", "flax.nnx", "equinox", "chex", "einops", "jaxtyping")
OVERRIDE_VARIABLE = "JAXPLAY_PRELOAD_LIBRARIES"

log = logging.getLogger("jaxplay.sandbox")


def modules_to_preload() -> tuple[str, ...]:
    override = os.environ.get(OVERRIDE_VARIABLE)
    if override is None:
        return PRELOADED
    return tuple(name.strip() for name in override.split(",") if name.strip() and name.strip() != "none")


def preload_libraries() -> None:
    """Import the chosen libraries (each optional) and the list of installed ones; never starts a backend."""
    for name in modules_to_preload():
        try:
            importlib.import_module(name)
        except ImportError:
            log.debug("not preloading %s: not installed", name)
        except Exception as exc:  # noqa: BLE001 - e.g. a library built for another JAX than this runtime's
            # The sandbox must start all the same: a run that imports it gets this error, as plain Python would.
            log.warning("not preloading %s: importing it fails: %s: %s", name, type(exc).__name__, exc)
    from jaxplay.sandbox.engine import libraries

    libraries.installed()  # cached: runs inherit it for the missing-module message
