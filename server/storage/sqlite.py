"""SQLite storage: snippets and the result cache in one file (the default).

Threads and ownership::

    event loop thread ── ``reader`` connection: every SELECT (fast, never waits
    │                    on a writer: WAL lets readers see the last commit)
    └─ "jaxplay-sqlite-writer" thread ── ``writer`` connection: every INSERT,
                         UPDATE and DELETE, one transaction at a time

All writes go through ``transaction``, the one write path, so there is never
a second writer to wait for, and a failed write rolls back as a whole. A
transaction's ``work`` is an async function (shared with PostgreSQL) whose
awaits on this engine never suspend: the writer thread drives it to its end
in one step (``run_to_end``).

Durability: WAL mode. A snippet is committed with ``synchronous=FULL`` before
its link is answered (the WAL is fsynced: the link survives a SIGKILL of the
server and a power cut). Cache writes use ``synchronous=NORMAL``: they survive
a killed server (the WAL is in the OS's page cache) and at worst the last few
vanish in a power cut, which costs only a re-run.

The schema version is ``PRAGMA user_version``.
"""

from __future__ import annotations

import asyncio
import logging
import os
import sqlite3
import threading
from collections.abc import Awaitable, Callable, Coroutine
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, TypeVar

from jaxplay.server.storage.interface import (
    MIGRATIONS,
    Migration,
    Row,
    StorageError,
    StorageUnavailable,
    Transaction,
    newer_schema,
)

log = logging.getLogger("jaxplay.storage")

DB_FILENAME = "jaxplay.sqlite3"
T = TypeVar("T")
# Below this much free space on its disk the store is reported not writable: a write that grows the file or its
# WAL by a few pages would fail, and a probe that rewrites one page in place would not notice.
MIN_FREE_BYTES = 1 << 20


class SQLiteTransaction:
    def __init__(self, db: sqlite3.Connection) -> None:
        self.db = db

    async def execute(self, sql: str, params: tuple[Any, ...] = ()) -> None:
        self.db.execute(sql, params)

    async def fetch_one(self, sql: str, params: tuple[Any, ...] = ()) -> Row | None:
        return self.db.execute(sql, params).fetchone()

    async def fetch_all(self, sql: str, params: tuple[Any, ...] = ()) -> list[Row]:
        return self.db.execute(sql, params).fetchall()


def run_to_end(coroutine: Coroutine[Any, Any, T]) -> T:
    """Drive a coroutine that never suspends (it awaits only ``SQLiteTransaction``) to its result."""
    try:
        coroutine.send(None)
    except StopIteration as finished:
        return finished.value
    coroutine.close()
    raise RuntimeError("a SQLite transaction awaited something other than its own queries")


