"""The Pythons a runtime's environment can be made from, and which of them a JAX release supports.

JAX 0.11 dropped Python 3.11, so the newest JAX needs a newer Python than
the one this project may run on. Candidates, each asked for its real
executable and version (a pyenv shim answers with the interpreter it stands
for, or fails when pyenv has not selected it): the one ``--python``
names alone when given; else this worker's own base Python, every
``python3.N`` on PATH, and pyenv's installs (``$PYENV_ROOT/versions``,
which a shim refuses to run unless they are selected).

Which Pythons a release supports is the package index's to say: jaxlib ships
one wheel per Python (``pip index versions jaxlib --python-version 3.13``
lists the releases that have one), asked before anything is downloaded.
"""

from __future__ import annotations

import concurrent.futures
import json
import os
import re
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

PROBE_TIMEOUT_S = 20.0
INDEX_TIMEOUT_S = 120.0
NAME = re.compile(r"^python3\.(\d+)$")
# The sandbox's own code needs 3.11 (this project's floor); older interpreters are not asked.
OLDEST_MINOR = 11
PROBE = ("import json, sys, importlib.util as u; print(json.dumps({'executable': sys.executable, "
         "'version': list(sys.version_info[:3]), 'venv': all(u.find_spec(m) is not None "
         "for m in ('venv', 'ensurepip'))}))")
# The Pythons asked about when a release is not found for any Python here: enough to tell an unknown
# version from one that needs a Python this host lacks.
KNOWN_MINORS = (11, 12, 13, 14)
HOW_TO_GET = ("install one (Debian 13, Ubuntu 24.04: `apt-get install python3.13 python3.13-venv`; "
              "or `pyenv install 3.13`) or name one with --python PATH")


@dataclass(frozen=True)
class HostPython:
    """An interpreter on this host: its real executable and version, and whether it can make a venv."""
    executable: Path
    version: tuple[int, int, int]
    makes_venvs: bool

    @property
    def minor(self) -> str:
        """``3.13``"""
        return f"{self.version[0]}.{self.version[1]}"

    def __str__(self) -> str:
        return f"Python {'.'.join(map(str, self.version))} ({self.executable})"


def own_base() -> Path:
    """This process's base interpreter, never a venv's copy."""
    return Path(getattr(sys, "_base_executable", None) or sys.executable)


def probe(command: str | Path) -> HostPython | None:
    """What ``command`` is when run, or None when it is no working Python 3."""
    try:
        result = subprocess.run([str(command), "-I", "-c", PROBE], capture_output=True, text=True,
                                timeout=PROBE_TIMEOUT_S, env={"PATH": os.environ.get("PATH", "/usr/bin:/bin"),
                                                              "HOME": os.environ.get("HOME", "/")})
        found = json.loads(result.stdout) if result.returncode == 0 else None
    except (OSError, subprocess.TimeoutExpired, ValueError):
        return None
    if not found or found["version"][0] != 3:
        return None
    return HostPython(Path(found["executable"]), tuple(found["version"]), bool(found["venv"]))


def candidates() -> list[Path]:
    """Every ``python3.N`` on PATH and in pyenv's installs, and this worker's own: unprobed."""
    found: list[Path] = [own_base()]
    for folder in os.environ.get("PATH", "").split(os.pathsep):
        try:
            names = sorted(os.listdir(folder or "."))
        except OSError:
            continue
        found += [Path(folder) / name for name in names if _new_enough(name)]
    pyenv = Path(os.environ.get("PYENV_ROOT") or Path.home() / ".pyenv") / "versions"
    for version in sorted(pyenv.glob("3.*")):
        found += [path for path in sorted((version / "bin").glob("python3.*")) if _new_enough(path.name)]
    return found


def _new_enough(name: str) -> bool:
    match = NAME.match(name)
    return match is not None and int(match.group(1)) >= OLDEST_MINOR


def host_pythons(given: str = "") -> list[HostPython]:
    """The working Pythons, newest first, each once; only ``given`` (a path or a command) when set."""
    if given:
        command = shutil.which(given) or given
        python = probe(command)
        if python is None:
            raise ValueError(f"--python {given!r} is not a Python 3 that runs here: give the path of one "
                             f"(e.g. /usr/bin/python3.13).")
        return [python]
    paths = list(dict.fromkeys(p for p in candidates() if os.access(p, os.X_OK)))
    with concurrent.futures.ThreadPoolExecutor(8) as pool:
        probed = [p for p in pool.map(probe, paths) if p is not None]
    unique: dict[Path, HostPython] = {}
    for python in (p for p in probed if p.version[1] >= OLDEST_MINOR):
        unique.setdefault(python.executable.resolve(), python)
    return sorted(unique.values(), key=lambda p: p.version, reverse=True)


def jaxlib_releases(minor: str) -> set[str] | None:
    """The jaxlib releases the package index has a wheel of for Python ``minor`` on this platform;
    None when the index could not be asked (offline, or pip failed)."""
    command = [sys.executable, "-m", "pip", "index", "versions", "jaxlib", "--python-version", minor,
               "--only-binary=:all:", "--disable-pip-version-check"]
    try:
        result = subprocess.run(command, capture_output=True, text=True, timeout=INDEX_TIMEOUT_S)
    except (OSError, subprocess.TimeoutExpired):
        return None
    if result.returncode != 0:
        # pip says "ERROR: No matching distribution found for jaxlib" when no release fits this Python
        return set() if "No matching distribution" in result.stderr else None
    listed = re.search(r"Available versions:\s*(.*)", result.stdout)
    return {v.strip() for v in listed.group(1).split(",") if v.strip()} if listed else set()


def releases_by_python(minors: list[str]) -> dict[str, set[str] | None]:
    """``jaxlib_releases`` for several Pythons at once (one index request each, in parallel)."""
    with concurrent.futures.ThreadPoolExecutor(len(minors) or 1) as pool:
        return dict(zip(minors, pool.map(jaxlib_releases, minors), strict=True))


def minor_key(minor: str) -> tuple[int, ...]:
    return tuple(int(part) for part in minor.split("."))
