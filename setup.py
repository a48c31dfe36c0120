"""Build: one installed name, ``jaxplay``, and the built page inside it.

The repository's ``server/`` and ``sandbox/`` folders install as
``jaxplay.server`` and ``jaxplay.sandbox`` (``PACKAGE_DIRS``), so nothing
lands in site-packages under a generic top-level name. The wheel carries the
built page (frontend/dist) as ``jaxplay/server/pages/frontend_dist``.
Everything else lives in pyproject.toml. The page is built by Node (``make dist``
builds it first); a wheel built without it would serve "the frontend is not
built", so building one is refused with the command that fixes it. Editable
installs read frontend/dist from the checkout and need no copy.
"""

from __future__ import annotations

import shutil
from pathlib import Path

from setuptools import find_packages, setup
from setuptools.command.build_py import build_py

HERE = Path(__file__).resolve().parent
FRONTEND_DIST = HERE / "frontend" / "dist"
PACKAGED_AS = Path("jaxplay") / "server" / "pages" / "frontend_dist"
# Installed package -> its folder in the repository.
PACKAGE_DIRS = {"jaxplay": "jaxplay", "jaxplay.server": "server", "jaxplay.sandbox": "sandbox"}


# Not a package but an import root of its own: the runner puts it on sys.path (``import playground``).
USERLIB = ["jaxplay.sandbox.userlib", "jaxplay.sandbox.userlib.playground"]


def packages() -> list[str]:
    """Every package under each installed root."""
    found = list(USERLIB)
    for name, folder in PACKAGE_DIRS.items():
        found += [name, *(f"{name}.{sub}" for sub in find_packages(str(HERE / folder)))]
    return found


class BuildPyWithPage(build_py):
    def run(self) -> None:
        super().run()
        if self.editable_mode:
            return
        if not (FRONTEND_DIST / "manifest.json").is_file():
            raise SystemExit(
                "frontend/dist/manifest.json is missing: build the page first with `make frontend` "
                "(or `cd frontend && npm ci && npm run build`), or build with `make dist`."
            )
        target = Path(self.build_lib) / PACKAGED_AS
        shutil.rmtree(target, ignore_errors=True)
        shutil.copytree(FRONTEND_DIST, target)


setup(packages=packages(), package_dir=PACKAGE_DIRS, cmdclass={"build_py": BuildPyWithPage})
