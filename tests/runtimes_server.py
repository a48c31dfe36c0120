"""A live server offering the JAX runtimes ``make test`` installs, for the runtime tests.

``make test`` installs them once in ``--runtimes-dir`` (``make runtimes``,
shared by every checkout on the host) and passes ``JAXPLAY_TEST_RUNTIMES``;
run alone, pytest uses the same defaults and skips, saying what to run, when
they are not installed.
"""

from __future__ import annotations

import contextlib
import os
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from jaxplay.sandbox.runtimes import store
from jaxplay.settings import Settings
from tests.live_server import LiveServer

TEST_RUNTIMES = [v for v in os.environ.get("JAXPLAY_TEST_RUNTIMES", "0.4.38,0.6.2").split(",") if v]
NOT_INSTALLABLE = "0.3.9"  # older than any jaxlib for this Python: offered with its problem


def runtimes_dir() -> Path:
    return Settings.from_env().runtimes_dir.expanduser()


def require_runtimes() -> list[str]:
    missing = [v for v in TEST_RUNTIMES if store.record_of(runtimes_dir(), v) is None]
    if missing:
        pytest.skip(f"JAX runtimes {', '.join(missing)} are not installed in {runtimes_dir()}: run `make runtimes` "
                    "(make test does)")
    return TEST_RUNTIMES


@contextlib.contextmanager
def runtimes_server(extra_args: list[str] | None = None) -> Iterator[LiveServer]:
    """A ready server offering every test runtime, plus one that cannot be installed."""
    versions = require_runtimes()
    with tempfile.TemporaryDirectory(prefix="jaxplay-runtimes-") as data_dir:
        server = LiveServer(Path(data_dir), ["--runtimes", ",".join([*versions, NOT_INSTALLABLE]),
                                             "--runtimes-dir", str(runtimes_dir()), *(extra_args or [])])
        try:
            server.wait_ready(timeout_s=240)
            yield server
        finally:
            server.stop()
