"""Servers of several checkouts at once, so a benchmark compares them in turn on the same host and load.

Each checkout runs its own code from its own ``.venv`` (``make .venv/.installed-test`` there); the
benchmark's own code is this checkout's. Figures from a busy host are slower for all of them alike:
compare the checkouts measured side by side, not with figures taken at another time.
"""

from __future__ import annotations

import contextlib
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tests.live_server import LiveServer  # noqa: E402


@contextlib.contextmanager
def servers(checkouts: list[Path], extra_args: list[str] | None = None) -> Iterator[dict[Path, LiveServer]]:
    """A ready server per checkout (this one first), their slots' first spares prepared; stopped on exit."""
    started: dict[Path, LiveServer] = {}
    with tempfile.TemporaryDirectory() as data:
        try:
            for index, checkout in enumerate(dict.fromkeys([ROOT, *(c.resolve() for c in checkouts)])):
                python = checkout / ".venv" / "bin" / "python"
                started[checkout] = LiveServer(Path(data) / str(index), extra_args, cwd=checkout,
                                               command=[str(python), "-m", "jaxplay.cli"])
            for server in started.values():
                server.wait_ready()
            time.sleep(3)
            yield started
        finally:
            for server in started.values():
                server.stop()
