"""``jaxplay purge-results``: take back what a worker put in the result cache.

The result cache answers later users with a run's recorded events, so it keeps
only runs from workers the server trusts (its local workers, or remote ones
with ``--trust-remote-results``). When that trust ends (a remote worker's host
is compromised, a token leaked), its entries must stop being served: this
command deletes them, by the worker name each entry was recorded with. It
works beside a running server (SQLite's writer lock, or PostgreSQL).
"""

from __future__ import annotations

import asyncio
import sys

from jaxplay.settings import Settings


def purge_results(workers: list[str], everything: bool, settings: Settings) -> None:
    """Delete ``workers``' entries (every entry with ``everything``); with neither, list them."""
    from jaxplay.server.runs import result_cache
    from jaxplay.server.storage.factory import open_storage
    from jaxplay.server.storage.interface import StorageError

    async def main() -> int:
        storage = open_storage(settings.database_url, settings.data_dir)
        await storage.open()
        try:
            counts = await result_cache.entries_by_worker(storage)
            if not workers and not everything:
                print(_listing(counts))
                return 0
            targets: list[str | None] = [None] if everything else list(workers)
            for target in targets:
                removed = await result_cache.purge(storage, target)
                whose = "every worker" if target is None else f"worker {target!r}"
                print(f"Removed {removed} cached result(s) recorded by {whose}.")
                if target is not None and target not in counts:
                    known = ", ".join(repr(name) for name in counts if name) or "none"
                    print(f"  No entry names that worker; workers with entries: {known}.", file=sys.stderr)
            return 0
        finally:
            await storage.close()

    try:
        sys.exit(asyncio.run(main()))
    except (StorageError, ValueError, OSError) as exc:
        print(f"jaxplay purge-results: {exc}", file=sys.stderr)
        sys.exit(2)


def _listing(counts: dict[str, int]) -> str:
    if not counts:
        return "The result cache is empty."
    lines = ["Cached results by the worker that recorded them:"]
    for name, count in counts.items():
        lines.append(f"  {name or '(recorded before workers were kept)'}: {count}")
    lines.append("Delete a worker's with: jaxplay purge-results --worker NAME (or --all).")
    return "\n".join(lines)
