"""PostgreSQL storage through psycopg 3 (async): what several server replicas share.

Connections and ownership, all on the server's event loop::

    reader  autocommit connection: every read (psycopg serialises its users)
    writer  one transaction at a time, under ``_write_lock``: the same one
            write path as SQLite, so the shared SQL behaves the same

A restart or failover of the database breaks both connections: the next use
finds its connection broken, connects again and tries once more (every write
here may be repeated: inserts look for their row first, the rest are upserts
or deletes), so the first request after the database returns succeeds. While it
is unreachable every operation raises ``StorageUnavailable``, which the routes
answer with a 503 naming it (server/ops/outage.py).

Two replicas may write at once: a transaction that loses a race on a unique
key (two replicas sharing the same new snippet) is retried and then finds the
other's row, which is what the SQL already handles. Non-durable writes (the
result cache) commit with ``synchronous_commit = off``: a crash of the
database may lose the last few, which costs only a re-run. Snippets wait for
the WAL flush before their link is answered.

The schema version lives in ``jaxplay_schema``; replicas starting together
migrate one at a time under an advisory lock.

A database that cannot be reached at start (down, or refusing connections
because it has too many) makes ``open`` raise ``StorageUnavailable`` and leaves
the storage opened but not connected: every use then raises
``StorageUnavailable`` with that cause (a 503 naming it) without dialing,
until ``open`` is called again and connects (server/sharing/ retries it).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

import psycopg
from psycopg import errors
from psycopg.rows import dict_row, tuple_row

from jaxplay.server.storage.interface import (
    MIGRATIONS,
    Migration,
    Row,
    StorageError,
    StorageUnavailable,
    Transaction,
    newer_schema,
    redact,
)

log = logging.getLogger("jaxplay.storage")

T = TypeVar("T")
# What a database that went away raises: its connection is then broken, or was closed under us.
CONNECTION_LOST = (psycopg.OperationalError, psycopg.InterfaceError)
MIGRATION_LOCK = 0x6A617870  # "jaxp": the advisory lock replicas take while migrating
RACE_RETRIES = 3
CONNECT_TIMEOUT_S = 10


def placeholders(sql: str) -> str:
    """The shared SQL's ``?`` placeholders in psycopg's spelling."""
    return sql.replace("%", "%%").replace("?", "%s")


class PostgresTransaction:
    def __init__(self, connection: psycopg.AsyncConnection[Any]) -> None:
        self.connection = connection

    async def execute(self, sql: str, params: tuple[Any, ...] = ()) -> None:
        await self.connection.execute(placeholders(sql), params)

    async def fetch_one(self, sql: str, params: tuple[Any, ...] = ()) -> Row | None:
        cursor = await self.connection.execute(placeholders(sql), params)
        return await cursor.fetchone()

    async def fetch_all(self, sql: str, params: tuple[Any, ...] = ()) -> list[Row]:
        cursor = await self.connection.execute(placeholders(sql), params)
        return await cursor.fetchall()


class PostgresStorage:
    def __init__(self, url: str) -> None:
        self.url = url
        self.description = f"PostgreSQL {redact(url)}"
        self._reader: psycopg.AsyncConnection[Any] | None = None
        self._writer: psycopg.AsyncConnection[Any] | None = None
        self._write_lock = asyncio.Lock()
        self._connect_lock = asyncio.Lock()
        self._opened = False  # open() was called, and close() was not
        self.migrations = MIGRATIONS  # those ``open`` applies: fewer only to restore at an older schema (rolling back)
        self._not_connected: str | None = None  # why open() could not connect yet

    # --- lifecycle ---------------------------------------------------------

    async def _connect(self, autocommit: bool) -> psycopg.AsyncConnection[Any]:
        try:
            return await psycopg.AsyncConnection.connect(self.url, autocommit=autocommit, row_factory=dict_row,
                                                         connect_timeout=CONNECT_TIMEOUT_S)
        except psycopg.Error as exc:
            raise StorageUnavailable(f"Cannot connect to {self.description}: {str(exc).strip()}. Check --database-url "
                                     "(JAXPLAY_DATABASE_URL) and that the server is running.") from exc

    def _unavailable(self, exc: Exception) -> StorageUnavailable:
        first_line = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
        return StorageUnavailable(f"{self.description} cannot be reached: {first_line}")

    async def open(self) -> None:
        """Connect and migrate; ``StorageUnavailable`` if the database cannot be reached (call again later)."""
        self._opened = True
        try:
            writer = await self._connect(autocommit=True)  # transactions are explicit below
            try:
                await self._migrate(writer, self.migrations)
                reader = await self._connect(autocommit=True)
            except BaseException:
                await writer.close()
                raise
        except CONNECTION_LOST as exc:  # dropped while migrating
            self._not_connected = str(self._unavailable(exc))
            raise self._unavailable(exc) from exc
        except StorageUnavailable as exc:
            self._not_connected = str(exc)
            raise
        self._writer, self._reader, self._not_connected = writer, reader, None
        log.info("storage: %s (schema version %d)", self.description, await self.schema_version())

    async def close(self) -> None:
        for connection in (self._reader, self._writer):
            if connection is not None:
                await connection.close()
        self._reader = self._writer = None
        self._opened, self._not_connected = False, None

    @property
    def is_open(self) -> bool:
        """Opened, and not closed: connected, or answering ``StorageUnavailable`` until it connects."""
        return self._opened

    @property
    def connected(self) -> bool:
        return self._reader is not None and self._writer is not None

    async def _usable(self, which: str) -> psycopg.AsyncConnection[Any]:
        """The connection, opened again if the database dropped it (a restart, a failover)."""
        if getattr(self, which) is None:
            if self._opened and self._not_connected:
                raise StorageUnavailable(self._not_connected)
            raise StorageError("storage is not open")
        async with self._connect_lock:  # one reconnect, however many requests find the connection broken
            connection = getattr(self, which)
            if connection is not None and (connection.closed or connection.broken):
                log.warning("storage: %s connection was lost; connecting again", which.strip("_"))
                connection = await self._connect(autocommit=True)
                setattr(self, which, connection)
        if connection is None:
            raise StorageError("storage is not open")
        return connection

    async def _read(self, query: Callable[[psycopg.AsyncConnection[Any]], Awaitable[T]]) -> T:
        """``query`` on the reader; once more on a new connection if the database dropped the old one."""
        for attempt in range(2):
            connection = await self._usable("_reader")
            try:
                return await query(connection)
            except CONNECTION_LOST as exc:
                if attempt or not (connection.closed or connection.broken):
                    raise self._unavailable(exc) from exc
        raise AssertionError("unreachable")

    async def _migrate(self, connection: psycopg.AsyncConnection[Any],
                       migrations: tuple[Migration, ...] = MIGRATIONS) -> int:
        await connection.execute("SELECT pg_advisory_lock(%s)", (MIGRATION_LOCK,))
        try:
            async with connection.transaction():
                await connection.execute("CREATE TABLE IF NOT EXISTS jaxplay_schema (version INTEGER NOT NULL)")
                await connection.execute("INSERT INTO jaxplay_schema (version) SELECT 0 "
                                         "WHERE NOT EXISTS (SELECT 1 FROM jaxplay_schema)")
            current = await self._version(connection)
            newest = migrations[-1].version if migrations else 0
            if current > newest:
                raise newer_schema(current, newest, "--database-url")
            for migration in migrations:
                if migration.version <= current:
                    continue
                log.info("storage: migrating to schema version %d (%s)", migration.version, migration.purpose)
                async with connection.transaction():
                    await connection.execute(migration.postgres)
                    await connection.execute("UPDATE jaxplay_schema SET version = %s", (migration.version,))
                current = migration.version
            return current
        finally:
            await connection.execute("SELECT pg_advisory_unlock(%s)", (MIGRATION_LOCK,))

    @staticmethod
    async def _version(connection: psycopg.AsyncConnection[Any]) -> int:
        cursor = connection.cursor(row_factory=tuple_row)
        await cursor.execute("SELECT version FROM jaxplay_schema")
        row = await cursor.fetchone()
        return int(row[0]) if row else 0

    # --- the one write path ------------------------------------------------

    async def transaction(self, work: Callable[[Transaction], Awaitable[T]], *, durable: bool) -> T:
        async with self._write_lock:
            for attempt in range(RACE_RETRIES):
                connection = await self._usable("_writer")
                try:
                    async with connection.transaction():
                        if not durable:
                            await connection.execute("SET LOCAL synchronous_commit = off")
                        return await work(PostgresTransaction(connection))
                except (errors.UniqueViolation, errors.SerializationFailure):
                    if attempt == RACE_RETRIES - 1:
                        raise
                    log.info("storage: a write raced another replica's; trying again")
                except CONNECTION_LOST as exc:
                    # A connection the database dropped (a restart) is opened again and the work repeated.
                    if attempt == RACE_RETRIES - 1 or not (connection.closed or connection.broken):
                        raise self._unavailable(exc) from exc
            raise AssertionError("unreachable")

    # --- reads -------------------------------------------------------------

    async def fetch_one(self, sql: str, params: tuple[Any, ...] = ()) -> Row | None:
        async def query(connection: psycopg.AsyncConnection[Any]) -> Row | None:
            return await (await connection.execute(placeholders(sql), params)).fetchone()

        return await self._read(query)

    async def fetch_all(self, sql: str, params: tuple[Any, ...] = ()) -> list[Row]:
        async def query(connection: psycopg.AsyncConnection[Any]) -> list[Row]:
            return await (await connection.execute(placeholders(sql), params)).fetchall()

        return await self._read(query)

    async def schema_version(self) -> int:
        return await self._read(self._version)

    async def probe_writable(self) -> None:
        """Commit a real write (the schema version, unchanged): raises if the database cannot take one."""
        async def rewrite(tx: Transaction) -> None:
            await tx.execute("UPDATE jaxplay_schema SET version = version")

        await self.transaction(rewrite, durable=False)
