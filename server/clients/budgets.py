"""Budgets per key (a network, a browser session): token buckets that refill at a steady rate.

Each key starts with ``capacity`` tokens and regains ``per_hour`` an hour,
never above ``capacity``; an event spends one (or its size, for a budget of
bytes). A bucket costs one small
entry, whatever the rate, so a budget of a thousand an hour needs no list of
a thousand timestamps. At most ``max_keys`` keys are remembered; the one
unused longest is forgotten first (it starts full again if it comes back),
so a flood of keys cannot grow the memory without bound.
"""

from __future__ import annotations

import time
from collections import OrderedDict
from collections.abc import Callable

MAX_KEYS = 10_000
HOUR_S = 3600.0


class Budgets:
    def __init__(self, per_hour: float, capacity: float | None = None, max_keys: int = MAX_KEYS,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.per_hour = per_hour
        self.capacity = float(per_hour if capacity is None else capacity)
        self.max_keys = max_keys
        self.clock = clock
        self._buckets: OrderedDict[str, tuple[float, float]] = OrderedDict()  # key -> (tokens, when counted)

    def left(self, key: str) -> float:
        """Tokens ``key`` may spend now."""
        entry = self._buckets.get(key)
        if entry is None:
            return self.capacity
        tokens, counted_at = entry
        return min(self.capacity, tokens + (self.clock() - counted_at) * self.per_hour / HOUR_S)

    def allows(self, key: str, amount: float = 1.0) -> bool:
        return self.left(key) >= amount

    def spend(self, key: str, amount: float = 1.0) -> bool:
        """Spend ``amount`` tokens of ``key``'s budget; False (and nothing spent) if it has fewer left."""
        tokens = self.left(key)
        if tokens < amount:
            return False
        self._buckets[key] = (tokens - amount, self.clock())
        self._buckets.move_to_end(key)
        while len(self._buckets) > self.max_keys:
            self._buckets.popitem(last=False)
        return True
