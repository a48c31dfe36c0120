"""Programs that configure JAX themselves get exactly what plain Python would give them.

A warm spare has already imported JAX and started its backend, so two kinds
of configuration need care:

- Settings read when the backend starts (``XLA_FLAGS``, ``JAX_PLATFORMS``, the
  CPU device count, the GPU client's memory settings, ...). A program that
  touches any of them gets a spare whose backend is not started
  (``needs_unstarted_backend``, decided on the source text before the run).
- JAX flags read from the environment when ``jax`` is imported
  (``JAX_ENABLE_X64``, ``JAX_DEBUG_NANS``, ``JAX_TRACEBACK_FILTERING``, ...).
  In plain Python they count if set before the program's first ``import
  jax``; ``apply_environment_at_first_import`` applies the ones the program
  changed at exactly that moment.
"""

from __future__ import annotations

import builtins
import os
import re
from collections.abc import Callable
from typing import Any

# Names whose appearance in a program means its backend must start after the program ran a little.
BACKEND_SETTINGS = re.compile(
    r"XLA_FLAGS|JAX_PLATFORMS?\b|JAX_PLATFORM_NAME|XLA_PYTHON_CLIENT_|CUDA_VISIBLE_DEVICES|TPU_VISIBLE|"
    r"TF_CPP_|JAX_NUM_CPU_DEVICES|jax_platforms?\b|jax_platform_name|jax_num_cpu_devices|"
    r"jax_cuda_visible_devices|jax_cpu_collectives|jax\.distributed|jax_compilation_cache_dir"
)


def needs_unstarted_backend(code: str) -> bool:
    return BACKEND_SETTINGS.search(code) is not None


def _jax_flag_changes(before: dict[str, str]) -> dict[str, Any]:
    import jax

    holders = jax.config._value_holders
    changes: dict[str, Any] = {}
    for key, raw in os.environ.items():
        if not key.startswith("JAX_") or before.get(key) == raw:
            continue
        holder = holders.get(key.lower())
        if holder is None:
            continue
        parser = getattr(holder, "_parser", None)
        try:
            changes[key.lower()] = parser(raw) if parser else raw
        except (ValueError, TypeError):
            continue  # plain JAX would have rejected it at import; leave its default
    return changes


def apply_environment_at_first_import() -> Callable[[], None]:
    """Hook the program's first ``import jax``; returns a function that removes the hook."""
    before = dict(os.environ)
    original = builtins.__import__

    def restore() -> None:
        if builtins.__import__ is hooked:
            builtins.__import__ = original

    def hooked(name: str, globals: Any = None, locals: Any = None, fromlist: Any = (), level: int = 0) -> Any:
        if level == 0 and (name == "jax" or name.startswith("jax.")) and (globals or {}).get("__name__") == "__main__":
            restore()
            import jax

            for option, value in _jax_flag_changes(before).items():
                jax.config.update(option, value)
        return original(name, globals, locals, fromlist, level)

    builtins.__import__ = hooked
    return restore
