"""The sandbox's own security tests run on the worker's own JAX and on the newest runtime, in its own Python.

A runtime may run another Python than the worker (3.13 for JAX 0.12): its
sandbox exposes that Python's install, and the seccomp filter, namespaces
and limits must hold there exactly as for the default. ``live_on_runtime``
gives the containment and isolation modules a server per runtime: the
worker's own JAX, then each runtime ``JAXPLAY_SECURITY_RUNTIMES`` lists
(default: the newest test runtime), offered as the default, so every
``live.run`` of those tests runs on it.
"""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest

from jaxplay.sandbox.runtimes import store
from tests.live_server import LiveServer
from tests.runtimes_server import TEST_RUNTIMES, runtimes_dir

NEWEST_TEST_RUNTIME = max(TEST_RUNTIMES, key=store.version_key) if TEST_RUNTIMES else None
SECURITY_RUNTIMES = [v for v in os.environ.get("JAXPLAY_SECURITY_RUNTIMES", NEWEST_TEST_RUNTIME or "").split(",") if v]


@pytest.fixture(scope="session", params=[None, *SECURITY_RUNTIMES], ids=lambda v: f"jax-{v}" if v else "own-jax")
def live_on_runtime(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveServer]:
    """A real server whose runs, naming no runtime, run on ``request.param`` (None: the worker's own JAX)."""
    version = request.param
    extra: list[str] = []
    if version is not None:
        if store.record_of(runtimes_dir(), version) is None:
            pytest.skip(f"JAX {version} is not installed in {runtimes_dir()}: run `make runtimes`")
        extra = ["--runtimes", version, "--default-runtime", version, "--runtimes-dir", str(runtimes_dir())]
    server = LiveServer(tmp_path_factory.mktemp(f"live-{version or 'own'}"), extra)
    try:
        server.wait_ready(timeout_s=240)
        if version is not None:
            (cpu,) = server.get_json("/api/backends")["backends"]
            assert cpu["jax_version"] == version, cpu["runtimes"]  # every run of these tests gets it
        yield server
    finally:
        server.stop()
