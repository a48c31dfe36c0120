"""The built page's files at ``/assets/{name}``: found through Vite's manifest, sent compressed, cached for good.

The build (frontend/vite.config.ts) names every file after a hash of its
content (``app-C5ctn_Rt.js``) and writes ``name.br`` and ``name.gz`` beside
each text file. So:

- the page's HTML links the entry's script and stylesheet by the names in
  ``dist/manifest.json`` (``BuiltPage``), read again only when that file changes;
- a hashed file never changes under its name: ``Cache-Control: immutable`` for
  a year, and a second visit asks for none of them;
- each answer is the smallest encoding the browser accepts (brotli, then gzip,
  then the file itself) with ``Vary: Accept-Encoding``, taken from disk as the
  build wrote it, with nothing compressed per request.

Names are flat (the build writes one folder) and checked before any path is
made from them, so nothing outside the folder can be named.
"""

from __future__ import annotations

import gzip
import hashlib
import json
import mimetypes
import re
from dataclasses import dataclass
from pathlib import Path

from starlette.requests import Request
from starlette.responses import FileResponse, PlainTextResponse, Response
from starlette.routing import Route

PROJECT_ROOT = Path(__file__).resolve().parents[2]  # a checkout's root (server/pages/ is two below it)
PACKAGED_DIST = Path(__file__).resolve().parent / "frontend_dist"
CHECKOUT_DIST = PROJECT_ROOT / "frontend" / "dist"
# An installed wheel has only the packaged copy; a checkout has only frontend/dist.
DIST_DIR = PACKAGED_DIST if PACKAGED_DIST.is_dir() else CHECKOUT_DIST
ASSETS_DIR = DIST_DIR / "assets"
MANIFEST = DIST_DIR / "manifest.json"
ENTRY = "src/main.ts"

SAFE_NAME = re.compile(r"[A-Za-z0-9_][A-Za-z0-9._-]{0,200}")
# Vite's [hash]: 8 characters of base64url before the extension (a source map keeps its script's).
HASHED_NAME = re.compile(r".+-[A-Za-z0-9_-]{8}\.[a-z0-9]+(?:\.map)?")
IMMUTABLE = "public, max-age=31536000, immutable"
REVALIDATE = "no-cache"
# Preferred first; each with the suffix the build gave its copies.
ENCODINGS = (("br", ".br"), ("gzip", ".gz"))


@dataclass(frozen=True)
class BuiltPage:
    """What the HTML links: URLs under /assets/."""

    script: str
    stylesheets: tuple[str, ...]
    # Chunks the entry imports statically: fetched alongside the script, not after it.
    preloads: tuple[str, ...]
    # Names the build (the entry script's hashed name): pages rendered from another build differ.
    version: str


_cached: tuple[float, BuiltPage | None] | None = None


def built_page() -> BuiltPage | None:
    """The entry's files from the manifest; None while the page is not built."""
    global _cached
    try:
        mtime = MANIFEST.stat().st_mtime
    except OSError:
        return None
    if _cached is None or _cached[0] != mtime:
        _cached = (mtime, _read_manifest(json.loads(MANIFEST.read_text(encoding="utf-8"))))
    return _cached[1]


def _read_manifest(manifest: dict) -> BuiltPage | None:
    entry = manifest.get(ENTRY)
    if not isinstance(entry, dict) or not isinstance(entry.get("file"), str):
        return None
    preloads: list[str] = []
    stylesheets = list(entry.get("css", []))
    seen: set[str] = set()
    pending = list(entry.get("imports", []))
    while pending:  # the static imports' own static imports too
        key = pending.pop()
        if key in seen or not isinstance(manifest.get(key), dict):
            continue
        seen.add(key)
        chunk = manifest[key]
        preloads.append(chunk["file"])
        stylesheets += chunk.get("css", [])
        pending += chunk.get("imports", [])
    # With one stylesheet for the whole app (cssCodeSplit: false) it stands apart from the entry.
    stylesheets += [c["file"] for c in manifest.values()
                    if isinstance(c, dict) and str(c.get("file", "")).endswith(".css") and not c.get("isEntry")]
    url = "/{}".format
    return BuiltPage(url(entry["file"]), tuple(url(s) for s in dict.fromkeys(stylesheets)),
                     tuple(url(p) for p in preloads), Path(entry["file"]).name)


def accepted_encodings(header: str) -> set[str]:
    """The codings an Accept-Encoding header allows (``q=0`` refuses one)."""
    accepted: set[str] = set()
    for part in header.lower().split(","):
        coding, _, params = part.strip().partition(";")
        q = re.search(r"q\s*=\s*([0-9.]+)", params)
        if coding and not (q and _is_zero(q.group(1))):
            accepted.add(coding.strip())
    return accepted


def _is_zero(text: str) -> bool:
    try:
        return float(text) == 0
    except ValueError:
        return False


async def serve_asset(request: Request) -> Response:
    name = request.path_params["name"]
    path = ASSETS_DIR / name
    if not SAFE_NAME.fullmatch(name) or name.endswith((".br", ".gz")) or not path.is_file():
        return PlainTextResponse("Not Found", status_code=404)
    media_type = "application/json" if name.endswith(".map") else mimetypes.guess_type(name)[0]
    media_type = media_type or "application/octet-stream"
    if media_type.startswith("text/") or media_type == "application/javascript":
        media_type += "; charset=utf-8"
    headers = {"Cache-Control": IMMUTABLE if HASHED_NAME.fullmatch(name) else REVALIDATE, "Vary": "Accept-Encoding"}
    accepted = accepted_encodings(request.headers.get("accept-encoding", ""))
    for coding, suffix in ENCODINGS:
        compressed = path.with_name(name + suffix)
        if coding in accepted and compressed.is_file():
            headers["Content-Encoding"] = coding
            return FileResponse(compressed, media_type=media_type, headers=headers)
    return FileResponse(path, media_type=media_type, headers=headers)


def routes() -> list[Route]:
    return [Route("/assets/{name:path}", serve_asset, methods=["GET", "HEAD"])]


class ConstantJson:
    """A JSON document fixed for the server's life (the flags' allow-list), made once: gzip-compressed when the
    browser accepts it, and revalidated by its ETag, so a second visit gets a 304 with no body."""

    def __init__(self, document: object) -> None:
        self.body = json.dumps(document, separators=(",", ":")).encode()
        self.gzipped = gzip.compress(self.body, 9, mtime=0)
        self.etag = '"' + hashlib.sha256(self.body).hexdigest()[:20] + '"'

    def answer(self, request: Request) -> Response:
        headers = {"Cache-Control": REVALIDATE, "ETag": self.etag, "Vary": "Accept-Encoding"}
        asked = {tag.strip().removeprefix("W/") for tag in request.headers.get("if-none-match", "").split(",")}
        if self.etag in asked or "*" in asked:
            return Response(status_code=304, headers=headers)
        if "gzip" in accepted_encodings(request.headers.get("accept-encoding", "")):
            return Response(self.gzipped, media_type="application/json", headers={**headers, "Content-Encoding": "gzip"})
        return Response(self.body, media_type="application/json", headers=headers)
