"""The tokens an operator issues to coding assistants, stored hashed.

``jaxplay tokens add NAME`` makes one (``secrets.token_urlsafe``, 256 bits)
and prints it once; the store keeps only its SHA-256, so a copy of the
database (a backup, a leaked dump) names the assistants but lets none of
them in. A token is long and random, so a plain hash is enough: there is
nothing to guess that a slow hash would protect. The endpoint (endpoint.py)
looks a presented token up by its digest on every request, so ``tokens
remove`` takes effect at the next request, on every replica.
"""

from __future__ import annotations

import hashlib
import re
import secrets
from dataclasses import dataclass

from jaxplay.server.storage.interface import Storage, Transaction, utc_timestamp

TOKEN_PREFIX = "jxp_"  # says what a token is, where one turns up (a shell history, a config file)
NAME_PATTERN = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,63}", re.ASCII)
MAX_TOKEN_CHARS = 200  # longer than any token issued here: refused before hashing


class TokenError(ValueError):
    """A request about tokens that cannot be done as asked; the message says what to change."""


@dataclass(frozen=True)
class IssuedToken:
    name: str
    created_at: str


def digest_of(token: str) -> str:
    return hashlib.sha256(token.encode("utf-8", "surrogatepass")).hexdigest()


def check_name(name: str) -> str:
    if not NAME_PATTERN.fullmatch(name):
        raise TokenError(f"{name!r} is not a token name: use 1 to 64 letters, digits, '.', '_' or '-', starting "
                         "with a letter or digit (e.g. alice-laptop).")
    return name


class TokenStore:
    def __init__(self, storage: Storage) -> None:
        self.storage = storage

    async def add(self, name: str) -> str:
        """A new token for ``name``, returned once; refused if ``name`` already has one."""
        check_name(name)
        token = TOKEN_PREFIX + secrets.token_urlsafe(32)

        async def insert(tx: Transaction) -> bool:
            if await tx.fetch_one("SELECT name FROM agent_tokens WHERE name = ?", (name,)) is not None:
                return False
            await tx.execute("INSERT INTO agent_tokens (name, digest, created_at) VALUES (?, ?, ?)",
                             (name, digest_of(token), utc_timestamp()))
            return True

        if not await self.storage.transaction(insert, durable=True):
            raise TokenError(f"A token named {name!r} exists already; remove it first (jaxplay tokens remove "
                             f"{name}) or choose another name.")
        return token

    async def remove(self, name: str) -> bool:
        async def delete(tx: Transaction) -> bool:
            found = await tx.fetch_one("SELECT name FROM agent_tokens WHERE name = ?", (name,)) is not None
            await tx.execute("DELETE FROM agent_tokens WHERE name = ?", (name,))
            return found

        return await self.storage.transaction(delete, durable=True)

    async def listing(self) -> list[IssuedToken]:
        rows = await self.storage.fetch_all("SELECT name, created_at FROM agent_tokens ORDER BY name")
        return [IssuedToken(name=row["name"], created_at=row["created_at"]) for row in rows]

    async def name_of(self, token: str) -> str | None:
        """The name a presented token was issued to, or None for a token nobody issued (or one removed)."""
        if not token or len(token) > MAX_TOKEN_CHARS:
            return None
        row = await self.storage.fetch_one("SELECT name FROM agent_tokens WHERE digest = ?", (digest_of(token),))
        return None if row is None else str(row["name"])
