"""Backups, restores and moves of both stores, taken while a real server serves, compared row by row.

``jaxplay backup`` of a running server's store gives a file whose every table
equals the live store's, value for value (bytes, text, 64-bit floats);
``jaxplay restore`` puts exactly that into an empty store of either engine,
and again changes nothing; ``jaxplay storage copy`` moves a running SQLite
data dir into PostgreSQL; and a server on PostgreSQL warns while its data dir
holds links its database lacks.
"""

from __future__ import annotations

import asyncio
import os
import sqlite3
import subprocess
import sys
from pathlib import Path
from typing import Any

import psycopg
import pytest

from jaxplay.server.storage.transfer import TABLES
from tests.live.faults import Client, http_status, metric, wait_until
from tests.live_server import PROJECT_ROOT, LiveServer

pytestmark = pytest.mark.live

Rows = dict[str, list[dict[str, Any]]]


def cli(*args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("JAXPLAY_")}
    return subprocess.run([sys.executable, "-m", "jaxplay.cli", *args], cwd=PROJECT_ROOT, env=env,
                          capture_output=True, text=True, timeout=120)


def sqlite_rows(path: Path) -> Rows:
    """Every row of every table, read through SQLite (a reader sees what is still in the WAL)."""
    db = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    db.row_factory = sqlite3.Row
    try:
        return {t.name: [dict(row) for row in db.execute(f"SELECT * FROM {t.name} ORDER BY {t.key}")] for t in TABLES}
    finally:
        db.close()


def postgres_rows(url: str) -> Rows:
    with psycopg.connect(url, row_factory=psycopg.rows.dict_row) as db:
        return {t.name: db.execute(f"SELECT * FROM {t.name} ORDER BY {t.key}").fetchall() for t in TABLES}


def populate(server: LiveServer) -> list[str]:
    """Links (one forked from another, one beyond ASCII), a room and a cached result (its browser's own, and
    its program a candidate for sharing)."""
    ids = []
    for body in ({"code": "print('first')"}, {"code": "print('ünïcödé \\u0000 ok')", "backend": "cpu"}):
        status, made = http_status(server, "/api/snippets", "POST", body)
        assert status == 201, made
        ids.append(made["id"])
    status, fork = http_status(server, "/api/snippets", "POST", {"code": "print('forked')", "forked_from": ids[0]})
    assert status == 201, fork
    ids.append(fork["id"])
    assert http_status(server, "/api/rooms", "POST", {"program": "print('room')", "deck": ids[:2]})[0] == 201

    async def cached_run() -> None:
        async with Client(server) as client:
            run_id = await client.run("print(6 * 7)", fresh=True)
            assert (await client.all_done([run_id], 90))[run_id]["status"] == "ok"

    asyncio.run(cached_run())
    wait_until(lambda: metric(server, "jaxplay_result_cache_entries") == 1, 20, "the run's result cached")
    return ids


def counts(rows: Rows) -> dict[str, int]:
    return {name: len(found) for name, found in rows.items()}


def test_a_sqlite_backup_taken_while_serving_restores_every_row_exactly(tmp_path):
    server = LiveServer(tmp_path / "live")
    restored: LiveServer | None = None
    try:
        server.wait_ready()
        ids = populate(server)
        done = cli("backup", str(tmp_path / "backup.sqlite3"), "--data-dir", str(tmp_path / "live"))
        assert done.returncode == 0 and "3 snippets, 1 rooms, 1 result_cache" in done.stdout, done
        live = sqlite_rows(tmp_path / "live" / "jaxplay.sqlite3")
        assert counts(live) == {"snippets": 3, "rooms": 1, "result_cache": 1, "agent_tokens": 0, "result_candidates": 1}
        assert sqlite_rows(tmp_path / "backup.sqlite3") == live

        done = cli("restore", str(tmp_path / "backup.sqlite3"), "--data-dir", str(tmp_path / "restored"))
        assert done.returncode == 0 and "snippets: 3 copied, 0 already there" in done.stdout, done
        assert sqlite_rows(tmp_path / "restored" / "jaxplay.sqlite3") == live
        again = cli("restore", str(tmp_path / "backup.sqlite3"), "--data-dir", str(tmp_path / "restored"))
        assert again.returncode == 0 and "snippets: 0 copied, 3 already there" in again.stdout, again

        restored = LiveServer(tmp_path / "restored", ["--no-local-worker"])
        restored.wait_ready(workers=0)
        for snippet in ids:  # the restored store answers every link as the live one does
            assert http_status(restored, f"/api/snippets/{snippet}") == http_status(server, f"/api/snippets/{snippet}")
    finally:
        server.stop()
        if restored is not None:
            restored.stop()


