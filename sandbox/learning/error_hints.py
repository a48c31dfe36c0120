"""Errors that teach: a hint under JAX's own error, "did you mean", short paths, full tracebacks on request.

``runner.error_event`` builds the event; ``refine`` then adds

- ``hint``: from the data in ``jaxplay.sandbox.learning.error_hints_data`` (removed or moved
  JAX APIs), else "did you mean" for a misspelled attribute of a JAX module;
- paths of the worker's install shortened to ``site-packages/jax/...`` (the
  server's layout is nobody's business and only makes messages longer).

``JAX_TRACEBACK_FILTERING=off`` (set in the program's ``os.environ``) and
``jax.config.update("jax_traceback_filtering", "off")`` ask for the whole
traceback, as JAX's own errors suggest: ``install`` makes the environment
variable reach JAX's config (JAX read it at import, in the zygote, before the
program ran), and ``full_traceback_wanted`` tells the runner to keep every frame.
"""

from __future__ import annotations

import difflib
import linecache
import os
import re
import sys
import sysconfig
import traceback
import types
from functools import cache
from typing import Any

from jaxplay.sandbox.learning import api_versions
from jaxplay.sandbox.learning.error_hints_data import HINTS

USER_FILENAME = "<playground>"
FILTERING_VARIABLE = "JAX_TRACEBACK_FILTERING"
#: Modules whose misspelled attributes get "did you mean" (a name's top-level package).
SUGGEST_FOR = frozenset({"jax", "optax", "flax", "equinox", "numpy"})
MISSING_ATTRIBUTE = re.compile(r"^module '([\w.]+)' has no attribute '(\w+)'")
SANDBOX_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


class _WatchedEnviron(os._Environ):  # type: ignore[name-defined,misc]
    """``os.environ`` that passes JAX_TRACEBACK_FILTERING on to JAX's config when the program sets it."""

    def __setitem__(self, key: str, value: str) -> None:
        super().__setitem__(key, value)
        if key == FILTERING_VARIABLE:
            _apply_filtering(value)


def _apply_filtering(value: str) -> None:
    jax = sys.modules.get("jax")
    if jax is None:
        return  # imported later, JAX reads the variable itself
    try:
        jax.config.update("jax_traceback_filtering", value)
    except Exception:  # noqa: BLE001 - an invalid value is JAX's to report, at its next use
        pass


def install() -> None:
    if type(os.environ) is os._Environ:  # type: ignore[attr-defined]
        os.environ.__class__ = _WatchedEnviron


def full_traceback_wanted() -> bool:
    jax = sys.modules.get("jax")
    configured = getattr(getattr(jax, "config", None), "jax_traceback_filtering", None) if jax else None
    return configured == "off" or os.environ.get(FILTERING_VARIABLE) == "off"


def frames_from_program(tb: types.TracebackType | None) -> list[traceback.FrameSummary]:
    """Every frame from the program's first on (the runner's own frames above it say nothing)."""
    every = traceback.extract_tb(tb)
    first = next((i for i, frame in enumerate(every) if frame.filename == USER_FILENAME), 0)
    return list(every[first:])


# --- paths -----------------------------------------------------------------------

@cache
def _path_prefixes() -> tuple[tuple[str, str], ...]:
    """(absolute prefix, what to show instead), longest first."""
    prefixes: dict[str, str] = {}
    paths = sysconfig.get_paths()
    for key in ("purelib", "platlib"):
        prefixes[paths[key].rstrip("/") + "/"] = "site-packages/"
    for entry in sys.path:
        if entry.rstrip("/").endswith(("site-packages", "dist-packages")):
            prefixes[entry.rstrip("/") + "/"] = "site-packages/"
    version = f"python{sys.version_info.major}.{sys.version_info.minor}/"
    prefixes[paths["stdlib"].rstrip("/") + "/"] = version
    prefixes[os.path.join(SANDBOX_DIR, "userlib") + "/"] = ""
    prefixes[os.path.dirname(SANDBOX_DIR) + "/"] = ""
    return tuple(sorted(prefixes.items(), key=lambda item: -len(item[0])))


def short_paths(text: str) -> str:
    """``/opt/venv/lib/python3.11/site-packages/jax/x.py`` -> ``site-packages/jax/x.py``."""
    for prefix, shown in _path_prefixes():
        text = text.replace(prefix, shown)
    # Installs this process does not know of (another venv's paths in a message): the same rule.
    return re.sub(r"/[^\s'\"()<>]*/(site|dist)-packages/", "site-packages/", text)


# --- hints -----------------------------------------------------------------------

def _error_line(exc: BaseException, line: int | None) -> str:
    if line is None:
        return ""
    return linecache.getline(USER_FILENAME, line)


def data_hint(exc: BaseException, line: int | None) -> str | None:
    ename = type(exc).__name__
    message = str(exc)
    source = _error_line(exc, line)
    for entry in HINTS:
        if ename not in entry.exceptions:
            continue
        match = re.search(entry.message, message, re.DOTALL)
        if match is None or (entry.source and not re.search(entry.source, source)):
            continue
        return match.expand(entry.hint)
    return None


def did_you_mean(exc: BaseException) -> str | None:
    """For ``module 'jax.numpy' has no attribute 'arang'``: the module's closest public names."""
    if not isinstance(exc, AttributeError):
        return None
    found = MISSING_ATTRIBUTE.match(str(exc))
    if not found:
        return None
    module_name, attribute = found.groups()
    module = sys.modules.get(module_name)
    if module is None or module_name.partition(".")[0] not in SUGGEST_FOR:
        return None
    names = [name for name in dir(module) if not name.startswith("_")]
    close = difflib.get_close_matches(attribute, names, n=3, cutoff=0.75)
    if not close:
        lowered = {name.lower(): name for name in names}
        close = [lowered[attribute.lower()]] if attribute.lower() in lowered else []
    if not close:
        return None
    options = " or ".join(f"{module_name}.{name}" for name in close)
    return f"Did you mean {options}?"


def refine(event: dict[str, Any], exc: BaseException) -> dict[str, Any]:
    """The runner's error event with a hint (when one applies) and the install's paths shortened."""
    hint = data_hint(exc, event.get("line")) or did_you_mean(exc)
    if hint:
        event["hint"] = hint
    missing = api_versions.missing_api(type(exc).__name__, str(exc))
    if missing:  # the page may offer a runtime that has it (frontend/src/runtimes/runtimes.ts)
        event["api"], versions = missing
        if versions:
            event["api_versions"] = versions
    for key in ("message", "traceback"):
        if isinstance(event.get(key), str):
            event[key] = short_paths(event[key])
    return event
