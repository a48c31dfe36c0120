"""The server's one SQLite database: snippets, the result cache and workshop rooms, in one file.

Threads and ownership::

    event loop thread ── ``reader`` connection: every SELECT (fast, never waits
    │                    on a writer: WAL lets readers see the last commit)
    └─ "jaxplay-sqlite-writer" thread ── ``writer`` connection: every INSERT,
                         UPDATE and DELETE, one transaction at a time

All writes go through ``write`` / ``write_async``, the one write path, so
there is never a second writer to wait for, and a failed write rolls back as a
whole. The file lives at ``<data_dir>/jaxplay.sqlite3``.

Durability: WAL mode. A snippet is committed with ``synchronous=FULL`` before
its link is answered (the WAL is fsynced: the link survives a SIGKILL of the
server and a power cut). Cache writes use ``synchronous=NORMAL``: they survive
a killed server (the WAL is in the OS's page cache) and at worst the last few
vanish in a power cut, which costs only a re-run.

The schema is versioned with ``PRAGMA user_version``; ``MIGRATIONS`` are
applied in order on open, each in its own transaction. Never edit a released
migration: append a new one.
"""

from __future__ import annotations

import asyncio
import logging
import sqlite3
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, TypeVar

log = logging.getLogger("jaxplay.storage")

DB_FILENAME = "jaxplay.sqlite3"
T = TypeVar("T")


@dataclass(frozen=True)
class Migration:
    version: int
    purpose: str
    sql: str


MIGRATIONS: tuple[Migration, ...] = (
    Migration(1, "snippets: immutable shared programs, addressed by a hash of their content", """
        CREATE TABLE snippets (
            id           TEXT PRIMARY KEY,          -- the shortest unused prefix of content_hash, >= 8 chars
            content_hash TEXT NOT NULL UNIQUE,      -- base32 sha256 of the canonical content
            created_at   TEXT NOT NULL,             -- ISO 8601, UTC
            forked_from  TEXT REFERENCES snippets(id),
            document     BLOB NOT NULL              -- zlib of the JSON that GET /api/snippets/{id} answers
        );
        CREATE INDEX snippets_forked_from ON snippets(forked_from);
    """),
    Migration(2, "result_cache: recorded events of deterministic successful runs, evicted least recently used", """
        CREATE TABLE result_cache (
            key        TEXT PRIMARY KEY,            -- sha256 of code, backend, devices, versions, options
            size       INTEGER NOT NULL,            -- len(recorded): what counts against the cache limit
            elapsed_ms REAL NOT NULL,
            cached_at  TEXT NOT NULL,               -- when the recorded run finished, ISO 8601 UTC
            last_used  REAL NOT NULL,               -- unix time of the last answer from this entry
            recorded   BLOB NOT NULL                -- zlib of the JSON {events, done}; last, so scans skip it
        );
        -- Covers both the eviction order and the total size, without touching the blobs.
        CREATE INDEX result_cache_last_used ON result_cache(last_used, size);
    """),
    Migration(3, "rooms: workshop rooms' code, deck and position, so a restart keeps the class where it was", """
        CREATE TABLE rooms (
            code               TEXT PRIMARY KEY,    -- jax-XXXXXX (server/room_codes.py)
            secret_digest      TEXT NOT NULL,       -- sha256 hex of the presenter secret, never the secret
            created_at         TEXT NOT NULL,       -- ISO 8601, UTC
            last_active        REAL NOT NULL,       -- unix time of the last presenter action or join
            program            TEXT NOT NULL,       -- the presenter's editor text
            deck               TEXT NOT NULL,       -- JSON list of snippet ids
            position           INTEGER NOT NULL,    -- index into deck (0 when the deck is empty)
            attendee_timeout_s REAL NOT NULL
        );
        CREATE INDEX rooms_last_active ON rooms(last_active);
    """),
)


def utc_timestamp() -> str:
    """Now, as stored and shown: ISO 8601 in UTC to the second, e.g. '2025-05-01T12:00:00Z'."""
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


class StorageError(RuntimeError):
    """The database cannot be used as it is; the message says what to do."""


class Storage:
    def __init__(self, data_dir: Path) -> None:
        self.path = Path(data_dir) / DB_FILENAME
        self.reader: sqlite3.Connection | None = None
        self._writer: sqlite3.Connection | None = None
        self._executor: ThreadPoolExecutor | None = None
        self._writer_thread: threading.Thread | None = None

    # --- lifecycle ---------------------------------------------------------

    def open(self) -> None:
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise StorageError(f"Cannot create the data folder {self.path.parent}: {exc}. "
                               "Choose another with --data-dir.") from exc
        self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="jaxplay-sqlite-writer")
        self._executor.submit(self._open_writer).result()
        self.reader = _connect(self.path)
        log.info("storage: %s (schema version %d)", self.path, self.schema_version())

    def close(self) -> None:
        if self._executor is not None:
            self._executor.submit(self._close_writer).result()
            self._executor.shutdown(wait=True)
            self._executor = None
        if self.reader is not None:
            self.reader.close()
            self.reader = None

    def _open_writer(self) -> None:
        self._writer_thread = threading.current_thread()
        self._writer = _connect(self.path)
        self._writer.execute("PRAGMA journal_mode=WAL")
        migrate(self._writer)

    def _close_writer(self) -> None:
        if self._writer is not None:
            # Fold the WAL back into the main file so a copy of the .sqlite3 file alone is complete.
            self._writer.execute("PRAGMA wal_checkpoint(TRUNCATE)")
            self._writer.close()
            self._writer = None

    # --- the one write path ------------------------------------------------

    def write(self, work: Callable[[sqlite3.Connection], T], *, durable: bool) -> T:
        """Run ``work(connection)`` in one transaction on the writer thread; block until committed."""
        if self._executor is None:
            raise StorageError("storage is not open")
        if threading.current_thread() is self._writer_thread:
            return self._transaction(work, durable)
        return self._executor.submit(self._transaction, work, durable).result()

    async def write_async(self, work: Callable[[sqlite3.Connection], T], *, durable: bool) -> T:
        """``write`` without blocking the event loop while SQLite commits (and fsyncs)."""
        if self._executor is None:
            raise StorageError("storage is not open")
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(self._executor, self._transaction, work, durable)

    def _transaction(self, work: Callable[[sqlite3.Connection], T], durable: bool) -> T:
        db = self._writer
        assert db is not None
        db.execute(f"PRAGMA synchronous={'FULL' if durable else 'NORMAL'}")
        db.execute("BEGIN IMMEDIATE")
        try:
            result = work(db)
        except BaseException:
            db.execute("ROLLBACK")
            raise
        db.execute("COMMIT")
        return result

    # --- reads (event loop thread) -----------------------------------------

    def read_one(self, sql: str, params: tuple[Any, ...] = ()) -> sqlite3.Row | None:
        if self.reader is None:
            raise StorageError("storage is not open")
        return self.reader.execute(sql, params).fetchone()

    def read_all(self, sql: str, params: tuple[Any, ...] = ()) -> list[sqlite3.Row]:
        if self.reader is None:
            raise StorageError("storage is not open")
        return self.reader.execute(sql, params).fetchall()

    @property
    def is_open(self) -> bool:
        return self.reader is not None and self._executor is not None

    def schema_version(self) -> int:
        row = self.read_one("PRAGMA user_version")
        return int(row[0]) if row else 0


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
        raise StorageError(
            f"The database was written by a newer JAX Playground (schema version {current}; this one knows "
            f"up to {newest}). Upgrade this server, or point --data-dir at another folder.")
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
