"""Links left in a store the server is not using: said once, at start, with the command that moves them.

A server started with ``--database-url postgresql://...`` on a data dir whose
``jaxplay.sqlite3`` holds snippets would answer 404 for all of them, without a
word. It now warns, naming how many and ``jaxplay storage copy``. The file is
read, never written (``mode=ro``), in a thread of its own.
"""

from __future__ import annotations

import asyncio
import logging
import sqlite3
from pathlib import Path

from jaxplay.server.storage.interface import Storage
from jaxplay.server.storage.sqlite import DB_FILENAME, SQLiteStorage

log = logging.getLogger("jaxplay.storage")

COUNTED = ("snippets", "rooms")


def counts_in(path: Path) -> dict[str, int]:
    """Rows of ``COUNTED`` in the SQLite file at ``path`` (a table it lacks counts 0)."""
    db = sqlite3.connect(f"file:{path}?mode=ro", uri=True, timeout=5.0)
    try:
        tables = {row[0] for row in db.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
        return {table: int(db.execute(f"SELECT COUNT(*) FROM {table}").fetchone()[0])
                for table in COUNTED if table in tables}
    finally:
        db.close()


async def warn_of_links_elsewhere(storage: Storage, data_dir: Path) -> dict[str, int]:
    """Warn when ``<data_dir>/jaxplay.sqlite3`` holds links or rooms and ``storage`` is another store."""
    path = Path(data_dir) / DB_FILENAME
    if isinstance(storage, SQLiteStorage) and storage.path.resolve() == path.resolve():
        return {}
    if not path.is_file():
        return {}
    try:
        counts = await asyncio.to_thread(counts_in, path)
    except sqlite3.Error as exc:
        log.warning("storage: %s exists but could not be read (%s); if it holds links, this server does not serve "
                    "them", path, exc)
        return {}
    if any(counts.values()):
        log.warning("storage: %s holds %d link(s) and %d room(s), which this server (%s) does not serve: they answer "
                    "404 here. Copy them with: jaxplay storage copy --from sqlite:///%s --database-url URL "
                    "(docs/operations.md, 'Moving to PostgreSQL').", path, counts.get("snippets", 0),
                    counts.get("rooms", 0), storage.description, path.resolve())
    return counts
