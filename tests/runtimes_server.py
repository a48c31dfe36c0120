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

LISTED_RUNTIMES = [v for v in os.environ.get("JAXPLAY_TEST_RUNTIMES", "0.4.38,0.6.2,0.12.0.1").split(",") if v]
NOT_INSTALLABLE = "0.3.9"  # older than any jaxlib for this Python: offered with its problem


def runtimes_dir() -> Path:
    return Settings.from_env().runtimes_dir.expanduser()


def refused_here(version: str) -> bool:
    """Whether ``make runtimes`` left ``version`` out because this host has no Python it runs on (the
    newest JAX needs 3.12+): a fact of the host, said by the install, not a failure of the tests."""
    failed = store.failure_file(runtimes_dir(), version)
    return store.record_of(runtimes_dir(), version) is None and failed.is_file() and \
        "needs Python" in failed.read_text()


TEST_RUNTIMES = [v for v in LISTED_RUNTIMES if not refused_here(v)]


def require_runtimes() -> list[str]:
    missing = [v for v in TEST_RUNTIMES if store.record_of(runtimes_dir(), v) is None]
    if missing:
        pytest.skip(f"JAX runtimes {', '.join(missing)} are not installed in {runtimes_dir()}: run `make runtimes` "
                    "(make test does)")
    return TEST_RUNTIMES


@contextlib.contextmanager
def runtimes_server(extra_args: list[str] | None = None, runtimes: str | None = None) -> Iterator[LiveServer]:
    """A ready server offering every test runtime, plus one that cannot be installed (``runtimes``:
    the --runtimes value to give instead, e.g. 'all')."""
    offered = runtimes or ",".join([*require_runtimes(), NOT_INSTALLABLE])
    with tempfile.TemporaryDirectory(prefix="jaxplay-runtimes-") as data_dir:
        server = LiveServer(Path(data_dir), ["--runtimes", offered,
                                             "--runtimes-dir", str(runtimes_dir()), *(extra_args or [])])
        try:
            server.wait_ready(timeout_s=240)
            yield server
        finally:
            server.stop()
