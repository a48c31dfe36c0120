"""Room codes, presenter secrets, and the limit on guessing codes.

A code is ``jax-`` and six characters from a 31-letter alphabet without the
look-alikes 0/O, 1/I/L: 31**6 = 887 million codes. A code only lets someone
watch (the presenter secret, 144 random bits, is what edits), and each
address may try ``room_join_failures_per_minute`` unknown codes a minute
(20 by default): with 1,000 rooms open at once, one address guessing without
pause finds one about once a month (887,000 tries, 740 hours).

Secrets are stored as SHA-256 digests: a copy of the database does not hand
out presenter rights.
"""

from __future__ import annotations

import hashlib
import hmac
import re
import secrets
import time
from collections import deque

ALPHABET = "23456789ABCDEFGHJKMNPQRSTUVWXYZ"
CODE_CHARS = 6
PREFIX = "jax-"
CODE_PATTERN = re.compile(f"{PREFIX}[{ALPHABET}]{{{CODE_CHARS}}}")
SECRET_BYTES = 18
# Addresses remembered by the limiter at most: a flood of addresses cannot grow it without bound.
MAX_TRACKED_ADDRESSES = 10_000


def new_code() -> str:
    return PREFIX + "".join(secrets.choice(ALPHABET) for _ in range(CODE_CHARS))


def normalize_code(text: str) -> str | None:
    """``jax-7q4km2``, ``7Q4KM2``, `` JAX-7Q4KM2 `` -> ``jax-7Q4KM2``; None if it cannot be a room code."""
    text = text.strip().upper().replace(" ", "")
    if text.startswith(PREFIX.upper()):
        text = text[len(PREFIX):]
    code = PREFIX + text
    return code if CODE_PATTERN.fullmatch(code) else None


def new_secret() -> str:
    return secrets.token_urlsafe(SECRET_BYTES)


def secret_digest(secret: str) -> str:
    return hashlib.sha256(secret.encode("utf-8", "surrogatepass")).hexdigest()


def secret_matches(secret: str | None, digest: str) -> bool:
    return secret is not None and hmac.compare_digest(secret_digest(secret), digest)


class AddressLimit:
    """At most ``per_minute`` events per address in any minute (unknown room codes tried, rooms started)."""

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
