"""Backups of either store, as one SQLite file in the playground's own schema; restores from one.

A backup is a SQLite database holding the tables at the schema version of
the store it came from (``PRAGMA user_version``), in rollback-journal mode so
that the one file is complete. It is taken while servers run:

- SQLite: SQLite's backup API, in one step, under a read transaction: a
  consistent copy of the last commit, WAL included (a ``cp`` of the live file
  misses what is still in the WAL, often every table);
- PostgreSQL: one ``REPEATABLE READ, READ ONLY`` transaction, so every table
  is read at the same instant, streamed through server-side cursors.

Why one format of our own rather than ``pg_dump -Fc`` for PostgreSQL: it needs
only this package (no PostgreSQL client of the server's major version in the
image), the same file restores into either engine (so a SQLite data dir moves
to PostgreSQL, and back, with the same two commands), a restore checks the
schema version and refuses a newer one, and values keep their exact bytes
(text, bytes, 64-bit floats, integers: nothing is printed and parsed again).
``pg_dump`` remains right for a whole PostgreSQL cluster (docs/operations.md).

A restore copies the backup into a temporary file first (opening it migrates
it to this version's schema, which must not change the backup itself), then
adds its rows to the target with server/storage/transfer.py: idempotent, and
never overwriting different data.
"""

from __future__ import annotations

import os
import shutil
import sqlite3
import tempfile
from dataclasses import dataclass
from pathlib import Path

from jaxplay.server.storage import transfer
from jaxplay.server.storage.interface import MIGRATIONS, Migration, Storage, StorageError, redact
from jaxplay.server.storage.sqlite import SQLiteStorage, migrate

NEWEST = MIGRATIONS[-1].version
FETCH_ROWS = 200


@dataclass(frozen=True)
class BackupSummary:
    path: Path
    schema_version: int
    rows: dict[str, int]
    bytes: int


def _tables(db: sqlite3.Connection) -> set[str]:
    return {row[0] for row in db.execute("SELECT name FROM sqlite_master WHERE type = 'table' "
                                         "AND name NOT LIKE 'sqlite_%'")}


def summarize(path: Path) -> BackupSummary:
    """What a backup file holds; StorageError if it is not one."""
    try:
        db = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
        try:
            version = int(db.execute("PRAGMA user_version").fetchone()[0])
            tables = _tables(db)
            rows = {t.name: int(db.execute(f"SELECT COUNT(*) FROM {t.name}").fetchone()[0])
                    for t in transfer.TABLES if t.name in tables}
        finally:
            db.close()
    except sqlite3.Error as exc:
        raise StorageError(f"{path} is not a playground backup (a SQLite file): {exc}.") from exc
    if version == 0 or "snippets" not in tables:
        raise StorageError(f"{path} is not a playground backup: it holds no snippets table at a schema version.")
    return BackupSummary(path, version, rows, path.stat().st_size)


def _partial(target: Path) -> Path:
    if target.exists():
        raise StorageError(f"{target} exists already; a backup never overwrites a file. Choose another name.")
    target.parent.mkdir(parents=True, exist_ok=True)
    partial = target.with_name(target.name + ".partial")
    partial.unlink(missing_ok=True)
    return partial


def backup_sqlite(source: Path, target: Path) -> BackupSummary:
    """A consistent copy of the SQLite store at ``source`` (a server may be writing it) into ``target``."""
    if not source.is_file():
        raise StorageError(f"There is no SQLite store at {source}: check --data-dir or --database-url.")
    partial = _partial(target)
    try:
        live = sqlite3.connect(f"file:{source}?mode=ro", uri=True, timeout=30.0)
        copy = sqlite3.connect(partial, isolation_level=None)
        try:
            live.backup(copy)  # all pages in one step: one read transaction, one instant
            copy.execute("PRAGMA journal_mode=DELETE")  # the one file is the whole backup
            check = copy.execute("PRAGMA quick_check").fetchone()[0]
            if check != "ok":
                raise StorageError(f"the copy of {source} failed SQLite's check: {check}")
        finally:
            copy.close()
            live.close()
        os.replace(partial, target)
    except sqlite3.Error as exc:
        raise StorageError(f"Cannot back up {source}: {exc}.") from exc
    finally:
        partial.unlink(missing_ok=True)
    return summarize(target)