def test_a_postgres_backup_taken_while_serving_restores_exactly_into_either_engine(postgres, tmp_path):
    source = postgres.new_database()
    server = LiveServer(tmp_path / "live", ["--database-url", source])
    try:
        server.wait_ready()
        populate(server)
        done = cli("backup", str(tmp_path / "backup.sqlite3"), "--database-url", source)
        assert done.returncode == 0 and "3 snippets, 1 rooms, 1 result_cache" in done.stdout, done
        live = postgres_rows(source)
        assert counts(live) == {"snippets": 3, "rooms": 1, "result_cache": 1, "agent_tokens": 0, "result_candidates": 1}

        target = postgres.new_database()
        done = cli("restore", str(tmp_path / "backup.sqlite3"), "--database-url", target)
        assert done.returncode == 0 and "rooms: 1 copied" in done.stdout, done
        assert postgres_rows(target) == live  # byte for byte, through a file of our own format
        done = cli("restore", str(tmp_path / "backup.sqlite3"), "--data-dir", str(tmp_path / "sqlite"))
        assert done.returncode == 0, done
        assert sqlite_rows(tmp_path / "sqlite" / "jaxplay.sqlite3") == live  # and across engines
    finally:
        server.stop()


def test_storage_copy_moves_a_serving_sqlite_data_dir_to_postgres(postgres, tmp_path):
    data_dir = tmp_path / "live"
    server = LiveServer(data_dir)
    moved: LiveServer | None = None
    try:
        server.wait_ready()
        ids = populate(server)
        target = postgres.new_database()
        done = cli("storage", "copy", "--from", str(data_dir), "--database-url", target)
        assert done.returncode == 0 and "snippets: 3 copied" in done.stdout, done
        assert postgres_rows(target) == sqlite_rows(data_dir / "jaxplay.sqlite3")
        again = cli("storage", "copy", "--from", f"sqlite:///{data_dir / 'jaxplay.sqlite3'}", "--database-url", target)
        assert again.returncode == 0 and "result_cache: 0 copied, 1 already there" in again.stdout, again
        answers = {snippet: http_status(server, f"/api/snippets/{snippet}") for snippet in ids}
        server.stop()

        # A server on an empty PostgreSQL database, on that data dir: it warns that the links are not served.
        empty = LiveServer(data_dir, ["--no-local-worker", "--database-url", postgres.new_database()])
        empty.wait_ready(workers=0)
        wait_until(lambda: "lacks" in empty.log_path.read_text(), 20, "the warning")
        empty.stop()
        assert "holds 3 link(s) and 1 room(s)" in empty.log_path.read_text()
        assert "jaxplay storage copy --from" in empty.log_path.read_text()

        moved = LiveServer(data_dir, ["--no-local-worker", "--database-url", target])
        moved.wait_ready(workers=0)
        for snippet, answer in answers.items():  # every link answers as before the move
            assert http_status(moved, f"/api/snippets/{snippet}") == answer
        moved.stop()
        assert "lacks" not in moved.log_path.read_text()  # all of them were copied: nothing to warn of

        done = cli("storage", "copy", "--from", str(data_dir), "--database-url", postgres.new_database(),
                   "--data-dir", str(data_dir))
        assert done.returncode == 0  # another empty target: fine
        db = sqlite3.connect(data_dir / "jaxplay.sqlite3", isolation_level=None)
        db.execute("UPDATE rooms SET program = 'print(\"changed\")'")
        db.close()
        refused = cli("storage", "copy", "--from", str(data_dir), "--database-url", target)
        assert refused.returncode == 2 and "would overwrite different data" in refused.stderr, refused
        assert "differs in program" in refused.stderr and counts(postgres_rows(target))["rooms"] == 1
    finally:
        server.stop()
        if moved is not None:
            moved.stop()
