"""The runtimes installed under ``--runtimes-dir``, and those a worker offers.

Layout (``jaxplay runtimes add`` writes it, sandbox/runtimes/install.py)::

    <runtimes dir>/jax-0.4.38/                 a venv: bin/python, lib/python3.11/site-packages
    <runtimes dir>/jax-0.4.38/runtime.json     written last: the install is complete (versions, time, size)
    <runtimes dir>/jax-0.6.2.failed.json       a failed install: what pip said

The worker's own environment is a runtime too, the default one: it needs no
folder. A runtime the settings list but that is missing or failed is still
offered as ``Runtime.problem``, so /api/backends and /readyz can say which
and why, while the others serve runs.
"""

from __future__ import annotations

import json
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import jaxplay
from jaxplay.sandbox.runtimes import pins
from jaxplay.settings import Settings

RECORD = "runtime.json"
FAILED_SUFFIX = ".failed.json"
PATHS_TIMEOUT_S = 120.0


@dataclass(frozen=True)
class Runtime:
    """A JAX a worker can run programs on: its own (``default``) or one installed under the runtimes dir."""
    name: str  # the JAX version it pins, e.g. "0.4.38"; "" for the worker's own until probed
    interpreter: Path
    default: bool = False
    problem: str | None = None  # why it cannot run programs (missing, failed install, failed probe)

    @property
    def label(self) -> str:
        return "default" if self.default else f"jax-{self.name}"


def own_runtime() -> Runtime:
    return Runtime(name="", interpreter=Path(sys.executable), default=True)


def folder_for(runtimes_dir: Path, version: str) -> Path:
    return runtimes_dir.expanduser() / f"jax-{version}"


def failure_file(runtimes_dir: Path, version: str) -> Path:
    return runtimes_dir.expanduser() / f"jax-{version}{FAILED_SUFFIX}"


def record_of(runtimes_dir: Path, version: str) -> dict[str, Any] | None:
    """What the install recorded, or None when the runtime is not (completely) installed."""
    try:
        return json.loads((folder_for(runtimes_dir, version) / RECORD).read_text())
    except (OSError, ValueError):
        return None


def installed_versions(runtimes_dir: Path) -> list[str]:
    """Every completely installed runtime's JAX version, oldest first."""
    root = runtimes_dir.expanduser()
    found = [entry.name[4:] for entry in root.glob("jax-*") if (entry / RECORD).is_file()]
    return sorted(found, key=version_key)


def version_key(version: str) -> tuple[int, ...]:
    return tuple(int(part) if part.isdigit() else 0 for part in version.split("."))


def listed_versions(settings: Settings) -> list[str]:
    """The versions the ``runtimes`` setting names ('all': every installed one), in the order given."""
    text = settings.runtimes.strip()
    if text == "all":
        return installed_versions(settings.runtimes_dir)
    names: list[str] = []
    for name in (part.strip() for part in text.split(",")):
        if name and name not in names:
            names.append(name)
    return names


def offered(settings: Settings) -> list[Runtime]:
    """The runtimes besides the worker's own that the settings ask for, each ready or with its problem."""
    runtimes = []
    for version in listed_versions(settings):
        try:
            pins.check_version(version)
        except ValueError as exc:
            runtimes.append(Runtime(version, Path(), problem=str(exc)))
            continue
        folder = folder_for(settings.runtimes_dir, version)
        if record_of(settings.runtimes_dir, version) is not None:
            runtimes.append(Runtime(version, folder / "bin" / "python"))
            continue
        failed = failure_file(settings.runtimes_dir, version)
        if failed.is_file():
            problem = f"its install failed: {_failure_reason(failed)}"
        else:
            problem = f"not installed in {settings.runtimes_dir}: run `jaxplay runtimes add {version}`"
        runtimes.append(Runtime(version, folder / "bin" / "python", problem=problem))
    return runtimes


def _failure_reason(path: Path) -> str:
    try:
        return str(json.loads(path.read_text()).get("message", "unknown"))[-300:]
    except (OSError, ValueError):
        return "unknown (unreadable record)"


def exposed_paths_of(runtime: Runtime, roots: list[str]) -> list[Path]:
    """What a sandbox of ``runtime`` binds: computed by its own interpreter, which sees its own
    distributions (sandbox/isolation/exposed_paths.py run as a program)."""
    command = [str(runtime.interpreter), "-s", "-P", "-m", "jaxplay.sandbox.isolation.exposed_paths", *roots]
    result = subprocess.run(command, capture_output=True, text=True, timeout=PATHS_TIMEOUT_S,
                            env={"PYTHONPATH": str(jaxplay.IMPORT_ROOT), "PATH": "/usr/bin:/bin"})
    if result.returncode != 0:
        raise RuntimeError(f"JAX {runtime.name}: its Python could not list what a sandbox needs: "
                           f"{result.stderr.strip()[-400:]}")
    return [Path(p) for p in json.loads(result.stdout)]
