"""An operator restores a backup onto a server that is serving and saving links meanwhile (SQLite: the restore
writes the same file from another process).

What must hold: the restore adds every row of the backup, no save of the running
server fails or is lost meanwhile, and the server serves the restored links at once.
"""

from __future__ import annotations

import threading
import time

import pytest

from tests.live.faults import http_status
from tests.live.test_backup_restore import cli
from tests.live_server import LiveServer

pytestmark = pytest.mark.live


def test_a_restore_onto_a_serving_server_adds_its_rows_and_loses_no_save(tmp_path):
    source = LiveServer(tmp_path / "source", ["--no-local-worker"])
    target = LiveServer(tmp_path / "target", ["--no-local-worker"])
    try:
        source.wait_ready(workers=0)
        target.wait_ready(workers=0)
        restored = [http_status(source, "/api/snippets", "POST", {"code": f"print('restored {i}')"})[1]["id"]
                    for i in range(50)]
        backup = cli("backup", str(tmp_path / "links.backup"), "--data-dir", str(tmp_path / "source"))
        assert backup.returncode == 0, backup.stderr

        saved: list[tuple[str, str]] = []
        refused: list[tuple[int, object]] = []
        stop = threading.Event()

        def save_links() -> None:
            while not stop.is_set():
                code = f"print('saved {len(saved) + len(refused)}')"
                status, body = http_status(target, "/api/snippets", "POST", {"code": code})
                if status == 201:
                    saved.append((body["id"], code))
                else:
                    refused.append((status, body))

        saver = threading.Thread(target=save_links)
        saver.start()
        try:
            time.sleep(0.5)
            restore = cli("restore", str(tmp_path / "links.backup"), "--data-dir", str(tmp_path / "target"))
            time.sleep(0.5)
        finally:
            stop.set()
            saver.join()
        assert restore.returncode == 0 and "snippets: 50 copied, 0 already there" in restore.stdout, (
            restore.stdout, restore.stderr)
        assert saved and not refused, refused[:3]
        for i, link in enumerate(restored):
            assert http_status(target, f"/api/snippets/{link}")[1]["code"] == f"print('restored {i}')"
        for link, code in saved:
            assert http_status(target, f"/api/snippets/{link}")[1]["code"] == code
    finally:
        source.stop()
        target.stop()
