"""The editor's API index: made from the worker's JAX, served per version, refused for versions it is not."""

from __future__ import annotations

import json
import urllib.error
import urllib.request

import pytest


def get(live, path: str) -> tuple[int, dict]:
    try:
        with urllib.request.urlopen(live.http_url + path, timeout=120) as response:
            return response.status, json.load(response)
    except urllib.error.HTTPError as err:
        return err.code, json.load(err)


def test_the_index_for_the_workers_jax_lists_its_public_api(live) -> None:
    version = live.get_json("/api/backends")["backends"][0]["jax_version"]
    status, index = get(live, f"/api/api-index/{version}")
    assert status == 200 and index["jax_version"] == version and index["versions"]["jax"] == version
    modules = index["modules"]
    for name in ("jax", "jax.numpy", "jax.lax", "jax.random", "jax.sharding", "jax.tree"):
        assert modules[name], name
    assert modules["jax.numpy"]["sum"]["k"] == "function"
    assert modules["jax.numpy"]["sum"]["s"].startswith("(a: ArrayLike, axis")
    assert modules["jax.numpy"]["sum"]["d"].startswith("Sum of the elements")
    assert modules["jax"]["numpy"]["k"] == "module"
    assert "tree_map" not in modules["jax"]  # removed from this JAX: never offered
    assert "timeit" in modules["playground"]


@pytest.mark.parametrize(("version", "status"), [("0.0.1", 404), ("not%20a%20version", 400)])
def test_other_versions_are_refused_with_a_reason(live, version: str, status: int) -> None:
    code, body = get(live, f"/api/api-index/{version}")
    assert code == status and body["message"]
