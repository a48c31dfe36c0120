"""``jaxplay runtimes add`` refuses what it cannot install here in one line, before anything is downloaded.

The real command in a subprocess, against a package index of this test's own
(a folder of jaxlib wheel names: pip lists releases from the names, and never
downloads one here), with the host's Pythons narrowed to what each case
needs: this worker's own Python alone (JAX 0.12 then needs one it does not
have), or a python3.13 on PATH that cannot make a venv.
"""

from __future__ import annotations

import json
import os
import platform
import subprocess
import sys
from importlib import metadata
from pathlib import Path

import pytest

from jaxplay.sandbox.runtimes import pythons, store

# Release -> the Pythons PyPI has a jaxlib wheel for (as it does: 0.11 dropped 3.11).
RELEASES = {"0.4.38": ("311", "312", "313"), "0.10.2": ("311", "312", "313"), "0.11.2": ("312", "313"),
            "0.12.0.1": ("312", "313", "314")}


@pytest.fixture
def index(tmp_path: Path) -> Path:
    """A simple index holding jaxlib's wheel names for this machine's platform."""
    page = tmp_path / "index" / "jaxlib"
    page.mkdir(parents=True)
    machine = platform.machine()
    names = [f"jaxlib-{release}-cp{tag}-cp{tag}-manylinux2014_{machine}.whl"
             for release, tags in RELEASES.items() for tag in tags]
    page.joinpath("index.html").write_text("".join(f'<a href="{name}">{name}</a>\n' for name in names))
    return tmp_path / "index"


def add(tmp_path: Path, index: Path, *arguments: str, path: str = "") -> subprocess.CompletedProcess:
    """``jaxplay runtimes add ...`` with this test's index and no pyenv: the worker's own Python and what
    ``path`` holds are the host's Pythons."""
    env = {"PATH": path or str(tmp_path / "empty"), "HOME": str(tmp_path), "PYENV_ROOT": str(tmp_path / "no-pyenv"),
           "PIP_CONFIG_FILE": os.devnull, "PIP_INDEX_URL": index.as_uri(), "PIP_DISABLE_PIP_VERSION_CHECK": "1"}
    return subprocess.run([sys.executable, "-m", "jaxplay.cli", "runtimes", "add", *arguments,
                           "--runtimes-dir", str(tmp_path / "runtimes")],
                          capture_output=True, text=True, timeout=300, env=env)


def lines(text: str) -> list[str]:
    return [line for line in text.splitlines() if line.strip()]


def nothing_made(tmp_path: Path, version: str) -> bool:
    folder = store.folder_for(tmp_path / "runtimes", version)
    return not folder.exists() and not folder.with_name(folder.name + ".part").exists()


def test_a_jax_that_needs_a_newer_python_than_the_host_has_is_refused_naming_it(tmp_path, index):
    own = pythons.probe(pythons.own_base())
    assert own is not None
    if own.minor != "3.11":
        pytest.skip(f"this venv runs Python {own.minor}, which JAX 0.12 supports")
    result = add(tmp_path, index, "0.12.0.1")
    assert result.returncode == 1
    (line,) = lines(result.stderr)
    assert "JAX 0.12.0.1 needs Python 3.12 to 3.14 and this host has 3.11" in line
    assert "apt-get install python3.13" in line and "--python" in line
    assert nothing_made(tmp_path, "0.12.0.1")
    # The worker says the same where the version is offered: /readyz and the page show it.
    problem = store.missing_reason(tmp_path / "runtimes", "0.12.0.1")
    assert problem.startswith("it cannot be installed here: JAX 0.12.0.1 needs Python 3.12 to 3.14"), problem


def test_make_run_goes_on_without_an_optional_version_and_says_what_runs_get(tmp_path, index):
    result = add(tmp_path, index, "0.12.0.1", "--optional", "0.12.0.1")
    assert result.returncode == 0
    (line,) = [line for line in lines(result.stderr) if "0.12.0.1" in line]
    assert line.startswith("JAX 0.12.0.1 is left out on this host: JAX 0.12.0.1 needs Python 3.12")
    assert f"Runs that name no version get JAX {metadata.version('jax')} instead" in line


def test_an_unknown_version_is_refused_with_released_ones(tmp_path, index):
    result = add(tmp_path, index, "0.12.7")
    assert result.returncode == 1
    (line,) = lines(result.stderr)
    assert "JAX 0.12.7 is not on the package index: give a released version, e.g. 0.12.0.1, 0.11.2, 0.10.2" in line
    assert nothing_made(tmp_path, "0.12.7")


def test_a_given_python_too_old_for_the_version_is_refused(tmp_path, index):
    result = add(tmp_path, index, "0.11.2", "--python", str(pythons.own_base()))
    assert result.returncode == 1
    (line,) = lines(result.stderr)
    assert "JAX 0.11.2 has no jaxlib for Python 3.11" in line and "give --python a Python 3.12 to 3.13" in line
    assert nothing_made(tmp_path, "0.11.2")


@pytest.mark.parametrize(("version", "says"), [("0.3.9", "older than the oldest jaxlib"),
                                               ("latest", "is not a JAX version")])
def test_a_version_no_index_can_have_is_refused_without_asking_one(tmp_path, version, says):
    result = add(tmp_path, tmp_path / "no-index", version)
    assert result.returncode == 1
    (line,) = lines(result.stderr)
    assert says in line


def test_a_python_that_cannot_make_a_venv_is_named_with_the_package_that_gives_it(tmp_path, index):
    """Debian's python3.13 without python3.13-venv: found, fits, and cannot make the runtime's venv."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    fake = bin_dir / "python3.13"  # answers the probe as a 3.13 without venv
    fake.write_text("#!/bin/sh\necho '{\"executable\": \"" + str(fake) + "\", \"version\": [3, 13, 0], "
                    "\"venv\": false}'\n")
    fake.chmod(0o755)
    result = add(tmp_path, index, "0.12.0.1", path=str(bin_dir))
    assert result.returncode == 1
    (line,) = lines(result.stderr)
    assert "cannot make a venv" in line and "python3.13-venv" in line
    assert json.loads(store.failure_file(tmp_path / "runtimes", "0.12.0.1").read_text())["message"] in line
