"""Storage of snippets, the result cache, workshop rooms and agent tokens: what both database engines share.

Two engines implement it (``--database-url`` picks one, in server/storage/factory.py,
which alone imports them): SQLite (server/storage/sqlite.py) and PostgreSQL
(server/storage/postgres.py). Both offer the same small interface, used by snippets.py, result_cache.py
and room_store.py:
reads (``fetch_one``, ``fetch_all``) and ``transaction(work, durable=...)``,
where ``work`` is an async function of a ``Transaction`` that awaits nothing
but that transaction's own methods. The SQL is written once, in the subset
both engines speak, with ``?`` placeholders.

The schema is versioned; ``MIGRATIONS`` are applied in order on open, each in
its own transaction, with one SQL text per engine (PostgreSQL needs BYTEA and
DOUBLE PRECISION where SQLite has BLOB and REAL). Never edit a released
migration: append a new one.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Protocol, TypeVar

T = TypeVar("T")
Row = Mapping[str, Any]  # sqlite3.Row or a psycopg dict row: read by column name


@dataclass(frozen=True)
class Migration:
    version: int
    purpose: str
    sql: str  # SQLite
    postgres: str


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
    """, """
        CREATE TABLE snippets (
            id           TEXT PRIMARY KEY,
            content_hash TEXT NOT NULL UNIQUE,
            created_at   TEXT NOT NULL,
            forked_from  TEXT REFERENCES snippets(id),
            document     BYTEA NOT NULL
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
    """, """
        CREATE TABLE result_cache (
            key        TEXT PRIMARY KEY,
            size       INTEGER NOT NULL,
            elapsed_ms DOUBLE PRECISION NOT NULL,
            cached_at  TEXT NOT NULL,
            last_used  DOUBLE PRECISION NOT NULL,   -- REAL (4 bytes) would round unix times to minutes
            recorded   BYTEA NOT NULL
        );
        CREATE INDEX result_cache_last_used ON result_cache(last_used, size);
    """),
    Migration(3, "rooms: workshop rooms' code, deck and position, so a restart keeps the class where it was", """
        CREATE TABLE rooms (
            code               TEXT PRIMARY KEY,    -- jax-XXXXXX (server/rooms/codes.py)
            secret_digest      TEXT NOT NULL,       -- sha256 hex of the presenter secret, never the secret
            created_at         TEXT NOT NULL,       -- ISO 8601, UTC
            last_active        REAL NOT NULL,       -- unix time of the last presenter action or join
            program            TEXT NOT NULL,       -- the presenter's editor text
            deck               TEXT NOT NULL,       -- JSON list of snippet ids
            position           INTEGER NOT NULL,    -- index into deck (0 when the deck is empty)
            attendee_timeout_s REAL NOT NULL
        );
        CREATE INDEX rooms_last_active ON rooms(last_active);
    """, """
        CREATE TABLE rooms (
            code               TEXT PRIMARY KEY,
            secret_digest      TEXT NOT NULL,
            created_at         TEXT NOT NULL,
            last_active        DOUBLE PRECISION NOT NULL,   -- REAL (4 bytes) would round unix times to minutes
            program            TEXT NOT NULL,
            deck               TEXT NOT NULL,
            position           INTEGER NOT NULL,
            attendee_timeout_s DOUBLE PRECISION NOT NULL
        );
        CREATE INDEX rooms_last_active ON rooms(last_active);
    """),
    Migration(4, "result_cache.worker: the worker that recorded each entry, so an operator can purge its word", """
        ALTER TABLE result_cache ADD COLUMN worker TEXT NOT NULL DEFAULT '';  -- its hello's name; '' before v4
        CREATE INDEX result_cache_worker ON result_cache(worker);
    """, """
        ALTER TABLE result_cache ADD COLUMN worker TEXT NOT NULL DEFAULT '';
        CREATE INDEX result_cache_worker ON result_cache(worker);
    """),
    Migration(5, "agent_tokens: the tokens an operator issued to coding assistants (/mcp), stored hashed", """
        CREATE TABLE agent_tokens (
            name       TEXT PRIMARY KEY,            -- the operator's name for the assistant
            digest     TEXT NOT NULL UNIQUE,        -- sha256 hex of the token, never the token
            created_at TEXT NOT NULL                -- ISO 8601, UTC
        );
    """, """
        CREATE TABLE agent_tokens (
            name       TEXT PRIMARY KEY,
            digest     TEXT NOT NULL UNIQUE,
            created_at TEXT NOT NULL
        );
    """),
    Migration(6, "result_candidates: a result answers others only once a second run agreed with it", """
        -- Entries kept under the earlier rule (one run judged deterministic by its own hooks) answer no
        -- one: their keys are of an earlier format (result_cache.py, KEY_FORMAT); eviction takes them.
        ALTER TABLE result_cache ADD COLUMN digest TEXT NOT NULL DEFAULT '';   -- of the run's content
        ALTER TABLE result_cache ADD COLUMN program TEXT NOT NULL DEFAULT '';  -- the shared key of its program
        CREATE INDEX result_cache_program ON result_cache(program);
        CREATE TABLE result_candidates (
            key         TEXT PRIMARY KEY,           -- the shared cache key of a program run once
            digest      TEXT NOT NULL,              -- of that run's content ('' once diverged)
            ended_at    REAL NOT NULL,              -- unix time it ended: a verifying run begins later
            diverged    INTEGER NOT NULL,           -- 1: two runs differed, never shared
            last_seen   REAL NOT NULL               -- unix time; pruned by age and count
        );
        CREATE INDEX result_candidates_last_seen ON result_candidates(last_seen);
    """, """
        ALTER TABLE result_cache ADD COLUMN digest TEXT NOT NULL DEFAULT '';
        ALTER TABLE result_cache ADD COLUMN program TEXT NOT NULL DEFAULT '';
        CREATE INDEX result_cache_program ON result_cache(program);
        CREATE TABLE result_candidates (
            key         TEXT PRIMARY KEY,
            digest      TEXT NOT NULL,
            ended_at    DOUBLE PRECISION NOT NULL,
            diverged    INTEGER NOT NULL,
            last_seen   DOUBLE PRECISION NOT NULL
        );
        CREATE INDEX result_candidates_last_seen ON result_candidates(last_seen);
    """),
)


