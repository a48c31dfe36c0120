"""The built page as the in-process app serves it: compressed as the browser asks, hashed files kept for good,
the HTML asked for again each time, and the API index gzipped and made again when an older generator made it.

Uses the checkout's real build (frontend/dist, made by ``make frontend``): the names in its manifest, the
compressed copies the build wrote.
"""

from __future__ import annotations

import gzip
import json
import re
from pathlib import Path

import pytest
from starlette.testclient import TestClient

from jaxplay.server.app import create_app
from jaxplay.server.pages import api_index, assets
from jaxplay.settings import Settings

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def client(tmp_path):
    if assets.built_page() is None:
        pytest.fail("frontend/dist is not built: run `make frontend` first")
    app = create_app(Settings(data_dir=tmp_path, local_workers=0, allowed_hosts="testserver",
                              expected_backends="cpu"))
    with TestClient(app) as test_client:
        yield test_client


def linked_assets(html: str) -> list[str]:
    return re.findall(r'(?:href|src)="(/assets/[^"]+)"', html)


def test_the_html_links_the_builds_hashed_files_and_is_asked_for_again_each_time(client):
    page = client.get("/")
    assert page.status_code == 200 and page.headers["cache-control"] == "no-cache"
    manifest = json.loads(assets.MANIFEST.read_text())
    entry = manifest["src/main.ts"]["file"]
    linked = linked_assets(page.text)
    assert f"/{entry}" in linked and any(url.endswith(".css") for url in linked)
    for url in linked:
        assert assets.HASHED_NAME.fullmatch(url.rsplit("/", 1)[1]), url


@pytest.mark.parametrize(("accept", "encoding"), [
    ("gzip, deflate, br, zstd", "br"),  # what Chromium sends over HTTPS
    ("gzip, deflate", "gzip"),  # ... and over plain HTTP
    ("br;q=0, gzip", "gzip"),
    ("identity", None),
    ("", None),
])
def test_each_asset_comes_in_the_best_encoding_the_browser_takes_and_is_immutable(client, accept, encoding):
    for url in linked_assets(client.get("/").text):
        response = client.get(url, headers={"Accept-Encoding": accept})
        path = assets.ASSETS_DIR / url.rsplit("/", 1)[1]
        assert response.status_code == 200
        assert response.headers["vary"] == "Accept-Encoding"
        assert response.headers["cache-control"] == "public, max-age=31536000, immutable"
        assert response.headers.get("content-encoding") == encoding, (url, accept)
        # The test client undoes gzip itself (and passes brotli through: it has no decoder for it).
        sent = {"br": path.with_name(path.name + ".br"), "gzip": path.with_name(path.name + ".gz")}.get(encoding, path)
        assert int(response.headers["content-length"]) == sent.stat().st_size
        assert response.content == (sent.read_bytes() if encoding == "br" else path.read_bytes())
        if encoding == "gzip":
            assert gzip.decompress(sent.read_bytes()) == path.read_bytes()
        assert response.headers["content-type"].split(";")[0] in ("text/javascript", "application/javascript",
                                                                  "text/css")


def test_the_script_is_a_fraction_of_its_size_on_the_wire(client):
    script = next(u for u in linked_assets(client.get("/").text) if u.endswith(".js"))
    plain = (assets.ASSETS_DIR / script.rsplit("/", 1)[1]).stat().st_size
    sent = client.get(script, headers={"Accept-Encoding": "gzip"})
    assert int(sent.headers["content-length"]) < plain / 2.5


@pytest.mark.parametrize("path", [
    "/assets/..%2Fmanifest.json", "/assets/../manifest.json", "/assets/.hidden", "/assets/nothing-here.js",
])
def test_nothing_outside_the_assets_or_not_built_is_served(client, path):
    assert client.get(path).status_code == 404


def test_a_compressed_copy_is_not_served_by_its_own_name(client):
    script = next(u for u in linked_assets(client.get("/").text) if u.endswith(".js"))
    assert client.get(script + ".gz").status_code == 404


def test_the_flags_allow_list_is_gzipped_and_a_second_visit_gets_a_304_with_no_body(client):
    first = client.get("/api/flags", headers={"Accept-Encoding": "gzip, br"})
    assert first.status_code == 200 and first.headers["content-encoding"] == "gzip"
    assert first.json()["xla"] and first.headers["cache-control"] == "no-cache"
    assert int(first.headers["content-length"]) < len(first.content) / 3  # the catalogue compresses well
    again = client.get("/api/flags", headers={"If-None-Match": first.headers["etag"]})
    assert again.status_code == 304 and again.content == b""
    plain = client.get("/api/flags", headers={"Accept-Encoding": "identity", "If-None-Match": '"other"'})
    assert plain.status_code == 200 and "content-encoding" not in plain.headers and plain.json() == first.json()


def test_the_api_index_is_sent_gzipped_and_an_older_generators_file_is_served_when_none_can_be_made(tmp_path):
    folder = tmp_path / "api-index"
    folder.mkdir()
    modules = {"jax.numpy": {f"name{i}": {"k": "function", "s": "(a, axis=None)"} for i in range(400)}}
    current = {"format": api_index.INDEX_FORMAT, "jax_version": "0.0.9", "versions": {}, "modules": modules}
    (folder / "jax-0.0.9.json").write_text(json.dumps(current, sort_keys=True, separators=(",", ":")))
    older = {**current, "format": 1, "jax_version": "0.0.8"}
    (folder / "jax-0.0.8.json").write_text(json.dumps(older, sort_keys=True, separators=(",", ":")))
    assert api_index.is_current(folder / "jax-0.0.9.json") and not api_index.is_current(folder / "jax-0.0.8.json")
    app = create_app(Settings(data_dir=tmp_path, local_workers=0, allowed_hosts="testserver",
                              expected_backends="cpu", runtimes_dir=tmp_path / "no-runtimes"))
    with TestClient(app) as client:
        packed = client.get("/api/api-index/0.0.9", headers={"Accept-Encoding": "gzip, deflate"})
        assert packed.headers["content-encoding"] == "gzip" and packed.headers["vary"] == "Accept-Encoding"
        assert json.loads(packed.content) == current
        assert int(packed.headers["content-length"]) < (folder / "jax-0.0.9.json").stat().st_size / 5
        plain = client.get("/api/api-index/0.0.9", headers={"Accept-Encoding": "identity"})
        assert "content-encoding" not in plain.headers and plain.json() == current
        # No Python here makes 0.0.8: the older file is what there is.
        assert client.get("/api/api-index/0.0.8").json()["jax_version"] == "0.0.8"


def test_the_servers_index_format_is_the_generators():
    from jaxplay.sandbox.learning import api_index as generator

    assert api_index.INDEX_FORMAT == generator.FORMAT
