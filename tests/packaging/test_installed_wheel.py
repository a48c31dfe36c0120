"""The release path outside Docker: build the sdist and the wheel from it, install the
wheel into a fresh venv outside the checkout, start the installed ``jaxplay serve``
from ``/`` with no Node on PATH, load the page and its assets, and run code in the sandbox.

These are the steps the Dockerfile's stages run (tests/packaging/test_docker_files.py
checks that it does run them).
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.live_server import PROJECT_ROOT, LiveServer, done_of, output_text

# Installing the wheel into a fresh venv (jax, jaxlib, SciPy, matplotlib...) took 213 s of a 240 s limit
# on main under a load average of 19, and passed it beside other test processes.
BUILD_TIMEOUT_S = 480
# The first test's setup builds the sdist and the wheel, then installs the wheel (up to BUILD_TIMEOUT_S
# each): pytest-timeout's 300 s for every test would cut that short on a loaded machine.
pytestmark = [pytest.mark.live, pytest.mark.timeout(3 * BUILD_TIMEOUT_S + 180)]
# A PATH with the system's tools but no Node: the installed server must not need it.
NO_NODE_PATH = "/usr/sbin:/usr/bin:/sbin:/bin"


@pytest.fixture(scope="module")
def installed(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """A venv outside the checkout with the wheel (built from the sdist) installed; its bin/."""
    if not (PROJECT_ROOT / "frontend" / "dist" / "manifest.json").exists():
        pytest.fail("frontend/dist is not built: run `make frontend` first")
    root = tmp_path_factory.mktemp("installed")
    dist = root / "dist"
    subprocess.run([sys.executable, "-m", "build", "--outdir", str(dist), str(PROJECT_ROOT)], check=True,
                   capture_output=True, timeout=BUILD_TIMEOUT_S)
    [wheel] = dist.glob("jaxplay-*.whl")
    [sdist] = dist.glob("jaxplay-*.tar.gz")
    assert sdist.stat().st_size > 100_000  # carries the built page
    venv = root / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, timeout=120)
    subprocess.run([str(venv / "bin" / "pip"), "install", "--quiet", str(wheel)], check=True, capture_output=True,
                   timeout=BUILD_TIMEOUT_S, env={**os.environ, "PIP_DISABLE_PIP_VERSION_CHECK": "1"})
    yield venv / "bin"
    shutil.rmtree(root, ignore_errors=True)


def test_installed_package_lives_in_the_venv_not_the_checkout(installed: Path):
    where = subprocess.run(
        [str(installed / "python"), "-c", "import jaxplay.server.pages.editor as p, jaxplay.sandbox, jaxplay.cli; "
         "print(p.ASSETS_DIR); print(jaxplay.sandbox.__file__); print(jaxplay.cli.__file__)"],
        cwd="/", capture_output=True, text=True, check=True, env={"PATH": NO_NODE_PATH},
    ).stdout.split()
    venv = installed.parent
    for path in where:
        assert Path(path).is_relative_to(venv) and not Path(path).is_relative_to(PROJECT_ROOT), path
    assert Path(where[0]).parent.joinpath("manifest.json").is_file()
    assert [p.name for p in Path(where[0]).glob("app-*.js")]
    version = subprocess.run([str(installed / "jaxplay"), "--version"], capture_output=True, text=True, check=True)
    assert re.fullmatch(r"jaxplay \d+\.\d+\.\d+\S*\n", version.stdout)


def test_the_wheel_installs_one_top_level_name(installed: Path):
    """Everything lives under ``jaxplay``: no ``server`` or ``sandbox`` to collide with another distribution's."""
    site = installed.parent / "lib" / f"python{sys.version_info.major}.{sys.version_info.minor}" / "site-packages"
    [info] = site.glob("jaxplay-*.dist-info")
    tops = {line.split(",")[0].split("/")[0] for line in (info / "RECORD").read_text().splitlines() if line}
    assert tops - {"..", info.name} == {"jaxplay"}, tops
    for generic in ("server", "sandbox", "jaxplay_cli"):
        assert not (site / generic).exists(), generic


def test_installed_serve_from_root_serves_the_page_and_runs_code(installed: Path, tmp_path: Path):
    env = {"PATH": NO_NODE_PATH, "HOME": str(tmp_path), "PYTHONPATH": ""}
    server = LiveServer(tmp_path / "data", env=env, command=[str(installed / "jaxplay")], cwd=Path("/"))
    try:
        server.wait_ready(timeout_s=180)
        with urllib.request.urlopen(server.http_url + "/", timeout=10) as response:
            assert response.status == 200
            page = response.read().decode()
        assets = re.findall(r'(?:href|src)="(/assets/[^"]+)"', page)
        assert sorted(re.sub(r"-[\w-]{8}\.", "-HASH.", a) for a in assets) == ["/assets/app-HASH.css",
                                                                             "/assets/app-HASH.js"], assets
        for asset in assets:
            with urllib.request.urlopen(server.http_url + asset, timeout=10) as response:
                assert response.status == 200 and len(response.read()) > 1000
            # The wheel carries the build's compressed copies: a browser gets them.
            request = urllib.request.Request(server.http_url + asset, headers={"Accept-Encoding": "gzip"})
            with urllib.request.urlopen(request, timeout=10) as response:
                assert response.headers["Content-Encoding"] == "gzip", asset
        assert server.get_json("/api/backends")["version"] == installed_version(installed)

        site = installed.parent / "lib" / f"python{sys.version_info.major}.{sys.version_info.minor}" / "site-packages"
        events = server.run(f"import os\nprint(1)\nprint(sorted(os.listdir({str(site)!r})))\n"
                            f"print(sorted(os.listdir({str(site / 'jaxplay')!r})))")
        assert done_of(events)["status"] == "ok", events[-3:]
        first, listing, own = output_text(events).splitlines()
        assert first == "1"
        # The sandbox sees what runs import and our own packages, not the venv's server-side libraries.
        assert "jax" in listing and "jaxplay" in listing and "sandbox" in own
        for hidden in ("starlette", "uvicorn", "websockets", "server", "sandbox", "jaxplay_cli", "pip"):
            assert f"'{hidden}'" not in listing, hidden
        for hidden in ("server", "cli"):
            assert f"'{hidden}'" not in own, hidden
    finally:
        server.stop()


def installed_version(bin_dir: Path) -> str:
    out = subprocess.run([str(bin_dir / "jaxplay"), "--version"], capture_output=True, text=True, check=True)
    return out.stdout.split()[1]
