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

An index made by an older generator (its ``format`` below ``INDEX_FORMAT``) is
made again where this server can make it, and served as it is otherwise.

Any other version is a 404 that says how to make its index. The page asks
for an index only when completion or help first needs it; it is sent
gzipped to browsers that take it (compressed once, kept beside the file).
"""

from __future__ import annotations

import asyncio
import gzip
import json
import logging
import re
import sys
from pathlib import Path

from starlette.requests import Request
from starlette.responses import FileResponse, JSONResponse, Response
from starlette.routing import Route

from jaxplay.sandbox.runtimes import launch
from jaxplay.server.pages.assets import accepted_encodings
from jaxplay.settings import Settings

log = logging.getLogger("jaxplay.api_index")
VERSION = re.compile(r"^[0-9A-Za-z.+_-]{1,40}$")
GENERATE_TIMEOUT_S = 120.0
# sandbox/learning/api_index.py's FORMAT (tests/unit/test_page_assets.py holds them equal).
INDEX_FORMAT = 2
FORMAT_AT_START = re.compile(rb'\{"format":\s*(\d+)')


def is_current(path: Path) -> bool:
    """The file exists and was made by this generator (its keys are sorted: ``format`` comes first)."""
    try:
        with path.open("rb") as file:
            match = FORMAT_AT_START.match(file.read(32))
    except OSError:
        return False
    return match is not None and int(match.group(1)) >= INDEX_FORMAT


def gzipped(path: Path) -> Path:
    """``path``'s gzip copy beside it, made once (again when the file is newer)."""
    packed = path.with_name(path.name + ".gz")
    try:
        if packed.stat().st_mtime >= path.stat().st_mtime:
            return packed
    except OSError:
        pass
    partial = packed.with_name(packed.name + ".part")
    partial.write_bytes(gzip.compress(path.read_bytes(), compresslevel=9, mtime=0))
    partial.replace(packed)
    return packed


class ApiIndex:
    def __init__(self, settings: Settings) -> None:
        self.folder = Path(settings.data_dir) / "api-index"
        self.runtimes_dir = Path(settings.runtimes_dir).expanduser()
        self._lock = asyncio.Lock()
        self._local_version: str | None = None
        self._local_failed = False
        # Runtimes whose generator ran in this process: a failure is not retried on every request.
        self._runtimes_tried: set[str] = set()

    def routes(self) -> list[Route]:
        return [Route("/api/api-index/{jax_version}", self.serve)]

    def path_for(self, version: str) -> Path:
        return self.folder / f"jax-{version}.json"

    async def serve(self, request: Request) -> Response:
        version = request.path_params["jax_version"]
        if not VERSION.match(version):
            return JSONResponse({"message": "A JAX version looks like 0.4.38."}, status_code=400)
        path = self.path_for(version)
        if not is_current(path):
            await self._generate_local(version)
        if not is_current(path):
            await self._generate_for_runtime(version)
        if not path.exists():
            return JSONResponse({
                "message": f"No API index for jax {version} on this server: run "
                           f"`python -m jaxplay.sandbox.learning.api_index --out {self.folder}` with that worker's Python.",
            }, status_code=404)
        # Versioned content changes only with this server's generator: browsers may keep it a day.
        headers = {"Cache-Control": "public, max-age=86400", "Vary": "Accept-Encoding"}
        if "gzip" in accepted_encodings(request.headers.get("accept-encoding", "")):
            packed = await asyncio.to_thread(gzipped, path)
            return FileResponse(packed, media_type="application/json", headers={**headers, "Content-Encoding": "gzip"})
        return FileResponse(path, media_type="application/json", headers=headers)

    async def _generate_local(self, version: str) -> None:
        """Make the index with this server's Python, once, if its JAX is ``version``."""
        async with self._lock:
            if self._local_failed or (self._local_version is not None and self._local_version != version):
                return
            if is_current(self.path_for(version)):
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
            if is_current(self.path_for(version)) or version in self._runtimes_tried:
                return
            self._runtimes_tried.add(version)
            text = await self._run_generator(launch.command(python, "jaxplay.sandbox.learning.api_index"), {})
            if text is None or json.loads(text).get("jax_version") != version:
                return
            self.folder.mkdir(parents=True, exist_ok=True)
            partial = self.path_for(version).with_suffix(".part")
            partial.write_text(text, encoding="utf-8")
            partial.replace(self.path_for(version))

    async def _run_generator(self, command: list[str] | None = None, env: dict[str, str] | None = None) -> str | None:
        """The index as the generator prints it: this server's Python's, or ``command``'s (a runtime's)."""
        command = command or [sys.executable, "-m", "jaxplay.sandbox.learning.api_index"]
        process = await asyncio.create_subprocess_exec(
            *command,
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
