"""Backups and copies between stores (server/storage/backup.py, transfer.py) on real SQLite files.

The live suite (tests/live/test_backup_restore.py) runs them beside real servers on both engines; here
are the rules: every table is covered, parents go first, equal rows are kept, different ones refused
with nothing written, a newer backup refused, an older one migrated without touching the file.
"""

from __future__ import annotations

import asyncio
import re
import sqlite3
from pathlib import Path

import pytest

from jaxplay.server.storage import backup, transfer
from jaxplay.server.storage.interface import MIGRATIONS, StorageError
from jaxplay.server.storage.sqlite import SQLiteStorage, migrate


def store_with_rows(path: Path, migrations=MIGRATIONS) -> None:
    """A SQLite store at ``path`` (at the schema ``migrations`` reach) holding a fork chain whose children sort
    before their parents, and, where the schema has them, a room and a cached result."""
    db = sqlite3.connect(path, isolation_level=None)
    migrate(db, migrations)
    tables = {row[0] for row in db.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
    db.execute("INSERT INTO snippets VALUES ('zzzzzzzz', 'hz', '2025-01-01T00:00:00Z', NULL, ?)", (b"\x00root",))
    db.execute("INSERT INTO snippets VALUES ('mmmmmmmm', 'hm', '2025-01-01T00:00:01Z', 'zzzzzzzz', ?)", (b"child",))
    db.execute("INSERT INTO snippets VALUES ('aaaaaaaa', 'ha', '2025-01-01T00:00:02Z', 'mmmmmmmm', ?)", (b"grand",))
    if "result_cache" in tables:
        db.execute("INSERT INTO result_cache (key, size, elapsed_ms, cached_at, last_used, recorded) "
                   "VALUES ('k1', 3, 0.1 + 0.2, 'then', 1712345678.123456, ?)", (b"rec",))
    if "rooms" in tables:
        db.execute("INSERT INTO rooms VALUES ('jax-AAAAAA-BBBBB', 'digest', 'then', 1.5, 'print(1)', '[]', 0, 10.0)")
    if "agent_tokens" in tables:
        db.execute("INSERT INTO agent_tokens VALUES ('assistant', 'digest-of-its-token', 'then')")
    if "result_candidates" in tables:
        db.execute("INSERT INTO result_candidates VALUES ('k2', 'digest', 1712345678.5, 0, 1712345679.25)")
    db.close()


def rows(path: Path) -> dict[str, list[tuple]]:
    db = sqlite3.connect(path)
    try:
        return {t.name: db.execute(f"SELECT * FROM {t.name} ORDER BY {t.key}").fetchall() for t in transfer.TABLES}
    finally:
        db.close()


def restore(file: Path, target: Path) -> transfer.CopyReport:
    async def scenario() -> transfer.CopyReport:
        store = SQLiteStorage(target)
        await store.open()
        try:
            return await backup.restore(file, store)
        finally:
            await store.close()

    return asyncio.run(scenario())


def test_the_copy_covers_every_table_the_migrations_create():
    created = {name for m in MIGRATIONS for name in re.findall(r"CREATE TABLE (\w+)", m.sql)}
    assert created == {t.name for t in transfer.TABLES}


def test_a_backup_restores_every_row_exactly_and_again_changes_nothing(tmp_path):
    store_with_rows(tmp_path / "source.sqlite3")
    summary = backup.backup_sqlite(tmp_path / "source.sqlite3", tmp_path / "backup.sqlite3")
    assert summary.schema_version == MIGRATIONS[-1].version
    assert summary.rows == {"snippets": 3, "rooms": 1, "result_cache": 1, "agent_tokens": 1, "result_candidates": 1}
    first = restore(tmp_path / "backup.sqlite3", tmp_path / "target.sqlite3")  # children sort first: parents go first
    assert {n: (c.copied, c.present) for n, c in first.tables.items()} == {
        "snippets": (3, 0), "rooms": (1, 0), "result_cache": (1, 0), "agent_tokens": (1, 0), "result_candidates": (1, 0)}
    assert rows(tmp_path / "target.sqlite3") == rows(tmp_path / "source.sqlite3")
    again = restore(tmp_path / "backup.sqlite3", tmp_path / "target.sqlite3")
    assert {n: (c.copied, c.present) for n, c in again.tables.items()} == {
        "snippets": (0, 3), "rooms": (0, 1), "result_cache": (0, 1), "agent_tokens": (0, 1), "result_candidates": (0, 1)}


def test_different_data_under_a_key_is_refused_and_nothing_is_written(tmp_path):
    store_with_rows(tmp_path / "source.sqlite3")
    backup.backup_sqlite(tmp_path / "source.sqlite3", tmp_path / "backup.sqlite3")
    target = tmp_path / "target.sqlite3"
    db = sqlite3.connect(target, isolation_level=None)
    migrate(db)
    db.execute("INSERT INTO rooms VALUES ('jax-AAAAAA-BBBBB', 'digest', 'then', 1.5, 'print(2)', '[]', 0, 10.0)")
    db.close()
    with pytest.raises(transfer.CopyConflict, match=r"rooms code='jax-AAAAAA-BBBBB' differs in program"):
        restore(tmp_path / "backup.sqlite3", target)
    assert {name: len(found) for name, found in rows(target).items()} == {"snippets": 0, "rooms": 1,
                                                                          "result_cache": 0, "agent_tokens": 0,
                                                                          "result_candidates": 0}


def test_a_cached_result_used_since_is_the_same_entry(tmp_path):
    store_with_rows(tmp_path / "source.sqlite3")
    backup.backup_sqlite(tmp_path / "source.sqlite3", tmp_path / "backup.sqlite3")
    restore(tmp_path / "backup.sqlite3", tmp_path / "target.sqlite3")
    db = sqlite3.connect(tmp_path / "target.sqlite3", isolation_level=None)
    db.execute("UPDATE result_cache SET last_used = last_used + 60")  # answered once more since
    db.close()
    report = restore(tmp_path / "backup.sqlite3", tmp_path / "target.sqlite3")
    assert (report.tables["result_cache"].copied, report.tables["result_cache"].present) == (0, 1)


def test_a_backup_from_a_newer_version_is_refused(tmp_path):
    store_with_rows(tmp_path / "source.sqlite3")
    backup.backup_sqlite(tmp_path / "source.sqlite3", tmp_path / "backup.sqlite3")
    db = sqlite3.connect(tmp_path / "backup.sqlite3", isolation_level=None)
    db.execute(f"PRAGMA user_version={MIGRATIONS[-1].version + 1}")
    db.close()
    with pytest.raises(StorageError, match="newer than this version.*restore it with the version that wrote it"):
        restore(tmp_path / "backup.sqlite3", tmp_path / "target.sqlite3")
    assert not (tmp_path / "target.sqlite3").exists() or rows(tmp_path / "target.sqlite3")["snippets"] == []


def test_an_older_backup_is_migrated_in_a_copy_and_the_file_is_left_as_it_was(tmp_path):
    store_with_rows(tmp_path / "old.sqlite3", MIGRATIONS[:2])  # before rooms and result_cache.worker
    backup.backup_sqlite(tmp_path / "old.sqlite3", tmp_path / "backup.sqlite3")
    before = (tmp_path / "backup.sqlite3").read_bytes()
    report = restore(tmp_path / "backup.sqlite3", tmp_path / "target.sqlite3")
    assert report.tables["snippets"].copied == 3 and report.tables["result_cache"].copied == 1
    assert (tmp_path / "backup.sqlite3").read_bytes() == before
    assert rows(tmp_path / "target.sqlite3")["result_cache"][0][-1] == ""  # worker: the migration's default


def test_a_backup_never_overwrites_a_file_nor_leaves_a_partial_one(tmp_path):
    store_with_rows(tmp_path / "source.sqlite3")
    (tmp_path / "taken.sqlite3").write_text("mine")
    with pytest.raises(StorageError, match="exists already"):
        backup.backup_sqlite(tmp_path / "source.sqlite3", tmp_path / "taken.sqlite3")
    assert (tmp_path / "taken.sqlite3").read_text() == "mine"
    with pytest.raises(StorageError, match="no SQLite store"):
        backup.backup_sqlite(tmp_path / "missing.sqlite3", tmp_path / "new.sqlite3")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["source.sqlite3", "taken.sqlite3"]


def test_a_restore_can_keep_the_backups_older_schema_for_the_version_that_wrote_it(tmp_path):
    store_with_rows(tmp_path / "old.sqlite3", MIGRATIONS[:2])  # an older version's store: no rooms, no worker column
    backup.backup_sqlite(tmp_path / "old.sqlite3", tmp_path / "backup.sqlite3")

    async def scenario() -> None:
        store = SQLiteStorage(tmp_path / "rollback.sqlite3")
        store.migrations = backup.migrations_up_to(2)
        await store.open()
        try:
            report = await backup.restore(tmp_path / "backup.sqlite3", store)
            assert await store.schema_version() == 2 and "rooms" not in report.tables
        finally:
            await store.close()

    asyncio.run(scenario())
    assert rows_at(tmp_path / "rollback.sqlite3") == rows_at(tmp_path / "old.sqlite3")


def rows_at(path: Path) -> dict[str, list[tuple]]:
    db = sqlite3.connect(path)
    try:
        return {name: db.execute(f"SELECT * FROM {name} ORDER BY 1").fetchall() for name in ("snippets", "result_cache")}
    finally:
        db.close()