def utc_timestamp() -> str:
    """Now, as stored and shown: ISO 8601 in UTC to the second, e.g. '2025-05-01T12:00:00Z'."""
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


class StorageError(RuntimeError):
    """The database cannot be used as it is; the message says what to do."""


class StorageUnavailable(StorageError):
    """The database cannot be reached now (down, restarting, failing over); the message names it.

    Requests that need it are answered 503 (server/ops/outage.py); runs go on without the result cache.
    """


def newer_schema(found: int, newest: int, where: str) -> StorageError:
    return StorageError(
        f"The database was written by a newer JAX Playground (schema version {found}; this one knows up to "
        f"{newest}). Upgrade this server, or point {where} at another database.")


class Transaction(Protocol):
    async def execute(self, sql: str, params: tuple[Any, ...] = ()) -> None: ...
    async def fetch_one(self, sql: str, params: tuple[Any, ...] = ()) -> Row | None: ...
    async def fetch_all(self, sql: str, params: tuple[Any, ...] = ()) -> list[Row]: ...


class Storage(Protocol):
    description: str
    migrations: tuple[Migration, ...]  # what ``open`` applies (MIGRATIONS; fewer to restore an older schema)

    @property
    def is_open(self) -> bool: ...
    async def open(self) -> None: ...
    async def close(self) -> None: ...
    async def fetch_one(self, sql: str, params: tuple[Any, ...] = ()) -> Row | None: ...
    async def fetch_all(self, sql: str, params: tuple[Any, ...] = ()) -> list[Row]: ...
    async def transaction(self, work: Callable[[Transaction], Awaitable[T]], *, durable: bool) -> T: ...
    async def schema_version(self) -> int: ...
    async def probe_writable(self) -> None: ...


def redact(url: str) -> str:
    """The URL without its password, for logs and messages."""
    scheme, sep, rest = url.partition("://")
    credentials, at, host = rest.rpartition("@")
    if not at or ":" not in credentials:
        return url
    return f"{scheme}{sep}{credentials.split(':', 1)[0]}:***@{host}"
