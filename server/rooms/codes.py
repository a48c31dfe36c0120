"""Room codes, presenter secrets, and the limit on starting rooms.

A code is ``jax-`` and two groups of five characters from a 31-letter
alphabet without the look-alikes 0/O, 1/I/L, e.g. ``jax-7Q4KM-2XP9R``:
31**10 = 8.2e14 codes. Case, the ``jax-`` prefix, spaces and dashes do not
matter when typed. Codes of six characters, the earlier form (31**6 = 8.9e8),
find their room only until ``room_short_codes_until``; after it, a presenter
who opens the room with its secret moves it to a new 10-character code
(server/rooms/hub.py).

A code only lets someone watch (the presenter secret, 144 random bits, is
what edits). Every try of a code, right or wrong, is paid for before it is
looked up, per socket, client and network (server/rooms/join_limits.py): at
most 600 an hour from one network address. With 10,000 rooms open at once a
guess hits one with probability 10,000 / 8.2e14 = 1.2e-11, so finding one
takes 8.2e10 guesses on average: 1.4e8 hours (15,600 years) for one address,
15.6 years for a thousand addresses together. docs/security.md has the same
arithmetic.

Secrets are stored as SHA-256 digests: a copy of the database does not hand
out presenter rights.
"""

from __future__ import annotations

import datetime
import hashlib
import hmac
import re
import secrets
import time
from collections import deque

ALPHABET = "23456789ABCDEFGHJKMNPQRSTUVWXYZ"
GROUP_CHARS = 5
GROUPS = 2
LEGACY_CHARS = 6
PREFIX = "jax-"
CODE_PATTERN = re.compile(f"{PREFIX}[{ALPHABET}]{{{GROUP_CHARS}}}-[{ALPHABET}]{{{GROUP_CHARS}}}")
LEGACY_PATTERN = re.compile(f"{PREFIX}[{ALPHABET}]{{{LEGACY_CHARS}}}")
SECRET_BYTES = 18
# Addresses remembered by the limiter at most: a flood of addresses cannot grow it without bound.
MAX_TRACKED_ADDRESSES = 10_000


def new_code() -> str:
    groups = ("".join(secrets.choice(ALPHABET) for _ in range(GROUP_CHARS)) for _ in range(GROUPS))
    return PREFIX + "-".join(groups)


def normalize_code(text: str) -> str | None:
    """``jax-7q4km-2xp9r``, ``7Q4KM2XP9R``, `` JAX 7Q4KM 2XP9R `` -> ``jax-7Q4KM-2XP9R``; None if it cannot
    be a room code."""
    text = text.upper().replace(" ", "").replace("-", "")
    bare_prefix = PREFIX.rstrip("-").upper()
    if len(text) in (GROUP_CHARS * GROUPS + len(bare_prefix), LEGACY_CHARS + len(bare_prefix)) and \
            text.startswith(bare_prefix):
        text = text[len(bare_prefix):]
    if len(text) == GROUP_CHARS * GROUPS:
        code = PREFIX + "-".join(text[i:i + GROUP_CHARS] for i in range(0, len(text), GROUP_CHARS))
        return code if CODE_PATTERN.fullmatch(code) else None
    code = PREFIX + text
    return code if LEGACY_PATTERN.fullmatch(code) else None


def is_short(code: str) -> bool:
    """A code of the earlier, six-character form (as ``normalize_code`` writes it)."""
    return LEGACY_PATTERN.fullmatch(code) is not None


def short_codes_end(day: str) -> float | None:
    """When (unix time) six-character codes stop finding rooms: the start of ``day`` (YYYY-MM-DD, UTC); None
    for "" (no end). ValueError names the setting."""
    if not day.strip():
        return None
    try:
        date = datetime.date.fromisoformat(day.strip())
    except ValueError:
        raise ValueError(f"--room-short-codes-until must be a day as YYYY-MM-DD (UTC), or empty; not {day!r}.") from None
    return datetime.datetime(date.year, date.month, date.day, tzinfo=datetime.UTC).timestamp()


def new_secret() -> str:
    return secrets.token_urlsafe(SECRET_BYTES)


def secret_digest(secret: str) -> str:
    return hashlib.sha256(secret.encode("utf-8", "surrogatepass")).hexdigest()


def secret_matches(secret: str | None, digest: str) -> bool:
    return secret is not None and hmac.compare_digest(secret_digest(secret), digest)


class AddressLimit:
    """At most ``per_minute`` events per address in any minute (rooms started)."""

    def __init__(self, per_minute: int, window_s: float = 60.0) -> None:
        self.per_minute = per_minute
        self.window_s = window_s
        self.failures: dict[str, deque[float]] = {}

    def allowed(self, address: str) -> bool:
        recent = self.failures.get(address)
        if recent is None:
            return True
        cutoff = time.monotonic() - self.window_s
        while recent and recent[0] < cutoff:
            recent.popleft()
        if not recent:
            del self.failures[address]
            return True
        return len(recent) < self.per_minute

    def record(self, address: str) -> None:
        if address not in self.failures and len(self.failures) >= MAX_TRACKED_ADDRESSES:
            self.failures.pop(next(iter(self.failures)))
        self.failures.setdefault(address, deque()).append(time.monotonic())
