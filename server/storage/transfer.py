"""Copy every row of the playground's tables from one store to another: restores and moves.

``jaxplay restore`` and ``jaxplay storage copy`` both end here, with two
opened stores at the same (newest) schema version. The copy is:

- complete: every table the schema holds (``TABLES``; a table this version
  does not know stops it before anything is written);
- exact: values go as they are read (text, bytes, 64-bit floats, integers),
  so a row reads back equal, byte for byte, in either engine;
- idempotent: a row already there and equal is left alone, so running it
  again after a partial copy finishes it;
- never destructive: a row whose key is taken by different data is a
  conflict. Every batch is checked first, and with any conflict nothing is
  written; a conflict that appears meanwhile (a server writing the same key)
  stops the copy at that batch, which rolls back, and says how far it got.

Rows go in batches of at most ``BATCH_BYTES`` of their largest column, one
transaction each, parents before the snippets forked from them (a foreign
key). ``result_cache.last_used`` is bookkeeping, changed by every answer: an
entry that differs only there is the same entry (``result_candidates.last_seen``
likewise, for every run of a program).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from jaxplay.server.storage.interface import Row, Storage, StorageError, Transaction

BATCH_BYTES = 16 << 20
BATCH_ROWS = 500
SHOWN_CONFLICTS = 10


@dataclass(frozen=True)
class Table:
    name: str
    key: str
    largest: str  # the column that sizes a batch
    ignored: tuple[str, ...] = ()  # columns that may differ between two copies of one row


# Every table the migrations create (tests/unit/test_storage_transfer.py holds this to MIGRATIONS), in the
# order they are copied.
TABLES = (
    Table("snippets", "id", "document"),
    Table("rooms", "code", "program"),
    Table("result_cache", "key", "recorded", ignored=("last_used",)),
    Table("agent_tokens", "name", "digest"),
    Table("result_candidates", "key", "digest", ignored=("last_seen",)),
)
# Tables of the engines themselves, never copied: the schema version is each store's own.
ENGINE_TABLES = ("jaxplay_schema",)


class CopyConflict(StorageError):
    """Rows of the source whose keys the target holds with other data; nothing of them was written."""


@dataclass
class TableCount:
    copied: int = 0
    present: int = 0  # already there, equal


@dataclass
class CopyReport:
    tables: dict[str, TableCount] = field(default_factory=dict)

    def lines(self) -> list[str]:
        return [f"  {name}: {count.copied} copied, {count.present} already there"
                for name, count in self.tables.items()]


def unknown_tables(names: set[str]) -> list[str]:
    return sorted(names - {t.name for t in TABLES} - set(ENGINE_TABLES))


def differing_columns(table: Table, source: Row, target: Row) -> list[str]:
    return [column for column in source.keys()
            if column not in table.ignored and _value(source[column]) != _value(target[column])]


def _value(value: Any) -> Any:
    return bytes(value) if isinstance(value, memoryview | bytearray) else value


async def _keys_in_order(source: Storage, table: Table) -> list[tuple[Any, int]]:
    """Each row's key and size, parents first for snippets."""
    if table.name != "snippets":
        rows = await source.fetch_all(
            f"SELECT {table.key} AS k, length({table.largest}) AS n FROM {table.name} ORDER BY {table.key}")
        return [(row["k"], int(row["n"] or 0)) for row in rows]
    rows = await source.fetch_all("SELECT id, forked_from, length(document) AS n FROM snippets ORDER BY id")
    parent = {row["id"]: row["forked_from"] for row in rows}
    depth: dict[str, int] = {}

    def depth_of(snippet: str) -> int:
        chain = []
        while snippet not in depth and parent.get(snippet) in parent and len(chain) <= len(parent):
            chain.append(snippet)
            snippet = parent[snippet]
        base = depth.setdefault(snippet, 0)
        for offset, child in enumerate(reversed(chain), start=1):
            depth[child] = base + offset
        return depth[chain[0]] if chain else base

    return [(row["id"], int(row["n"] or 0)) for row in sorted(rows, key=lambda r: (depth_of(r["id"]), r["id"]))]


