"""Whether a recorded run may answer other people: only once a second, independent run agreed with it.

The rule (docs/sharing.md, "Who a cached result answers"): a run's result
answers another browser session only after a second run of the same program
in the same environment, in a fresh sandbox that began after the first had
ended, produced the same content (``content_digest``). Until then the first
result answers only its own browser session. Nothing in the run can vouch for
itself: the sandbox's hooks see Python's names (``time.time``, ``os.urandom``),
but a program reaches the clock and the OS's randomness through ``ctypes``,
the vDSO, ``rdtsc`` and ``/proc`` as well. A second run is what the result
would be again, however it was made. Each run's monotonic and boot-time clocks
are offset by a random amount of its own (sandbox/isolation/namespaces.py), so
values drawn from them never agree; what changes slowly on the host
(``/proc/loadavg``) is seen by the kernel instead
(sandbox/capture/host_state_reads.py).

The runs that verify are the ones people make anyway: in a workshop the
second attendee's run verifies the presenter's, and the rest of the room is
answered from the cache. No run is made only to verify, so the rule costs no
CPU and delays no one; a program only one person ever runs is never shared,
and needs not be.

A program whose two runs differed is marked ``diverged`` and never shared
again while the mark lasts (``CANDIDATE_TTL_S``), even if a third run should
happen to agree with one of them. A shared result whose program later
diverges in a fresh run is withdrawn.

State, in the database beside the cache (table ``result_candidates``): per
shared cache key, the first run's digest and when it ended, or ``diverged``.
Every replica reads and writes it within one transaction per run.
"""

from __future__ import annotations

import enum
import hashlib
import json
import time
from typing import Any

from jaxplay.server.storage.interface import Transaction

# Measured by the sandbox, not made by the program: left out of what two runs must agree on.
MEASURED_SUFFIXES = ("_ms", "_per_s")
MEASURED_KEYS = frozenset({
    "persistent_cache_hit",  # whether the compile cache had the entry: the cache's state, not the program's
    "lowered_module_cached",  # and whether a lowered module was (a first run while the shared fill works, say)
    "fraction_of_roof", "bound", "peak",  # rooflines: from run time and the worker's measured peak
})
# Events about where and when the run ran, not what it made.
NOT_COMPARED = frozenset({"queued", "started", "done"})
STREAMS = ("stdout", "stderr")
# Candidates (and divergence marks) are kept this long since last seen, at most this many.
CANDIDATE_TTL_S = 30 * 24 * 3600
MAX_CANDIDATES = 200_000
PRUNE_BATCH = 256
PRUNE_EVERY = 64


class Verdict(enum.Enum):
    FIRST = "first"  # the first run of its program here: it answers its own session only
    PENDING = "pending"  # agreed with the first run but overlapped it: not independent in time
    VERIFIED = "verified"  # a later run agreed: the result answers everyone
    DIVERGED = "diverged"  # two runs differed: never shared


# A roofline's verdict: derived from measured figures, so it may flip between runs near the ridge.
MEASURED_WORDS = frozenset({"compute", "memory"})
FIGURES = str.maketrans("", "", "0123456789")


def _is_measured(key: str) -> bool:
    return key in MEASURED_KEYS or key.endswith(MEASURED_SUFFIXES)


def _is_figure(key: str, value: Any) -> bool:
    """A value the sandbox measures is a number (or none), or a roofline's verdict; never a text or a
    structure, which the program could write on its event channel under a measured name."""
    return value is None or isinstance(value, bool | int | float) or (key == "bound" and value in MEASURED_WORDS)


def _unmeasured(value: Any, measured: bool = False) -> Any:
    """``value`` less its measured figures (every number under a measured name). Text under a measured
    name (the peak's ``how`` and ``measured_at``) is compared without its digits: a measurement's words stay the same, its figures not,
    and a program's own text there must agree like any other."""
    if isinstance(value, dict):
        return {k: _unmeasured(v, measured or _is_measured(k)) for k, v in value.items()
                if not ((measured or _is_measured(k)) and _is_figure(k, v))}
    if isinstance(value, list):
        return [_unmeasured(v, measured) for v in value if not (measured and _is_figure("", v))]
    if measured and isinstance(value, str):
        return value.translate(FIGURES)
    return value


