"""Build hook: the wheel carries the built page (frontend/dist) as ``server/frontend_dist``.

Everything else lives in pyproject.toml. The page is built by Node (``make dist``
builds it first); a wheel built without it would serve "the frontend is not
built", so building one is refused with the command that fixes it. Editable
installs read frontend/dist from the checkout and need no copy.
"""

from __future__ import annotations

import shutil
from pathlib import Path

from setuptools import setup
from setuptools.command.build_py import build_py

HERE = Path(__file__).resolve().parent
FRONTEND_DIST = HERE / "frontend" / "dist"
PACKAGED_AS = Path("server") / "frontend_dist"


class BuildPyWithPage(build_py):
    def run(self) -> None:
        super().run()
        if self.editable_mode:
            return
        if not (FRONTEND_DIST / "assets" / "app.js").is_file():
            raise SystemExit(
                "frontend/dist/assets/app.js is missing: build the page first with `make frontend` "
                "(or `cd frontend && npm ci && npm run build`), or build with `make dist`."
            )
        target = Path(self.build_lib) / PACKAGED_AS
        shutil.rmtree(target, ignore_errors=True)
        shutil.copytree(FRONTEND_DIST, target)


setup(cmdclass={"build_py": BuildPyWithPage})
