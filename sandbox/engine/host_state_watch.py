"""The worker's end of a run's host-state watch: received from the run's init, read after the run.

The init makes the watch (``sandbox/capture/host_state_reads.py`` says why and
how) and sends it on the spare's door as its first word, before the run's
process has the code. The slot reads it once the run's pipes are closed, so
that every file the run opened before it could last show anything is counted,
and passes on one ``nondeterministic`` event (kind ``host state``) per file:
the result cache never keeps such a run (server/runs/result_cache.py). A run
that could not be watched counts as one that read the host's state.
"""

from __future__ import annotations

import asyncio
import os
import socket
import time
from dataclasses import dataclass
from typing import Any

from jaxplay.sandbox.capture import host_state_reads
from jaxplay.sandbox.engine import zygote_protocol as zp


@dataclass
class HostStateWatch:
    """The init's kernel watch on the host files a run may open (sandbox/capture/host_state_reads.py)."""

    fd: int | None
    paths: dict[int, str]
    error: str | None = None

    @classmethod
    async def receive(cls, door: socket.socket, deadline: float) -> HostStateWatch | None:
        """The init's ``watching``, its first word once it has the run; None if the spare died first."""
        loop = asyncio.get_running_loop()
        word: asyncio.Future[tuple[dict[str, Any] | None, list[int]]] = loop.create_future()

        def readable() -> None:
            try:
                received = zp.receive(door)
            except BlockingIOError:
                return
            except OSError:
                received = (None, [])
            loop.remove_reader(door.fileno())
            if not word.done():
                word.set_result(received)
            else:
                zp.close_all(received[1])

        loop.add_reader(door.fileno(), readable)
        try:
            message, fds = await asyncio.wait_for(word, max(deadline - time.monotonic(), 0.0))
        except TimeoutError:
            loop.remove_reader(door.fileno())
            return None
        if message is None or message.get("type") != "watching":
            zp.close_all(fds)
            return None
        paths = message.get("paths")
        if not isinstance(paths, dict) or len(fds) != 1:
            zp.close_all(fds)
            return cls(None, {}, str(message.get("error") or "no watch"))
        return cls(fds[0], {int(wd): str(path) for wd, path in paths.items()})

    @staticmethod
    def close(watch: HostStateWatch | None) -> list[dict[str, Any]]:
        if watch is not None and watch.fd is not None:
            _close_off_the_loop(watch.fd)
            watch.fd = None
        return []

    @staticmethod
    def events(watch: HostStateWatch | None) -> list[dict[str, Any]]:
        """A ``nondeterministic`` event for each watched file the run opened (one when none could be
        watched); closes the watch."""
        if watch is None or watch.fd is None:
            reason = "no watch" if watch is None else watch.error
            return [{"type": "nondeterministic", "kind": "host state", "source": f"unwatched ({reason})",
                     "line": None}]
        try:
            opened = host_state_reads.opened(watch.fd, watch.paths)
        finally:
            HostStateWatch.close(watch)
        return [{"type": "nondeterministic", "kind": "host state", "source": path, "line": None} for path in opened]


def _close_off_the_loop(fd: int) -> None:
    """Close an inotify fd in a thread: its last close waits for the kernel's SRCU grace period (~10 ms),
    which on the event loop delayed every run's ``done`` by as much."""
    try:
        asyncio.get_running_loop().run_in_executor(None, os.close, fd)
    except RuntimeError:  # no loop running (a test's direct call): close here
        os.close(fd)
