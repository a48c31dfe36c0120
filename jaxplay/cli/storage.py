"""``jaxplay backup``, ``jaxplay restore`` and ``jaxplay storage copy``: keep and move what the store holds.

Each works on the store ``--data-dir`` / ``--database-url`` name, beside
running servers. A backup is one SQLite file whichever the engine
(server/storage/backup.py says why); a restore adds a backup's rows to a store,
and ``storage copy`` is a backup of another store restored into this one, which
is how a SQLite data dir moves to PostgreSQL. Restores and copies are
idempotent and never overwrite different data (server/storage/transfer.py).
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

from jaxplay.settings import BACKUP, RESTORE, STORAGE, Settings


def add_parsers(commands: argparse._SubParsersAction, add_setting_flags: Callable[..., None]) -> None:
    backup = commands.add_parser(BACKUP, help="Write a consistent copy of the store (SQLite or PostgreSQL) to one "
                                              "file, while servers run.")
    backup.add_argument("file", type=Path, metavar="FILE", help="The backup to write (an existing file is never "
                                                                "overwritten).")
    add_setting_flags(backup, BACKUP)
    restore = commands.add_parser(RESTORE, help="Add every row of a backup to the store (what is there and equal is "
                                                "kept; different data is never overwritten).")
    restore.add_argument("file", type=Path, metavar="FILE", help="A file `jaxplay backup` wrote.")
    restore.add_argument("--keep-schema", action="store_true",
                         help="Create the store at the backup's schema version, not this version's newest: for the "
                              "older version that wrote the backup to use (rolling back an upgrade).")
    add_setting_flags(restore, RESTORE)
    storage = commands.add_parser(STORAGE, help="Move the store's rows between stores.")
    actions = storage.add_subparsers(dest="action", required=True)
    copy = actions.add_parser("copy", help="Copy every link, room and cached result of another store into this one "
                                           "(e.g. a SQLite data dir into PostgreSQL).")
    copy.add_argument("--from", dest="source", required=True, metavar="STORE",
                      help="The store to copy: a data dir, a .sqlite3 file, sqlite:///PATH or postgresql://...")
    add_setting_flags(copy, STORAGE)


def source_location(text: str) -> Path | str:
    """``--from``: a URL as --database-url takes, or a path (a data dir means its jaxplay.sqlite3)."""
    from jaxplay.server.storage.factory import locate
    from jaxplay.server.storage.sqlite import DB_FILENAME

    if text.startswith(("sqlite:///", "postgresql://", "postgres://")):
        return locate(text, Path("."))
    path = Path(text).resolve()
    return path / DB_FILENAME if path.is_dir() else path


def write_backup(where: Path | str, file: Path) -> Any:
    from jaxplay.server.storage import backup

    return backup.backup_sqlite(where, file) if isinstance(where, Path) else backup.backup_postgres(where, file)


def describe(where: Path | str) -> str:
    from jaxplay.server.storage.interface import redact

    return f"SQLite {where}" if isinstance(where, Path) else f"PostgreSQL {redact(where)}"


def run_backup(args: argparse.Namespace, settings: Settings) -> None:
    from jaxplay.server.storage.factory import locate

    def main() -> int:
        where = locate(settings.database_url, settings.data_dir)
        summary = write_backup(where, args.file)
        rows = ", ".join(f"{count} {table}" for table, count in summary.rows.items())
        print(f"Backed up {describe(where)} to {summary.path} ({summary.bytes} bytes, schema version "
              f"{summary.schema_version}): {rows}.")
        return 0

    _exit_with(BACKUP, main)


def run_restore(args: argparse.Namespace, settings: Settings) -> None:
    async def main() -> int:
        return await _restore_into(args.file, settings, f"Restored {args.file} into", args.keep_schema)

    _exit_with(RESTORE, lambda: asyncio.run(main()))


def run_storage(args: argparse.Namespace, settings: Settings) -> None:
    from jaxplay.server.storage.factory import locate
    from jaxplay.server.storage.interface import StorageError

    def main() -> int:
        source = source_location(args.source)
        target = locate(settings.database_url, settings.data_dir)
        same_file = isinstance(source, Path) and isinstance(target, Path) and source.resolve() == target.resolve()
        if same_file or source == target:
            raise StorageError("--from names the same store as the target (--data-dir / --database-url).")
        with tempfile.TemporaryDirectory(prefix="jaxplay-copy-") as work:
            snapshot = Path(work) / "snapshot.sqlite3"
            write_backup(source, snapshot)  # one consistent instant of the source, even while a server writes it
            return asyncio.run(_restore_into(snapshot, settings, f"Copied {describe(source)} into"))

    _exit_with(f"{STORAGE} {args.action}", main)


async def _restore_into(file: Path, settings: Settings, done: str, keep_schema: bool = False) -> int:
    from jaxplay.server.storage import backup
    from jaxplay.server.storage.factory import open_storage

    target = open_storage(settings.database_url, settings.data_dir)
    if keep_schema:
        target.migrations = backup.migrations_up_to(backup.check_restorable(file).schema_version)
    await target.open()
    try:
        report = await backup.restore(file, target)
    finally:
        await target.close()
    print(f"{done} {target.description}:")
    print("\n".join(report.lines()))
    return 0


def _exit_with(command: str, main: Callable[[], int]) -> None:
    from jaxplay.server.storage.interface import StorageError

    try:
        sys.exit(main())
    except (StorageError, ValueError, OSError) as exc:
        print(f"jaxplay {command}: {exc}", file=sys.stderr)
        sys.exit(2)
