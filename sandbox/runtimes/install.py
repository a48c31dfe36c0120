"""Adding and removing JAX runtimes with pip: ``jaxplay runtimes add 0.6.2`` (jaxplay/cli/runtimes.py).

An install is a fresh venv from a Python that JAX release supports
(``choose_python``: this worker's own where it can, else the newest one the
host has, as sandbox/runtimes/pythons.py finds them; JAX 0.11 and newer need
3.12 or newer), then one ``pip install`` of the pins
``sandbox/runtimes/pins.py`` gives for that JAX. Before anything is
downloaded, the package index is asked which Pythons have a jaxlib of that
release: an unknown version, or one no Python here can run, is refused in one
line naming what to give. It is built in ``jax-V.part`` and renamed into place once
``runtime.json`` is written, so a worker never sees half an install; a lock
per version lets two ``make`` runs share the folder. Installing a runtime
that is already complete does nothing. A failed install leaves
``jax-V.failed.json`` with pip's last words, which the worker reports.
"""

from __future__ import annotations

import fcntl
import json
import os
import re
import shutil
import subprocess
import sys
import time
from collections.abc import Callable
from datetime import UTC, datetime
from importlib import metadata
from pathlib import Path
from typing import Any

from jaxplay.sandbox.runtimes import pins, pythons, store
from jaxplay.sandbox.runtimes.pythons import HostPython

PIP_TIMEOUT_S = 1800.0
VERSIONS_PROGRAM = ("import json, importlib.metadata as m; "
                    "print(json.dumps({d.metadata['Name'].lower(): d.version for d in m.distributions()}))")


class InstallFailed(RuntimeError):
    pass


def newest_pins(python: tuple[int, ...] = sys.version_info[:2]) -> dict[str, str]:
    """The ``worker-libs`` pins of this project (pyproject.toml) for a runtime made from Python ``python``:
    JAX 0.10's libraries on 3.11, the newest line's on 3.12 and newer (their ``python_version`` markers)."""
    found: dict[str, str] = {}
    try:
        requirements = metadata.requires("jaxplay") or []
    except metadata.PackageNotFoundError:
        return found
    for requirement in requirements:
        spec, _, marker = requirement.partition(";")
        if "worker-libs" in marker and "==" in spec and _python_fits(marker, tuple(python[:2])):
            name, _, version = spec.partition("==")
            found[name.strip().lower()] = version.strip()
    return found


_PYTHON_MARKER = re.compile(r"""python_version\s*(<=|>=|<|>|==)\s*["'](\d+)\.(\d+)["']""")


def _python_fits(marker: str, python: tuple[int, ...]) -> bool:
    """Whether every ``python_version`` clause of a requirement's marker holds for ``python`` (3, 13)."""
    compare = {"<": lambda a, b: a < b, "<=": lambda a, b: a <= b, ">": lambda a, b: a > b,
               ">=": lambda a, b: a >= b, "==": lambda a, b: a == b}
    return all(compare[op](python, (int(major), int(minor))) for op, major, minor in _PYTHON_MARKER.findall(marker))


def disk_bytes(folder: Path) -> int:
    """Allocated bytes (blocks), not apparent sizes."""
    total = 0
    for root, _, files in os.walk(folder):
        for name in files:
            try:
                total += os.lstat(os.path.join(root, name)).st_blocks * 512
            except OSError:
                pass
    return total


