"""A run's JAX options and XLA flags, put in place in its own process before its program runs.

XLA reads ``XLA_FLAGS`` once, when the backend starts, so a run with XLA
flags comes to a spare whose backend has not started (warm_sandbox); JAX's
options can change at any time before the program runs, through
``jax.config.update``, as a program's own first lines would. The flags were
checked by the server and by the worker; they are checked once more here
against the JAX this process runs, so nothing reaches XLA that is off the
allow-list (jaxplay/run_flags.py).
"""

from __future__ import annotations

import os
from typing import Any

from jaxplay import run_flags


def apply(flags: run_flags.RunFlags, backend_started: bool) -> dict[str, Any] | None:
    """Apply ``flags``; an ``error`` event saying why not, or None once they are in place."""
    import jax
    from jaxlib import version as jaxlib_version

    try:
        checked = run_flags.validate(flags, jaxlib_version.__version__)
    except run_flags.FlagError as exc:
        return _refused(str(exc))
    if checked.xla:
        if backend_started:  # the worker sends such runs to a fresh spare; XLA would ignore them here
            return _refused("The XLA flags could not be applied: this sandbox's backend had already started.")
        existing = os.environ.get("XLA_FLAGS", "")
        os.environ["XLA_FLAGS"] = f"{existing} {checked.xla_flags_text()}".strip()
    for name, value in checked.config_values().items():
        try:
            jax.config.update(name, value)
        except (ValueError, TypeError, AttributeError) as exc:
            return _refused(f"JAX {jax.__version__} refused the option {name}={value}: {exc}")
    return None


def _refused(message: str) -> dict[str, Any]:
    return {"type": "error", "ename": "FlagError", "message": message, "line": None, "traceback": ""}
