"""The fault suite, SQLite side: the disk under the data dir fills up while the server serves (a small tmpfs,
mounted in a mount namespace of the server's own, as an operator's too-small volume).

What must hold: a link that cannot be saved is answered 503 saying the disk is
full (never a 500 with a traceback), links already saved still open,
``/readyz`` reports storage not writable while the disk is full and writable
again once there is room, saving works again without a restart, and a server
stopped while the disk is full shuts down cleanly (its WAL kept beside the file).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.live.faults import http_status, readiness, wait_until
from tests.live_server import LiveServer

pytestmark = pytest.mark.live

DISK_BYTES = 4 << 20
FILLER_BYTES = 2 << 20


def can_mount_in_own_namespace() -> bool:
    unshare = shutil.which("unshare")
    return unshare is not None and subprocess.run(
        [unshare, "-rm", "--", "sh", "-c", "mount -t tmpfs -o size=64k tmpfs /mnt"], capture_output=True).returncode == 0


def server_on_a_small_disk(tmp_path: Path) -> tuple[LiveServer, Path]:
    """A server (no worker: this is about links) whose data dir is a DISK_BYTES tmpfs; returns it and the data
    dir's mount as this process sees it (through the server's /proc/<pid>/root)."""
    disk = tmp_path / "disk"
    disk.mkdir()
    command = ["unshare", "-rm", "--", "sh", "-c", 'mount -t tmpfs -o size="$0" tmpfs "$1" && shift && exec "$@"',
               str(DISK_BYTES), str(disk), sys.executable, "-m", "jaxplay.cli"]
    server = LiveServer(tmp_path / "server", ["--no-local-worker", "--data-dir", str(disk / "data")], command=command)
    server.wait_ready(workers=0)
    return server, Path(f"/proc/{server.process.pid}/root{disk}")


def fill(server: LiveServer) -> tuple[int, object]:
    """Save links until one is refused; the refusal's status and body. Every one before must have been saved."""
    for i in range(DISK_BYTES // 20_000 * 2):
        status, body = http_status(server, "/api/snippets", "POST",
                                   {"code": f"# {i}\nx = '{os.urandom(10_000).hex()}'\n"})
        if status != 201:
            return status, body
    raise AssertionError("the disk never filled")


@pytest.mark.skipif(not can_mount_in_own_namespace(), reason="needs `unshare -rm` (user namespaces) to mount a tmpfs")
def test_a_full_disk_refuses_new_links_with_503_saying_so_and_recovers_without_a_restart(tmp_path):
    server, disk = server_on_a_small_disk(tmp_path)
    try:
        status, first = http_status(server, "/api/snippets", "POST", {"code": "print('saved before')"})
        assert status == 201, first
        (disk / "filler").write_bytes(b"\0" * FILLER_BYTES)  # what the operator will delete to make room

        status, body = fill(server)
        assert status == 503 and "disk" in body["message"] and "full" in body["message"], (status, body)
        assert http_status(server, f"/api/snippets/{first['id']}")[1]["code"] == "print('saved before')"
        status, ready = readiness(server)
        assert ready["checks"]["storage"].startswith("not writable") and "full" in ready["checks"]["storage"], ready
        assert ready["serving"]["links"] is False, ready

        (disk / "filler").unlink()
        wait_until(lambda: readiness(server)[1]["checks"]["storage"] == "writable", 10, "storage writable again")
        status, later = http_status(server, "/api/snippets", "POST", {"code": "print('saved after')"})
        assert status == 201, later
        assert http_status(server, f"/api/snippets/{later['id']}")[1]["code"] == "print('saved after')"

        assert fill(server)[0] == 503  # and stopped while full: it still shuts down cleanly
    finally:
        server.stop()
    log = server.log_path.read_text()
    assert "Traceback" not in log and "Application shutdown failed" not in log, log[-3000:]
    assert "the WAL could not be folded into the file at close" in log, log[-3000:]