def content_digest(events: list[dict[str, Any]], status: str) -> str:
    """What two runs of a program must agree on: all it printed (each stream whole, however it was
    cut into events), and every other event in its order among those of its type, less the figures
    the sandbox measured (times, rates, cache hits). Events of different types may interleave
    differently from run to run: each type is compared on its own."""
    streams: dict[str, list[str]] = {name: [] for name in STREAMS}
    others: dict[str, list[Any]] = {}
    for event in events:
        kind = str(event.get("type"))
        if kind in NOT_COMPARED:
            continue
        if kind in streams:
            streams[kind].append(str(event.get("text", "")))
            continue
        others.setdefault(kind, []).append(_unmeasured({k: v for k, v in event.items() if k not in ("type", "id")}))
    content = {"status": status, **{name: "".join(parts) for name, parts in streams.items()}, "events": others}
    return hashlib.sha256(json.dumps(content, sort_keys=True, separators=(",", ":")).encode()).hexdigest()


async def judge(tx: Transaction, shared_key: str, digest: str, started_at: float, ended_at: float) -> Verdict:
    """Record a run of ``shared_key``'s program that began at ``started_at`` and ended at ``ended_at``
    (unix times) with content ``digest``, and say what it makes of the program."""
    now = time.time()
    # Lock the program's rows before reading them: another replica's transaction that marks it diverged
    # holds them until it commits, and the reads below then see its mark (PostgreSQL reads committed rows
    # as of each statement), instead of sharing the program again beside it. SQLite has one writer anyway.
    await tx.execute("UPDATE result_cache SET last_used = last_used WHERE key = ?", (shared_key,))
    await tx.execute("UPDATE result_candidates SET last_seen = last_seen WHERE key = ?", (shared_key,))
    shared = await tx.fetch_one("SELECT digest FROM result_cache WHERE key = ?", (shared_key,))
    if shared is not None:  # shared already: a fresh run must still agree
        if shared["digest"] == digest:
            return Verdict.VERIFIED
        await diverge(tx, shared_key)
        return Verdict.DIVERGED
    row = await tx.fetch_one("SELECT digest, ended_at, diverged FROM result_candidates WHERE key = ?", (shared_key,))
    if row is None:
        await tx.execute("INSERT INTO result_candidates (key, digest, ended_at, diverged, last_seen) "
                         "VALUES (?, ?, ?, 0, ?)", (shared_key, digest, ended_at, now))
        return Verdict.FIRST
    if row["diverged"]:
        await tx.execute("UPDATE result_candidates SET last_seen = ? WHERE key = ?", (now, shared_key))
        return Verdict.DIVERGED
    if row["digest"] != digest:
        await diverge(tx, shared_key)
        return Verdict.DIVERGED
    if started_at <= row["ended_at"]:
        await tx.execute("UPDATE result_candidates SET last_seen = ? WHERE key = ?", (now, shared_key))
        return Verdict.PENDING
    await tx.execute("DELETE FROM result_candidates WHERE key = ?", (shared_key,))
    return Verdict.VERIFIED


async def diverge(tx: Transaction, shared_key: str) -> None:
    """Mark the program of ``shared_key`` as one whose runs differ, and withdraw every entry of it:
    the shared one and those answering single sessions (a run again shows something else)."""
    await tx.execute("DELETE FROM result_cache WHERE key = ? OR program = ?", (shared_key, shared_key))
    await tx.execute("DELETE FROM result_candidates WHERE key = ?", (shared_key,))
    await tx.execute("INSERT INTO result_candidates (key, digest, ended_at, diverged, last_seen) "
                     "VALUES (?, '', 0, 1, ?)", (shared_key, time.time()))


async def prune(tx: Transaction) -> None:
    """Forget candidates unseen for CANDIDATE_TTL_S, and the least recently seen beyond MAX_CANDIDATES
    (a count over the table: called every PRUNE_EVERY new candidates, not for each)."""
    now = time.time()
    await tx.execute("DELETE FROM result_candidates WHERE last_seen < ?", (now - CANDIDATE_TTL_S,))
    row = await tx.fetch_one("SELECT COUNT(*) AS n FROM result_candidates")
    excess = (int(row["n"]) if row else 0) - MAX_CANDIDATES
    while excess > 0:
        oldest = await tx.fetch_all("SELECT key FROM result_candidates ORDER BY last_seen LIMIT ?",
                                    (min(excess, PRUNE_BATCH),))
        if not oldest:
            return
        for entry in oldest:
            await tx.execute("DELETE FROM result_candidates WHERE key = ?", (entry["key"],))
        excess -= len(oldest)