def add(version: str, runtimes_dir: Path, say: Callable[[str], None] = print,
        extra_pip_args: tuple[str, ...] = (), python: str = "") -> dict[str, Any]:
    """Install JAX ``version`` as a runtime (or find it installed); returns its record.

    ``python``: the interpreter to make its venv from (--python); empty: ``choose_python``'s.
    A version that cannot be installed here raises ValueError before anything is downloaded."""
    pins.check_version(version)
    runtimes_dir = runtimes_dir.expanduser()
    runtimes_dir.mkdir(parents=True, exist_ok=True)
    with open(store.lock_file(runtimes_dir, version), "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        record = store.record_of(runtimes_dir, version)
        if record is not None:
            say(f"JAX {version} is installed already ({store.folder_for(runtimes_dir, version)}).")
            return record
        try:
            chosen = choose_python(version, python, say)
            record = _install(version, runtimes_dir, say, extra_pip_args, chosen)
        except (InstallFailed, ValueError) as exc:  # the worker says why it is not offered (store.offered)
            # A half-made venv is never offered (it has no record); it goes at once, with its gigabyte.
            shutil.rmtree(store.folder_for(runtimes_dir, version).with_name(f"jax-{version}.part"),
                          ignore_errors=True)
            store.failure_file(runtimes_dir, version).write_text(json.dumps(
                {"version": version, "message": str(exc), "at": _now(),
                 "refused": isinstance(exc, ValueError)}))  # refused before any download
            raise
        store.failure_file(runtimes_dir, version).unlink(missing_ok=True)
        return record


def choose_python(version: str, given: str = "", say: Callable[[str], None] = print) -> HostPython:
    """The Python to make runtime ``version``'s venv from: ``given`` if its JAX supports it; else this
    worker's own if it does (the runtimes before 0.11 stay as they were made); else the newest that
    does. A ValueError says in one line what to give instead."""
    found = pythons.host_pythons(given)
    minors = sorted({p.minor for p in found} | {f"3.{m}" for m in pythons.KNOWN_MINORS}, key=pythons.minor_key)
    releases = pythons.releases_by_python(minors)
    if all(listed is None for listed in releases.values()):
        say(f"The package index could not be asked which Pythons JAX {version} supports: choosing by its line.")
        supported = [m for m in minors if pythons.minor_key(m) >= pins.python_floor(version)]
    else:
        supported = [m for m in minors if version in (releases[m] or ())]
    if not supported:
        known = sorted(set().union(*(listed for listed in releases.values() if listed)), key=store.version_key)
        raise ValueError(f"JAX {version} is not on the package index: give a released version, e.g. "
                         f"{', '.join(reversed(known[-3:])) or '0.4.38'}.")
    fitting = [p for p in found if p.minor in supported]
    needs = _span(supported)
    if not fitting:
        if given:
            raise ValueError(f"JAX {version} has no jaxlib for {found[0]}: give --python a Python {needs}.")
        have = ", ".join(dict.fromkeys(p.minor for p in found))
        raise ValueError(f"JAX {version} needs Python {needs} and this host has {have}: {pythons.HOW_TO_GET}.")
    own = pythons.own_base().resolve()
    chosen = next((p for p in fitting if p.executable.resolve() == own), None) if not given else None
    chosen = chosen or next((p for p in fitting if p.makes_venvs), None)
    if chosen is None:
        raise ValueError(f"{fitting[0]} cannot make a venv (no venv or ensurepip module): install "
                         f"python{fitting[0].minor}-venv, or {pythons.HOW_TO_GET}.")
    return chosen


def _span(minors: list[str]) -> str:
    """``["3.12", "3.13", "3.14"]`` -> ``3.12 to 3.14``."""
    return minors[0] if len(minors) == 1 else f"{minors[0]} to {minors[-1]}"


def _install(version: str, runtimes_dir: Path, say: Callable[[str], None],
             extra_pip_args: tuple[str, ...], python: HostPython) -> dict[str, Any]:
    target = store.folder_for(runtimes_dir, version)
    partial = target.with_name(target.name + ".part")
    shutil.rmtree(partial, ignore_errors=True)
    shutil.rmtree(target, ignore_errors=True)  # an install without its record is incomplete
    requirements = pins.requirements(version, newest_pins(python.version))
    started = time.monotonic()
    say(f"Installing JAX {version} into {target} with {python}: {' '.join(requirements)}")
    _call([str(python.executable), "-m", "venv", str(partial)], "making its venv")
    interpreter = str(partial / "bin" / "python")
    _call([interpreter, "-m", "pip", "install", "-q", "--disable-pip-version-check", *extra_pip_args,
           *requirements], "pip install")
    versions = json.loads(_call([interpreter, "-I", "-c", VERSIONS_PROGRAM], "listing what was installed"))
    if versions.get("jax") != version or versions.get("jaxlib") != version:
        raise InstallFailed(f"pip installed jax {versions.get('jax')} and jaxlib {versions.get('jaxlib')}, "
                            f"not {version}")
    record = {"jax_version": version, "jaxlib_version": versions["jaxlib"],
              "python": ".".join(map(str, python.version)), "python_executable": str(python.executable),
              "requirements": requirements,
              "distributions": versions, "installed_at": _now(),
              "install_seconds": round(time.monotonic() - started, 1), "disk_bytes": disk_bytes(partial)}
    (partial / store.RECORD).write_text(json.dumps(record, indent=1, sort_keys=True))
    partial.rename(target)
    say(f"JAX {version} installed in {record['install_seconds']:.0f} s, "
        f"{record['disk_bytes'] / 2**30:.2f} GiB on disk.")
    return record


def _call(command: list[str], what: str) -> str:
    try:
        result = subprocess.run(command, capture_output=True, text=True, timeout=PIP_TIMEOUT_S)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise InstallFailed(f"{what} failed: {exc}") from exc
    if result.returncode != 0:
        lines = [line for line in (result.stderr or result.stdout).splitlines() if "is ignored" not in line]
        raise InstallFailed(f"{what} failed: {' '.join(lines[-6:])[-1200:]}")
    return result.stdout


def remove(version: str, runtimes_dir: Path) -> bool:
    """Delete runtime ``version`` (and any failed-install record); True if there was one."""
    pins.check_version(version)
    runtimes_dir = runtimes_dir.expanduser()
    target = store.folder_for(runtimes_dir, version)
    failed = store.failure_file(runtimes_dir, version)
    existed = target.exists() or failed.exists()
    shutil.rmtree(target, ignore_errors=True)
    shutil.rmtree(target.with_name(target.name + ".part"), ignore_errors=True)
    failed.unlink(missing_ok=True)
    return existed


def listing(runtimes_dir: Path) -> list[dict[str, Any]]:
    """Every runtime under the folder: installed ones with their record, failed ones with the reason."""
    runtimes_dir = runtimes_dir.expanduser()
    rows: list[dict[str, Any]] = []
    for version in store.installed_versions(runtimes_dir):
        record = store.record_of(runtimes_dir, version) or {}
        rows.append({"version": version, "state": "installed", **record})
    for failed in sorted(runtimes_dir.glob(f"jax-*{store.FAILED_SUFFIX}")):
        version = failed.name[4:-len(store.FAILED_SUFFIX)]
        try:
            message = json.loads(failed.read_text()).get("message", "")
        except (OSError, ValueError):
            message = "unreadable record"
        rows.append({"version": version, "state": "failed", "message": message})
    return rows


def _now() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
