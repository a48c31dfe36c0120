"""Storage on both engines (SQLite and a real PostgreSQL): migrations, the one write path, errors."""

from __future__ import annotations

import asyncio
import sqlite3
import threading

import psycopg
import pytest

from jaxplay.server.storage.factory import open_storage
from jaxplay.server.storage.interface import MIGRATIONS, StorageError, Transaction, redact
from jaxplay.server.storage.postgres import PostgresStorage
from jaxplay.server.storage.sqlite import DB_FILENAME, SQLiteStorage, migrate


async def opened(url: str, tmp_path):
    storage = open_storage(url, tmp_path)
    await storage.open()
    return storage


async def insert_snippet(tx: Transaction, snippet_id: str) -> None:
    await tx.execute("INSERT INTO snippets (id, content_hash, created_at, document) VALUES (?, ?, 'now', ?)",
                     (snippet_id, snippet_id, b"\x00"))


def test_versions_are_consecutive_and_each_has_a_purpose_and_sql_for_both_engines():
    assert [m.version for m in MIGRATIONS] == list(range(1, len(MIGRATIONS) + 1))
    assert all(m.purpose and m.sql.strip() and m.postgres.strip() for m in MIGRATIONS)


def test_open_migrates_to_the_newest_schema_and_reopening_applies_nothing_twice(database_url, tmp_path):
    async def scenario():
        for _ in range(2):
            storage = await opened(database_url, tmp_path)
            assert await storage.schema_version() == MIGRATIONS[-1].version
            assert (await storage.fetch_one("SELECT COUNT(*) AS n FROM result_cache"))["n"] == 0
            await storage.probe_writable()
            await storage.close()

    asyncio.run(scenario())


def test_a_write_that_raises_is_rolled_back_whole(database_url, tmp_path):
    async def scenario():
        storage = await opened(database_url, tmp_path)

        async def half_then_fail(tx: Transaction) -> None:
            await insert_snippet(tx, "a")
            raise ValueError("changed my mind")

        with pytest.raises(ValueError):
            await storage.transaction(half_then_fail, durable=True)
        assert (await storage.fetch_one("SELECT COUNT(*) AS n FROM snippets"))["n"] == 0
        await storage.transaction(lambda tx: insert_snippet(tx, "b"), durable=True)
        assert [row["id"] for row in await storage.fetch_all("SELECT id FROM snippets")] == ["b"]
        await storage.close()

    asyncio.run(scenario())


def test_a_closed_storage_says_so(database_url, tmp_path):
    async def scenario():
        storage = open_storage(database_url, tmp_path)
        with pytest.raises(StorageError, match="not open"):
            await storage.fetch_one("SELECT 1")
        with pytest.raises(StorageError, match="not open"):
            await storage.transaction(lambda tx: insert_snippet(tx, "x"), durable=True)

    asyncio.run(scenario())


def test_a_database_from_a_newer_server_is_refused_with_what_to_do(database_url, tmp_path):
    async def scenario():
        storage = await opened(database_url, tmp_path)
        newer = MIGRATIONS[-1].version + 1
        if isinstance(storage, SQLiteStorage):
            await storage.transaction(lambda tx: tx.execute(f"PRAGMA user_version={newer}"), durable=True)
        else:
            await storage.transaction(lambda tx: tx.execute("UPDATE jaxplay_schema SET version = ?", (newer,)),
                                      durable=True)
        await storage.close()
        with pytest.raises(StorageError, match="newer JAX Playground.*(--data-dir|--database-url)"):
            await opened(database_url, tmp_path)

    asyncio.run(scenario())


def test_an_older_postgres_database_is_migrated_and_keeps_its_rows(postgres, tmp_path):
    url = postgres.new_database()

    async def scenario():
        old = PostgresStorage(url)
        async with await psycopg.AsyncConnection.connect(url, autocommit=True) as connection:
            assert await old._migrate(connection, MIGRATIONS[:1]) == 1
            await connection.execute("INSERT INTO snippets (id, content_hash, created_at, document) "
                                     "VALUES ('abcdefgh', 'abcdefghxyz', 'then', '\\x00')")
        storage = await opened(url, tmp_path)
        assert await storage.schema_version() == MIGRATIONS[-1].version
        row = await storage.fetch_one("SELECT content_hash FROM snippets WHERE id = 'abcdefgh'")
        assert row["content_hash"] == "abcdefghxyz"
        await storage.close()

    asyncio.run(scenario())


