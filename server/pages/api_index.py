"""``GET /api/api-index/{jax_version}``: the editor's completion and help data for one JAX version.

The page asks for the version its chosen backend runs (``/api/backends``
reports ``jax_version``), so the names it offers are the ones that exist
where the code runs. Answers come from, in order:

1. ``<data dir>/api-index/jax-<version>.json``: made by
   ``python -m jaxplay.sandbox.learning.api_index --out <data dir>/api-index`` with a worker
   host's Python (for remote workers whose JAX differs from the server's);
2. the server's own Python, when its JAX is that version (the local workers'
   environment), or the Python of the JAX runtime of that version installed under
   ``--runtimes-dir`` (sandbox/runtimes/): ``jaxplay.sandbox.learning.api_index`` runs once
   in a subprocess and its answer is kept in that folder for next time.

Any other version is a 404 that says how to make its index.
"""

from __future__ import annotations

import asyncio
import json
import logging
import re
import sys
from pathlib import Path

from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

import jaxplay
from jaxplay.settings import Settings

log = logging.getLogger("jaxplay.api_index")
VERSION = re.compile(r"^[0-9A-Za-z.+_-]{1,40}$")
GENERATE_TIMEOUT_S = 120.0


class ApiIndex:
    def __init__(self, settings: Settings) -> None:
        self.folder = Path(settings.data_dir) / "api-index"
        self.runtimes_dir = Path(settings.runtimes_dir).expanduser()
        self._lock = asyncio.Lock()
        self._local_version: str | None = None
        self._local_failed = False

    def routes(self) -> list[Route]:
        return [Route("/api/api-index/{jax_version}", self.serve)]

    def path_for(self, version: str) -> Path:
        return self.folder / f"jax-{version}.json"

    async def serve(self, request: Request) -> Response:
        version = request.path_params["jax_version"]
        if not VERSION.match(version):
            return JSONResponse({"message": "A JAX version looks like 0.4.38."}, status_code=400)
        path = self.path_for(version)
        if not path.exists():
            await self._generate_local(version)
        if not path.exists():
            await self._generate_for_runtime(version)
        if not path.exists():
            return JSONResponse({
                "message": f"No API index for jax {version} on this server: run "
                           f"`python -m jaxplay.sandbox.learning.api_index --out {self.folder}` with that worker's Python.",
            }, status_code=404)
        # Versioned content never changes: browsers may keep it.
        return Response(path.read_bytes(), media_type="application/json",
                        headers={"Cache-Control": "public, max-age=86400"})

    async def _generate_local(self, version: str) -> None:
        """Make the index with this server's Python, once, if its JAX is ``version``."""
        async with self._lock:
            if self._local_failed or (self._local_version is not None and self._local_version != version):
                return
            if self.path_for(version).exists():
                return
            text = await self._run_generator()
            if text is None:
                self._local_failed = True
                return
            made = json.loads(text)["jax_version"]
            self._local_version = made
            self.folder.mkdir(parents=True, exist_ok=True)
            target = self.path_for(made)
            partial = target.with_suffix(".part")
            partial.write_text(text, encoding="utf-8")
            partial.replace(target)

    async def _generate_for_runtime(self, version: str) -> None:
        """Make the index with the Python of the installed runtime of ``version`` (its folder is
        ``jax-<version>``, as sandbox/runtimes/store.py lays them out), once."""
        python = self.runtimes_dir / f"jax-{version}" / "bin" / "python"
        if not (self.runtimes_dir / f"jax-{version}" / "runtime.json").is_file():
            return
        async with self._lock:
            if self.path_for(version).exists():
                return
            text = await self._run_generator(str(python), {"PYTHONPATH": str(jaxplay.IMPORT_ROOT)})
            if text is None or json.loads(text).get("jax_version") != version:
                return
            self.folder.mkdir(parents=True, exist_ok=True)
            partial = self.path_for(version).with_suffix(".part")
            partial.write_text(text, encoding="utf-8")
            partial.replace(self.path_for(version))

    async def _run_generator(self, python: str = sys.executable, env: dict[str, str] | None = None) -> str | None:
        process = await asyncio.create_subprocess_exec(
            python, "-m", "jaxplay.sandbox.learning.api_index",
            stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
            env=None if env is None else {"PATH": "/usr/bin:/bin", **env},
        )
        try:
            out, err = await asyncio.wait_for(process.communicate(), GENERATE_TIMEOUT_S)
        except TimeoutError:
            process.kill()
            await process.wait()
            log.warning("making the API index took over %.0f s; completion stays off", GENERATE_TIMEOUT_S)
            return None
        if process.returncode != 0:
            log.warning("making the API index failed: %s", err.decode(errors="replace")[-2000:])
            return None
        return out.decode()
