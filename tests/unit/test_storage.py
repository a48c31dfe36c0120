"""The SQLite storage: WAL, versioned migrations, the one write path."""

from __future__ import annotations

import sqlite3

import pytest

from server import storage as storage_module
from server.storage import MIGRATIONS, Migration, Storage, StorageError, migrate


@pytest.fixture
def storage(tmp_path):
    store = Storage(tmp_path / "data")
    store.open()
    yield store
    store.close()


def test_open_creates_one_file_in_wal_mode_at_the_newest_schema(storage, tmp_path):
    assert storage.path == tmp_path / "data" / "jaxplay.sqlite3" and storage.path.exists()
    assert storage.schema_version() == MIGRATIONS[-1].version
    assert storage.read_one("PRAGMA journal_mode")[0] == "wal"
    tables = {row["name"] for row in storage.read_all("SELECT name FROM sqlite_master WHERE type = 'table'")}
    assert {"snippets", "result_cache"} <= tables


def test_versions_are_consecutive_and_each_has_a_purpose():
    assert [m.version for m in MIGRATIONS] == list(range(1, len(MIGRATIONS) + 1))
    assert all(m.purpose and m.sql.strip() for m in MIGRATIONS)


def test_an_older_database_is_migrated_and_keeps_its_rows(tmp_path):
    path = tmp_path / storage_module.DB_FILENAME
    db = sqlite3.connect(path, isolation_level=None)
    assert migrate(db, MIGRATIONS[:1]) == 1
    db.execute("INSERT INTO snippets (id, content_hash, created_at, document) VALUES ('abcdefgh', 'abcdefghxyz', "
               "'2025-01-01T00:00:00Z', x'00')")
    db.close()

    store = Storage(tmp_path)
    store.open()
    try:
        assert store.schema_version() == MIGRATIONS[-1].version
        assert store.read_one("SELECT content_hash FROM snippets WHERE id = 'abcdefgh'")[0] == "abcdefghxyz"
        assert store.read_one("SELECT COUNT(*) FROM result_cache")[0] == 0
    finally:
        store.close()


def test_reopening_applies_nothing_twice(tmp_path):
    for _ in range(2):
        store = Storage(tmp_path)
        store.open()
        assert store.schema_version() == MIGRATIONS[-1].version
        store.close()


def test_a_database_from_a_newer_server_is_refused_with_what_to_do(tmp_path):
    db = sqlite3.connect(tmp_path / storage_module.DB_FILENAME, isolation_level=None)
    db.execute(f"PRAGMA user_version={MIGRATIONS[-1].version + 1}")
    db.close()
    store = Storage(tmp_path)
    with pytest.raises(StorageError, match="newer JAX Playground.*--data-dir"):
        store.open()
    store.close()


def test_a_failing_migration_leaves_the_previous_version(tmp_path):
    db = sqlite3.connect(tmp_path / "x.sqlite3", isolation_level=None)
    broken = (*MIGRATIONS[:1], Migration(2, "broken", "CREATE TABLE t (a INTEGER); CREATE TABLE t (a INTEGER);"))
    with pytest.raises(sqlite3.OperationalError):
        migrate(db, broken)
    assert db.execute("PRAGMA user_version").fetchone()[0] == 1
    assert db.execute("SELECT COUNT(*) FROM sqlite_master WHERE name = 't'").fetchone()[0] == 0


def test_a_write_that_raises_is_rolled_back_whole(storage):
    def half_then_fail(db):
        db.execute("INSERT INTO snippets (id, content_hash, created_at, document) VALUES ('a', 'a', 'now', x'00')")
        raise ValueError("changed my mind")

    with pytest.raises(ValueError):
        storage.write(half_then_fail, durable=True)
    assert storage.read_one("SELECT COUNT(*) FROM snippets")[0] == 0
    storage.write(lambda db: db.execute("INSERT INTO snippets (id, content_hash, created_at, document) "
                                        "VALUES ('b', 'b', 'now', x'00')"), durable=True)
    assert storage.read_one("SELECT id FROM snippets")[0] == "b"


def test_writes_run_on_one_writer_thread(storage):
    import threading

    names = {storage.write(lambda db: threading.current_thread().name, durable=False) for _ in range(5)}
    assert len(names) == 1 and names.pop().startswith("jaxplay-sqlite-writer")


def test_a_closed_storage_says_so(tmp_path):
    store = Storage(tmp_path)
    with pytest.raises(StorageError, match="not open"):
        store.read_one("SELECT 1")
    with pytest.raises(StorageError, match="not open"):
        store.write(lambda db: None, durable=True)


def test_an_unusable_data_dir_names_the_flag(tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("not a folder")
    store = Storage(blocker / "data")
    with pytest.raises(StorageError, match="--data-dir"):
        store.open()
    store.close()