def _batches(keys: list[tuple[Any, int]]) -> Iterator[list[Any]]:
    batch: list[Any] = []
    size = 0
    for key, n in keys:
        if batch and (size + n > BATCH_BYTES or len(batch) >= BATCH_ROWS):
            yield batch
            batch, size = [], 0
        batch.append(key)
        size += n
    if batch:
        yield batch


def _select(table: Table, count: int) -> str:
    return f"SELECT * FROM {table.name} WHERE {table.key} IN ({', '.join('?' * count)})"


async def _fetch(source: Storage, table: Table, batch: list[Any]) -> list[Row]:
    """The rows of ``batch``, in its order (parents first), whatever order the engine returns them in."""
    place = {key: index for index, key in enumerate(batch)}
    rows = await source.fetch_all(_select(table, len(batch)), tuple(batch))
    return sorted(rows, key=lambda row: place[row[table.key]])


async def _classify(table: Table, rows: list[Row], existing: list[Row]) -> tuple[list[Row], int, list[str]]:
    """The rows to insert, how many are there already, and the conflicts (described)."""
    there = {row[table.key]: row for row in existing}
    missing, present, conflicts = [], 0, []
    for row in rows:
        other = there.get(row[table.key])
        if other is None:
            missing.append(row)
        elif differing := differing_columns(table, row, other):
            conflicts.append(f"{table.name} {table.key}={row[table.key]!r} differs in {', '.join(differing)}")
        else:
            present += 1
    return missing, present, conflicts


async def _check(source: Storage, target: Storage, table: Table, keys: list[tuple[Any, int]]) -> list[str]:
    conflicts: list[str] = []
    for batch in _batches(keys):
        rows = await _fetch(source, table, batch)
        existing = await target.fetch_all(_select(table, len(batch)), tuple(batch))
        conflicts += (await _classify(table, rows, existing))[2]
    return conflicts


async def copy_rows(source: Storage, target: Storage, source_tables: set[str]) -> CopyReport:
    """Copy every row of ``source`` into ``target`` (both open, at one schema version). ``source_tables``
    names the tables the source holds: one this version does not know is refused before anything is read."""
    unknown = unknown_tables(source_tables)
    if unknown:
        raise StorageError(f"The source holds table(s) {', '.join(unknown)}, which this version of the playground "
                           "does not know how to copy. Use the version that wrote it.")
    # An older schema (a restore kept at the backup's version) may lack a table: there is nothing of it to copy.
    plan = [(table, await _keys_in_order(source, table)) for table in TABLES if table.name in source_tables]
    conflicts = [c for table, keys in plan for c in await _check(source, target, table, keys)]
    if conflicts:
        shown = "\n  ".join(conflicts[:SHOWN_CONFLICTS])
        more = f"\n  ... and {len(conflicts) - SHOWN_CONFLICTS} more" if len(conflicts) > SHOWN_CONFLICTS else ""
        raise CopyConflict(f"{len(conflicts)} row(s) of the source would overwrite different data in the target, "
                           f"so nothing was copied:\n  {shown}{more}\nCopy into an empty database, or remove "
                           "those rows from one side first.")
    report = CopyReport()
    for table, keys in plan:
        count = report.tables.setdefault(table.name, TableCount())
        for batch in _batches(keys):
            rows = await _fetch(source, table, batch)
            copied, present = await target.transaction(lambda tx, t=table, r=rows: _write(tx, t, r), durable=True)
            count.copied += copied
            count.present += present
    return report


async def _write(tx: Transaction, table: Table, rows: list[Row]) -> tuple[int, int]:
    keys = tuple(row[table.key] for row in rows)
    existing = await tx.fetch_all(_select(table, len(keys)), keys) if keys else []
    missing, present, conflicts = await _classify(table, rows, existing)
    if conflicts:
        raise CopyConflict(f"the target changed during the copy: {conflicts[0]}. The rows before this batch were "
                           "copied; run the command again once nothing writes those keys.")
    for row in missing:
        columns = list(row.keys())
        await tx.execute(f"INSERT INTO {table.name} ({', '.join(columns)}) VALUES ({', '.join('?' * len(columns))})",
                         tuple(_value(row[c]) for c in columns))
    return len(missing), present
