"""Per-run bounds on what a run may show, so a loop cannot flood the page."""

from __future__ import annotations

import sys


class Budget:
    """At most ``max_count`` items and ``max_bytes`` of data; one notice on stderr when hit."""

    def __init__(self, what: str, max_count: int, max_bytes: int) -> None:
        self.what = what
        self.max_count = max_count
        self.max_bytes = max_bytes
        self.count = 0
        self.bytes = 0
        self.refused = 0

    def exhausted(self) -> bool:
        # Once something was refused, later items are too: what is shown stays a prefix of the run.
        return self.refused > 0 or self.count >= self.max_count or self.bytes >= self.max_bytes

    def admit(self, size: int) -> bool:
        """Count an item of ``size`` bytes if it fits; otherwise refuse it."""
        if self.refused or self.count + 1 > self.max_count or self.bytes + size > self.max_bytes:
            self.refuse(size)
            return False
        self.count += 1
        self.bytes += size
        return True

    def refuse(self, size: int) -> None:
        self.refused += 1
        if self.refused == 1:
            if self.count + 1 > self.max_count:
                reason = f"a run shows at most {self.max_count} {self.what}"
            else:
                reason = f"a run shows at most {self.max_bytes // 2**20} MiB of {self.what} ({size // 1024} KiB more did not fit)"
            # On stderr, so the notice appears in the output where it happened.
            print(f"[playground] Not shown: {reason}; later {self.what} are left out too.", file=sys.stderr, flush=True)