def backup_postgres(url: str, target: Path) -> BackupSummary:
    """Every table of the PostgreSQL store at ``url``, read in one snapshot, into the SQLite file ``target``."""
    import psycopg  # only when PostgreSQL is asked for

    partial = _partial(target)
    try:
        with psycopg.connect(url, connect_timeout=10) as live:
            live.isolation_level = psycopg.IsolationLevel.REPEATABLE_READ
            live.read_only = True
            with live.transaction():
                _export(live, partial)
        os.replace(partial, target)
    except psycopg.Error as exc:
        raise StorageError(f"Cannot back up PostgreSQL {redact(url)}: {str(exc).strip()}.") from exc
    finally:
        partial.unlink(missing_ok=True)
    return summarize(target)


def _export(live: object, partial: Path) -> None:
    import psycopg

    assert isinstance(live, psycopg.Connection)
    tables = {row[0] for row in live.execute("SELECT tablename FROM pg_tables WHERE schemaname = current_schema()")}
    if "jaxplay_schema" not in tables:
        raise StorageError("that database holds no playground store (no jaxplay_schema table)")
    unknown = transfer.unknown_tables(tables)
    if unknown:
        raise StorageError(f"it holds table(s) {', '.join(unknown)}, which this version does not know: back it up "
                           "with the version that wrote it")
    row = live.execute("SELECT version FROM jaxplay_schema").fetchone()
    version = int(row[0]) if row else 0
    if version > NEWEST:
        raise StorageError(f"its schema version is {version}, newer than this version knows ({NEWEST}): back it up "
                           "with the version that wrote it")
    copy = sqlite3.connect(partial, isolation_level=None)
    try:
        migrate(copy, migrations_up_to(version))  # the source's schema, exactly
        copy.execute("BEGIN")
        for table in transfer.TABLES:
            if table.name not in tables:
                continue
            with live.cursor(name=f"jaxplay_backup_{table.name}") as cursor:  # server-side: streamed
                cursor.itersize = FETCH_ROWS
                cursor.execute(f"SELECT * FROM {table.name}")
                columns = [d.name for d in cursor.description or ()]
                insert = (f"INSERT INTO {table.name} ({', '.join(columns)}) "
                          f"VALUES ({', '.join('?' * len(columns))})")
                for values in cursor:
                    copy.execute(insert, values)
        copy.execute("COMMIT")
        copy.execute("PRAGMA journal_mode=DELETE")
    finally:
        copy.close()


def check_restorable(backup: Path) -> BackupSummary:
    summary = summarize(backup)
    if summary.schema_version > NEWEST:
        raise StorageError(f"{backup} was written at schema version {summary.schema_version}, newer than this version "
                           f"of the playground knows ({NEWEST}): restore it with the version that wrote it.")
    return summary


def migrations_up_to(version: int) -> tuple[Migration, ...]:
    """The migrations that make a schema of ``version``: for a store an older version of the playground uses."""
    return tuple(m for m in MIGRATIONS if m.version <= version)


async def restore(backup: Path, target: Storage) -> transfer.CopyReport:
    """Add every row of ``backup`` to ``target`` (open): refused if it is newer, or would overwrite other data.
    A target opened with fewer migrations (``migrations_up_to`` the backup's version) keeps that older schema."""
    summary = check_restorable(backup)
    with tempfile.TemporaryDirectory(prefix="jaxplay-restore-") as work:
        working_copy = Path(work) / "backup.sqlite3"
        shutil.copyfile(backup, working_copy)
        source = SQLiteStorage(working_copy)
        if await target.schema_version() < NEWEST:  # the target stays at the backup's schema: so does the copy
            source.migrations = migrations_up_to(summary.schema_version)
        await source.open()  # migrates the working copy to the target's schema
        try:
            assert source.reader is not None
            return await transfer.copy_rows(source, target, _tables(source.reader))
        finally:
            await source.close()
