"""The runtimes installed under ``--runtimes-dir``, and those a worker offers.

Layout (``jaxplay runtimes add`` writes it, sandbox/runtimes/install.py)::

    <runtimes dir>/jax-0.4.38/                 a venv: bin/python, lib/python3.11/site-packages
    <runtimes dir>/jax-0.12.0.1/               the same from another Python: lib/python3.13/site-packages
    <runtimes dir>/jax-0.4.38/runtime.json     written last: the install is complete (versions, Python, time, size)
    <runtimes dir>/jax-0.6.2.failed.json       a failed or refused install: what pip or the check said
    <runtimes dir>/jax-0.11.2.part/            an install under way (its lock held) or cut short
    <runtimes dir>/.jax-0.11.2.lock            held while ``add`` works on that version

The worker's own environment is a runtime too: it needs no folder. A
runtime the settings list but that is missing, refused, failed, half-made or
whose Python is gone is still offered as ``Runtime.problem``, so
/api/backends, /readyz and the page can say which and why, while the others
serve runs.
"""

from __future__ import annotations

import fcntl
import json
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from jaxplay.sandbox.runtimes import launch, pins
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
        interpreter = folder / "bin" / "python"
        if record_of(settings.runtimes_dir, version) is not None:
            problem = None if interpreter.exists() else (
                f"its Python ({interpreter.resolve()}) is gone: run `jaxplay runtimes remove {version}`, then add it")
            runtimes.append(Runtime(version, interpreter, problem=problem))
            continue
        runtimes.append(Runtime(version, interpreter, problem=missing_reason(settings.runtimes_dir, version)))
    return runtimes


def missing_reason(runtimes_dir: Path, version: str) -> str:
    """Why runtime ``version`` has no complete install: refused or failed, being installed, cut short, or never
    asked for."""
    failed = failure_file(runtimes_dir, version)
    if failed.is_file():
        try:
            refused = bool(json.loads(failed.read_text()).get("refused"))
        except (OSError, ValueError):
            refused = False
        return f"{'it cannot be installed here' if refused else 'its install failed'}: {_failure_reason(failed)}"
    partial = folder_for(runtimes_dir, version).with_name(f"jax-{version}.part")
    if partial.exists():
        if install_running(runtimes_dir, version):
            return f"it is being installed now (`jaxplay runtimes add {version}`); restart the worker when it is done"
        return (f"its install did not finish ({partial} is left half-made): run `jaxplay runtimes add {version}` "
                f"again")
    return f"not installed in {runtimes_dir}: run `jaxplay runtimes add {version}`"


def lock_file(runtimes_dir: Path, version: str) -> Path:
    return runtimes_dir.expanduser() / f".jax-{version}.lock"


def install_running(runtimes_dir: Path, version: str) -> bool:
    """Whether an install of ``version`` holds its lock now (install.add holds it throughout)."""
    try:
        with open(lock_file(runtimes_dir, version), "a") as lock:
            try:
                fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                return True
            fcntl.flock(lock, fcntl.LOCK_UN)
    except OSError:
        return False
    return False


def _failure_reason(path: Path) -> str:
    try:
        return str(json.loads(path.read_text()).get("message", "unknown"))[-300:]
    except (OSError, ValueError):
        return "unknown (unreadable record)"


def exposed_paths_of(runtime: Runtime, roots: list[str]) -> list[Path]:
    """What a sandbox of ``runtime`` binds: computed by its own interpreter, which sees its own
    distributions (sandbox/isolation/exposed_paths.py run as a program)."""
    command = launch.command(runtime.interpreter, "jaxplay.sandbox.isolation.exposed_paths", *roots)
    result = subprocess.run(command, capture_output=True, text=True, timeout=PATHS_TIMEOUT_S,
                            env={"PATH": "/usr/bin:/bin"})
    if result.returncode != 0:
        raise RuntimeError(f"JAX {runtime.name}: its Python could not list what a sandbox needs: "
                           f"{result.stderr.strip()[-400:]}")
    return [Path(p) for p in json.loads(result.stdout)]
