"""What of a workshop room survives a restart: its program, deck and position (table ``rooms``).

Members, counts and the last run's output live only in memory: after a
restart followers reconnect and the presenter runs again. Saves go through
the storage's transactions without waiting for an fsync (``durable=False``:
a killed server keeps them, a power cut may lose the last second of typing).
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass, field

from jaxplay.server.storage.interface import Storage, Transaction, utc_timestamp


@dataclass
class RoomRecord:
    code: str
    secret_digest: str
    program: str = ""
    deck: list[str] = field(default_factory=list)
    position: int = 0
    attendee_timeout_s: float = 10.0
    created_at: str = field(default_factory=utc_timestamp)
    last_active: float = field(default_factory=time.time)


class RoomStore:
    def __init__(self, storage: Storage) -> None:
        self.storage = storage

    async def load(self, code: str) -> RoomRecord | None:
        if not self.storage.is_open:
            return None
        row = await self.storage.fetch_one("SELECT * FROM rooms WHERE code = ?", (code,))
        if row is None:
            return None
        return RoomRecord(code=row["code"], secret_digest=row["secret_digest"], program=row["program"],
                          deck=json.loads(row["deck"]), position=row["position"],
                          attendee_timeout_s=row["attendee_timeout_s"], created_at=row["created_at"],
                          last_active=row["last_active"])

    async def exists(self, code: str) -> bool:
        if not self.storage.is_open:
            return False
        return await self.storage.fetch_one("SELECT 1 AS found FROM rooms WHERE code = ?", (code,)) is not None

    async def save(self, record: RoomRecord) -> None:
        await self.storage.transaction(lambda tx: _upsert(tx, _values(record)), durable=False)

    async def save_now(self, record: RoomRecord) -> None:
        """A durable save (creation, where the link must not be answered before the room exists)."""
        await self.storage.transaction(lambda tx: _upsert(tx, _values(record)), durable=True)

    async def rename(self, code: str, new_code: str) -> None:
        """The room stored as ``code`` is stored as ``new_code`` from now on (durably: its old code is gone)."""
        await self.storage.transaction(
            lambda tx: tx.execute("UPDATE rooms SET code = ? WHERE code = ?", (new_code, code)), durable=True)

    async def delete_idle(self, before: float) -> list[str]:
        """Delete rooms last active before ``before`` (unix time); returns their codes."""
        async def work(tx: Transaction) -> list[str]:
            rows = await tx.fetch_all("SELECT code FROM rooms WHERE last_active < ?", (before,))
            await tx.execute("DELETE FROM rooms WHERE last_active < ?", (before,))
            return [row["code"] for row in rows]
        return await self.storage.transaction(work, durable=False)


def _values(record: RoomRecord) -> tuple[object, ...]:
    return (record.code, record.secret_digest, record.created_at, record.last_active, record.program,
            json.dumps(record.deck), record.position, record.attendee_timeout_s)


async def _upsert(tx: Transaction, values: tuple[object, ...]) -> None:
    await tx.execute("INSERT INTO rooms (code, secret_digest, created_at, last_active, program, deck, position, "
                     "attendee_timeout_s) VALUES (?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT(code) DO UPDATE SET "
                     "last_active = excluded.last_active, program = excluded.program, deck = excluded.deck, "
                     "position = excluded.position, attendee_timeout_s = excluded.attendee_timeout_s", values)
