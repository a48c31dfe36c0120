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
        _join_xla_flags(checked.xla_flags_text())
        _keep_at_backend_start(checked.xla_flags_text())
    for name, value in checked.config_values().items():
        try:
            jax.config.update(name, value)
        except (ValueError, TypeError, AttributeError) as exc:
            return _refused(f"JAX {jax.__version__} refused the option {name}={value}: {exc}")
    return None


def _join_xla_flags(text: str) -> None:
    """The run's flags after whatever ``XLA_FLAGS`` holds (the sandbox's device count; XLA takes the last of a
    flag given twice, so the run's win)."""
    current = os.environ.get("XLA_FLAGS", "").split()
    missing = [flag for flag in text.split() if flag not in current]
    if missing:
        os.environ["XLA_FLAGS"] = " ".join([*current, *missing])


def _keep_at_backend_start(text: str) -> None:
    """A program may set ``XLA_FLAGS`` itself before its backend starts (sharding examples do, for a device
    count): the run's flags are joined to what it set when the backend starts, never silently dropped."""
    from jax._src import xla_bridge

    start_backends = xla_bridge.backends

    def backends() -> Any:
        if not xla_bridge.backends_are_initialized():
            _join_xla_flags(text)
        return start_backends()

    xla_bridge.backends = backends


def _refused(message: str) -> dict[str, Any]:
    return {"type": "error", "ename": "FlagError", "message": message, "line": None, "traceback": ""}
