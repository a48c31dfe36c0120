"""Links left in a store the server is not using: said once, at start, with the command that moves them.

A server started with ``--database-url postgresql://...`` on a data dir whose
``jaxplay.sqlite3`` holds snippets would answer 404 for all of them, without a
word. It now warns, naming how many of them the store it uses lacks, and
``jaxplay storage copy``; after a complete copy it says nothing. The file is
read, never written (``mode=ro``), in a thread; the store is asked in batches.
"""

from __future__ import annotations

import asyncio
import logging
import sqlite3
from pathlib import Path

from jaxplay.server.storage.interface import Storage, StorageError
from jaxplay.server.storage.sqlite import DB_FILENAME, SQLiteStorage

log = logging.getLogger("jaxplay.storage")

BATCH = 500


def ids_in(path: Path, table: str, key: str) -> list[str]:
    """The keys of ``table`` in the SQLite file at ``path`` (none if it lacks the table)."""
    db = sqlite3.connect(f"file:{path}?mode=ro", uri=True, timeout=5.0)
    try:
        if db.execute("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = ?", (table,)).fetchone() is None:
            return []
        return [row[0] for row in db.execute(f"SELECT {key} FROM {table}")]
    finally:
        db.close()


async def missing_from(storage: Storage, table: str, key: str, keys: list[str]) -> int:
    missing = 0
    for start in range(0, len(keys), BATCH):
        batch = keys[start:start + BATCH]
        found = await storage.fetch_all(f"SELECT {key} FROM {table} WHERE {key} IN ({', '.join('?' * len(batch))})",
                                        tuple(batch))
        missing += len(batch) - len(found)
    return missing


async def warn_of_links_elsewhere(storage: Storage, data_dir: Path) -> dict[str, int]:
    """Warn when ``<data_dir>/jaxplay.sqlite3`` holds links or rooms that ``storage``, another store, lacks."""
    path = Path(data_dir) / DB_FILENAME
    if isinstance(storage, SQLiteStorage) and storage.path.resolve() == path.resolve() or not path.is_file():
        return {}
    try:
        snippets = await asyncio.to_thread(ids_in, path, "snippets", "id")
        rooms = await asyncio.to_thread(ids_in, path, "rooms", "code")
        missing = {"snippets": await missing_from(storage, "snippets", "id", snippets),
                   "rooms": await missing_from(storage, "rooms", "code", rooms)}
    except (sqlite3.Error, StorageError) as exc:
        log.warning("storage: %s exists, but whether this server serves the links it holds could not be checked "
                    "(%s)", path, exc)
        return {}
    if any(missing.values()):
        log.warning("storage: %s holds %d link(s) and %d room(s) that this server's store (%s) lacks: they answer "
                    "404 here. Copy them with: jaxplay storage copy --from %s --database-url URL "
                    "(docs/operations.md, 'Moving to PostgreSQL').", path, missing["snippets"], missing["rooms"],
                    storage.description, path.resolve())
    return missing