def test_replicas_starting_together_migrate_once(postgres, tmp_path):
    url = postgres.new_database()

    async def scenario():
        replicas = [PostgresStorage(url) for _ in range(3)]
        await asyncio.gather(*(r.open() for r in replicas))
        assert {await r.schema_version() for r in replicas} == {MIGRATIONS[-1].version}
        await asyncio.gather(*(r.close() for r in replicas))

    asyncio.run(scenario())


def test_an_unreachable_postgres_names_the_setting_without_the_password(tmp_path):
    from tests.live_server import free_port

    url = f"postgresql://jaxplay:hunter2@127.0.0.1:{free_port()}/nothing"

    async def scenario():
        with pytest.raises(StorageError, match="--database-url") as refused:
            await opened(url, tmp_path)
        assert "hunter2" not in str(refused.value) and "***" in str(refused.value)

    asyncio.run(scenario())


def test_an_unknown_database_url_names_the_forms_understood(tmp_path):
    with pytest.raises(ValueError, match="sqlite:///PATH or postgresql://"):
        open_storage("mysql://root:pw@db/x", tmp_path)
    assert redact("postgresql://u:pw@h:5432/d") == "postgresql://u:***@h:5432/d"


# --- SQLite only -------------------------------------------------------------

def test_sqlite_is_one_file_in_wal_mode_in_the_data_dir_by_default(tmp_path):
    async def scenario():
        storage = await opened("", tmp_path / "data")
        assert storage.path == tmp_path / "data" / DB_FILENAME and storage.path.exists()
        assert (await storage.fetch_one("PRAGMA journal_mode"))[0] == "wal"
        names = {row["name"] for row in await storage.fetch_all("SELECT name FROM sqlite_master WHERE type = 'table'")}
        assert {"snippets", "result_cache"} <= names
        await storage.close()

    asyncio.run(scenario())


def test_an_older_sqlite_database_is_migrated_and_keeps_its_rows(tmp_path):
    db = sqlite3.connect(tmp_path / DB_FILENAME, isolation_level=None)
    assert migrate(db, MIGRATIONS[:1]) == 1
    db.execute("INSERT INTO snippets (id, content_hash, created_at, document) VALUES ('abcdefgh', 'abcdefghxyz', "
               "'2025-01-01T00:00:00Z', x'00')")
    db.close()

    async def scenario():
        storage = await opened("", tmp_path)
        assert await storage.schema_version() == MIGRATIONS[-1].version
        assert (await storage.fetch_one("SELECT content_hash FROM snippets WHERE id = 'abcdefgh'"))[0] == "abcdefghxyz"
        await storage.close()

    asyncio.run(scenario())


def test_a_failing_sqlite_migration_leaves_the_previous_version(tmp_path):
    from jaxplay.server.storage.interface import Migration

    db = sqlite3.connect(tmp_path / "x.sqlite3", isolation_level=None)
    broken = (*MIGRATIONS[:1], Migration(2, "broken", "CREATE TABLE t (a INTEGER); CREATE TABLE t (a INTEGER);", ""))
    with pytest.raises(sqlite3.OperationalError):
        migrate(db, broken)
    assert db.execute("PRAGMA user_version").fetchone()[0] == 1
    assert db.execute("SELECT COUNT(*) FROM sqlite_master WHERE name = 't'").fetchone()[0] == 0


def test_sqlite_writes_run_on_one_writer_thread(tmp_path):
    async def thread_name(tx: Transaction) -> str:
        return threading.current_thread().name

    async def scenario():
        storage = await opened("", tmp_path)
        names = {await storage.transaction(thread_name, durable=False) for _ in range(5)}
        await storage.close()
        return names

    names = asyncio.run(scenario())
    assert len(names) == 1 and names.pop().startswith("jaxplay-sqlite-writer")


def test_an_unusable_data_dir_names_the_flag(tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("not a folder")

    async def scenario():
        storage = open_storage("", blocker / "data")
        with pytest.raises(StorageError, match="--data-dir"):
            await storage.open()
        await storage.close()

    asyncio.run(scenario())
