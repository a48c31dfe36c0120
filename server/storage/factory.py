"""``--database-url`` picks the storage engine; the one place that knows both.

- ``sqlite:///PATH`` or empty (the default, ``<data_dir>/jaxplay.sqlite3``):
  one file, one writer thread (server/storage/sqlite.py). Right for one server.
- ``postgresql://USER:PASSWORD@HOST:PORT/DB``: PostgreSQL through psycopg 3,
  async (server/storage/postgres.py). Several server replicas share it.

The interface (server/storage/interface.py) imports neither engine; this
factory sits above all three. psycopg is imported only when PostgreSQL is
asked for.
"""

from __future__ import annotations

from pathlib import Path

from jaxplay.server.storage.interface import Storage, redact
from jaxplay.server.storage.sqlite import DB_FILENAME, SQLiteStorage


def locate(database_url: str, data_dir: Path) -> Path | str:
    """Where a ``--database-url`` points: a SQLite file's path, or a PostgreSQL URL; ValueError says what to change."""
    if not database_url:
        return Path(data_dir) / DB_FILENAME
    if database_url.startswith("sqlite:///"):
        path = Path(database_url.removeprefix("sqlite:///"))
        return path if path.is_absolute() else Path.cwd() / path
    if database_url.startswith(("postgresql://", "postgres://")):
        return database_url
    raise ValueError(f"--database-url {redact(database_url)!r} is not understood: use sqlite:///PATH or "
                     "postgresql://USER:PASSWORD@HOST:PORT/DATABASE.")


def open_storage(database_url: str, data_dir: Path) -> Storage:
    """The storage a ``--database-url`` names (not yet opened); ValueError says what to change."""
    where = locate(database_url, data_dir)
    if isinstance(where, Path):
        return SQLiteStorage(where)
    from jaxplay.server.storage.postgres import PostgresStorage  # psycopg only when asked for

    return PostgresStorage(where)