class SQLiteStorage:
    def __init__(self, path: Path) -> None:
        self.path = Path(path)
        self.description = f"SQLite {self.path}"
        self.reader: sqlite3.Connection | None = None
        self._writer: sqlite3.Connection | None = None
        self._executor: ThreadPoolExecutor | None = None
        self._writer_thread: threading.Thread | None = None
        self.migrations = MIGRATIONS  # those ``open`` applies: fewer only to restore at an older schema (rolling back)

    # --- lifecycle ---------------------------------------------------------

    async def open(self) -> None:
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise StorageError(f"Cannot create the data folder {self.path.parent}: {exc}. "
                               "Choose another with --data-dir or --database-url.") from exc
        self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="jaxplay-sqlite-writer")
        await asyncio.get_running_loop().run_in_executor(self._executor, self._open_writer)
        self.reader = _connect(self.path)
        log.info("storage: %s (schema version %d)", self.path, await self.schema_version())

    async def close(self) -> None:
        if self._executor is not None:
            await asyncio.get_running_loop().run_in_executor(self._executor, self._close_writer)
            self._executor.shutdown(wait=True)
            self._executor = None
        if self.reader is not None:
            self.reader.close()
            self.reader = None

    def _open_writer(self) -> None:
        self._writer_thread = threading.current_thread()
        self._writer = _connect(self.path)
        self._writer.execute("PRAGMA journal_mode=WAL")
        migrate(self._writer, self.migrations)

    def _close_writer(self) -> None:
        if self._writer is not None:
            # Fold the WAL back into the main file so a copy of the .sqlite3 file alone is complete. On a full disk
            # it cannot be: the WAL stays beside the file, complete, and the next open reads it.
            try:
                self._writer.execute("PRAGMA wal_checkpoint(TRUNCATE)")
            except sqlite3.Error as exc:
                log.warning("storage: %s: the WAL could not be folded into the file at close (%s); it is kept "
                            "beside it, and `jaxplay backup` still copies both", self.path, exc)
            self._writer.close()
            self._writer = None

    # --- the one write path ------------------------------------------------

    async def transaction(self, work: Callable[[Transaction], Awaitable[T]], *, durable: bool) -> T:
        """Run ``work`` in one transaction on the writer thread, without blocking the event loop."""
        if self._executor is None:
            raise StorageError("storage is not open")
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(self._executor, self._transaction, work, durable)

    def _transaction(self, work: Callable[[Transaction], Awaitable[T]], durable: bool) -> T:
        db = self._writer
        assert db is not None
        db.execute(f"PRAGMA synchronous={'FULL' if durable else 'NORMAL'}")
        db.execute("BEGIN IMMEDIATE")
        try:
            result = run_to_end(work(SQLiteTransaction(db)))  # type: ignore[arg-type]
            db.execute("COMMIT")
        except BaseException as exc:
            if db.in_transaction:  # a failed COMMIT may leave it open: the next BEGIN would fail
                db.execute("ROLLBACK")
            if isinstance(exc, sqlite3.Error) and exc.sqlite_errorcode == sqlite3.SQLITE_FULL:
                raise self._full() from exc
            raise
        return result

    def _full(self) -> StorageUnavailable:
        return StorageUnavailable(f"the disk holding {self.path} is full: free space on it, or move --data-dir")

    # --- reads (event loop thread) -----------------------------------------

    async def fetch_one(self, sql: str, params: tuple[Any, ...] = ()) -> Row | None:
        if self.reader is None:
            raise StorageError("storage is not open")
        return self.reader.execute(sql, params).fetchone()

    async def fetch_all(self, sql: str, params: tuple[Any, ...] = ()) -> list[Row]:
        if self.reader is None:
            raise StorageError("storage is not open")
        return self.reader.execute(sql, params).fetchall()

    @property
    def is_open(self) -> bool:
        return self.reader is not None and self._executor is not None

    async def schema_version(self) -> int:
        row = await self.fetch_one("PRAGMA user_version")
        return int(row[0]) if row else 0  # type: ignore[index]

    async def probe_writable(self) -> None:
        """Commit a real write (the schema version, unchanged): raises if the file cannot take one, or if its disk
        has too little room left for the next write (that one rewrites a page in place: it needs none)."""
        disk = os.statvfs(self.path.parent)
        if disk.f_bavail * disk.f_frsize < MIN_FREE_BYTES:
            raise self._full()
        version = await self.schema_version()

        async def rewrite(tx: Transaction) -> None:
            await tx.execute(f"PRAGMA user_version={version:d}")

        await self.transaction(rewrite, durable=False)


def _connect(path: Path) -> sqlite3.Connection:
    # isolation_level=None: transactions are explicit (BEGIN/COMMIT in _transaction, migrate).
    db = sqlite3.connect(path, isolation_level=None, check_same_thread=False, timeout=30.0)
    db.row_factory = sqlite3.Row
    db.execute("PRAGMA foreign_keys=ON")
    db.execute("PRAGMA busy_timeout=30000")
    return db


def migrate(db: sqlite3.Connection, migrations: tuple[Migration, ...] = MIGRATIONS) -> int:
    """Bring the schema to the newest version; returns the version reached."""
    current = int(db.execute("PRAGMA user_version").fetchone()[0])
    newest = migrations[-1].version if migrations else 0
    if current > newest:
        raise newer_schema(current, newest, "--data-dir (or --database-url)")
    for migration in migrations:
        if migration.version <= current:
            continue
        log.info("storage: migrating to schema version %d (%s)", migration.version, migration.purpose)
        db.execute("BEGIN IMMEDIATE")
        try:
            # executescript would COMMIT on its own; run the statements one by one inside our transaction.
            for statement in _statements(migration.sql):
                db.execute(statement)
            db.execute(f"PRAGMA user_version={migration.version:d}")
        except BaseException:
            db.execute("ROLLBACK")
            raise
        db.execute("COMMIT")
        current = migration.version
    return current


def _statements(script: str) -> list[str]:
    """Split at each ';' that ends a statement (not one inside a string or a comment)."""
    statements, start = [], 0
    for index, char in enumerate(script):
        if char == ";" and sqlite3.complete_statement(script[start:index + 1]):
            statements.append(script[start:index + 1].strip())
            start = index + 1
    if script[start:].strip():
        statements.append(script[start:].strip())
    return statements
