"""The result cache: a run identical to a recent deterministic successful run is answered at once.

Identical means the same code, backend, device kind and count, JAX runtime
(its name and its JAX and jaxlib versions, server/runs/runtimes.py), platform
version and run options (``RunRequest.options``, e.g. ``inspect``). The key is a SHA-256 of those; the entry holds the recorded
events (zlib-compressed JSON) and the ``done``. docs/sharing.md gives the
rule and its reasons.

Whose a result is: a result answers other people only once a second,
independent run of the program agreed with it (server/runs/result_verification.py
has the rule and its reasons); until then it is kept under a key that also
names its browser session, and answers that session alone. A cookie-less
connection's client may be several people behind one address: its results
answer no one until verified. A run whose ``done`` says ``read_session_cache``
could load compile-cache entries its browser session's earlier runs wrote, and
JAX executes what it loads: such a run may compute whatever an earlier run of
that session planted. Its result answers that session alone, for good (a
self-poisoned session hurts only itself), and never verifies another's.

Flow, all on the server's event loop; the cache is the last of the run's
watchers (server/runs/run.py), and watches runs of the program only (not ``passes`` requests)::

    before_dispatch(run)
      ├─ hit: replay the events through run.send, then Scheduler.finish
      │       with cached=True and cached_at; the worker never sees it
      └─ miss (or "fresh": true): start a recording and let the run be
         queued; at its done, an ok run that sent no ``nondeterministic``
         event is judged against the program's earlier run and stored (its
         session's entry, or the shared one once verified) in one
         transaction (compress, insert, evict least recently used)

Bursts (a workshop pressing Run at once): identical runs waiting in the queue
form a burst (a run joins it at its first ``queued``). They queue as usual;
whichever of them ends first and cacheable answers those of its own browser
session still waiting; the first run to verify it (one that began after it
ended, and agreed) answers every one still waiting in the queue, which leaves
it and gets that run's events at once. No run is singled out in advance as
the leader: the queue may start an identical run before the first one to
arrive (fair queueing across clients).

A hit must be answered from the connected workers' environment, so a run is
looked up only when a worker of its backend is connected.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import logging
import sqlite3
import time
import weakref
import zlib
from dataclasses import dataclass, field
from typing import Any

import psycopg

from jaxplay import browser_protocol as bp
from jaxplay import worker_protocol as wp
from jaxplay.server.clients.identity import is_browser_session
from jaxplay.server.runs import result_verification, runtimes
from jaxplay.server.runs.result_verification import Verdict
from jaxplay.server.runs.run import Asker, Run, RunWatcher
from jaxplay.server.runs.scheduler import Scheduler
from jaxplay.server.storage.interface import Storage, StorageError, Transaction, utc_timestamp

log = logging.getLogger("jaxplay.cache")

KEY_FORMAT = "jaxplay-result-v4"  # v2: the runtime joined the key; v3: shared only once verified;
# v4: text under a measured name is compared (an earlier digest would read as a divergence)
NONDETERMINISTIC = "nondeterministic"
# Events that describe this server's queue, not the program: never recorded.
NOT_RECORDED = frozenset({"queued"})
# A recording stops (and is not cached) beyond this many bytes of event JSON.
MAX_RECORDING_BYTES = 64 << 20
EVICT_BATCH = 64
# How long a run waits for its cache lookup (a database that does not answer) before running uncached.
LOOKUP_S = 2.0
# How long /metrics waits for the cache's size before answering with the last one.
SIZE_READ_S = 2.0


def environment(hello: wp.WorkerHello, runtime: str = "") -> dict[str, Any]:
    """What of the worker a result depends on, for a run on ``runtime`` ("": the worker's default)."""
    chosen = runtimes.runtime_of(hello, runtime) or runtimes.runtimes_of(hello)[0]
    return {"device_kind": hello.device_kind, "device_count": hello.device_count,
            "runtime": chosen.name, "jax_version": chosen.jax_version,
            "jaxlib_version": chosen.jaxlib_version, "platform_version": hello.platform_version}


def cache_key(code: str, backend: str, env: dict[str, Any], options: wp.RunOptions, session: str | None = None) -> str:
    """``session``: the browser session alone that the entry may answer (its own session's cache was read).
    The options as the job's JSON holds them, so a key never changes with this module's types."""
    identity = {"format": KEY_FORMAT, "code": code, "backend": backend, **env, "options": wp.to_wire(options)}
    if session is not None:
        identity["session"] = session
    return hashlib.sha256(json.dumps(identity, sort_keys=True, separators=(",", ":")).encode()).hexdigest()


def answers_only_its_session(done: dict[str, Any]) -> bool:
    return done.get("read_session_cache") is True


@dataclass
class Recording:
    events: list[dict[str, Any]] = field(default_factory=list)
    size: int = 0
    cacheable: bool = True
    in_burst: bool = False
    started_at: float = 0.0  # unix time its ``started`` came: a verifying run begins after the first ended


def burst_key(run: Run) -> str:
    """Identity of a run before a worker is chosen (the environment joins at the leader's end)."""
    return json.dumps([run.code, run.backend, wp.to_wire(run.request.options), run.runtime], sort_keys=True)


class ResultCache(RunWatcher):
    def __init__(self, storage: Storage, scheduler: Scheduler, limit_bytes: int) -> None:
        self.storage = storage
        self.scheduler = scheduler
        self.limit_bytes = limit_bytes
        # One entry may take at most an eighth of the cache, so one huge run cannot flush all others.
        self.max_entry_bytes = max(limit_bytes // 8, 1)
        self._pending: set[asyncio.Task[Any]] = set()
        # Identical runs in flight that may be answered by another's result ("fresh" runs are not).
        self._bursts: dict[str, list[Run]] = {}
        # What each run it records has sent so far (weakly: a run refused before it was queued never ends).
        self._recordings: weakref.WeakKeyDictionary[Run, Recording] = weakref.WeakKeyDictionary()
        # For the metrics: answers given without a worker, and lookups that found nothing.
        self.hits = 0
        self.misses = 0
        self.size_snapshot = {"entries": 0, "bytes": 0}
        self._new_candidates = 0  # programs run a first time: every PRUNE_EVERY, old candidates are pruned
        self.storage_reachable = True  # as of the last size read (metrics)

    @property
    def enabled(self) -> bool:
        return self.limit_bytes > 0

    # --- answering ---------------------------------------------------------

    async def before_dispatch(self, run: Run, asker: Asker) -> bool:
        """True if the run was answered from the cache; else it is recorded. A ``passes`` request is not a
        run of the program: never answered, never recorded."""
        if not self.enabled or not self.storage.is_open or not run.request.runs_the_program:
            return False
        try:
            if not run.request.fresh:
                if await asyncio.wait_for(self._answer(run), LOOKUP_S):
                    self.hits += 1
                    return True
                self.misses += 1
        except (StorageError, TimeoutError, sqlite3.Error, psycopg.Error, zlib.error, ValueError, KeyError) as exc:
            # A cache that cannot answer (a database outage too) must never cost the run: it runs uncached.
            log.warning("result cache lookup failed, running the program instead: %s", exc)
        self._recordings[run] = Recording()
        return False

    async def _answer(self, run: Run) -> bool:
        started = time.perf_counter()
        environments = {json.dumps(environment(hello, run.runtime), sort_keys=True): environment(hello, run.runtime)
                        for hello in self.scheduler.worker_hellos(run.backend) if runtimes.offers(hello, run.runtime)}
        keys = [cache_key(run.code, run.backend, env, run.request.options, session)
                for env in environments.values() for session in (None, run.session_id or None)]
        for key in dict.fromkeys(keys):  # every session's entries first, then this session's own
            row = await self.storage.fetch_one(
                "SELECT elapsed_ms, cached_at, recorded FROM result_cache WHERE key = ?", (key,))
            # A recorded run slower than this run's limit might not finish within it: run it for real.
            if row is None or row["elapsed_ms"] > run.timeout_s * 1000:
                continue
            # Decode everything before sending anything: a bad entry must not leave half a replay.
            recorded = json.loads(zlib.decompress(row["recorded"]))
            self._replay(run, recorded["events"], recorded["done"], row["cached_at"])
            self._spawn(self.storage.transaction(lambda tx, k=key: _touch(tx, k), durable=False))
            log.debug("run %s answered from the cache in %.2f ms", run.key, (time.perf_counter() - started) * 1000)
            return True
        return False

    def _replay(self, run: Run, events: list[dict[str, Any]], done: dict[str, Any], cached_at: str) -> None:
        status, elapsed_ms = bp.RunStatus(done["status"]), float(done["elapsed_ms"])
        for event in events:
            run.send(event)
        self.scheduler.finish(run, status, done.get("message"), elapsed_ms, cached=True, cached_at=cached_at)

    def _answer_burst(self, run: Run, events: list[dict[str, Any]], done: dict[str, Any],
                      only_session: str | None = None) -> None:
        """Runs identical to ``run`` still waiting in the queue get its result now (only those of
        ``only_session`` when given)."""
        cached_at = utc_timestamp()
        # A copy: each answered run's done removes it from the burst.
        for waiting in list(self._bursts.get(burst_key(run), ())):
            if only_session is not None and waiting.session_id != only_session:
                continue
            if done["elapsed_ms"] <= waiting.timeout_s * 1000 and self.scheduler.withdraw(waiting):
                self._replay(waiting, events, done, cached_at)
                self.hits += 1

    def _leave_burst(self, run: Run) -> None:
        key = burst_key(run)
        burst = self._bursts.get(key)
        if burst is not None and run in burst:
            burst.remove(run)
            if not burst:
                del self._bursts[key]

    # --- recording ---------------------------------------------------------

    def on_event(self, run: Run, event: dict[str, Any]) -> None:
        recording = self._recordings.get(run)
        if recording is None:
            return
        kind = event.get("type")
        if kind == "queued" and not recording.in_burst and not run.request.fresh:
            recording.in_burst = True  # waiting in the queue: another identical run's result may answer it
            self._bursts.setdefault(burst_key(run), []).append(run)
        if not recording.cacheable or kind in NOT_RECORDED:
            return
        if kind == NONDETERMINISTIC:
            recording.cacheable = False
            recording.events.clear()
            return
        if kind == "started":
            recording.started_at = time.time()
        recorded = {k: v for k, v in event.items() if k != "id"}
        recording.size += len(json.dumps(recorded, separators=(",", ":")))
        if recording.size > MAX_RECORDING_BYTES:
            recording.cacheable = False
            recording.events.clear()
            return
        recording.events.append(recorded)

    def on_done(self, run: Run, event: dict[str, Any]) -> None:
        recording = self._recordings.pop(run, None)
        if recording is None:
            return
        self._leave_burst(run)
        if not recording.cacheable:
            return
        if (event.get("status") != bp.RunStatus.OK or event.get("cached") or run.worker is None
                or not run.worker.trusted or not self.storage.is_open):  # a remote worker's word serves only its run
            return
        env = environment(run.worker.hello, run.runtime)
        # Its own browser session's entry; a cookie-less client may be several people: none.
        own_session = run.session_id if is_browser_session(run.session_id) else None
        done = {"status": event["status"], "elapsed_ms": event["elapsed_ms"]}
        if event.get("message"):
            done["message"] = event["message"]
        events, recording.events = recording.events, []
        worker = run.worker.hello.name
        shared_key = cache_key(run.code, run.backend, env, run.request.options)
        if answers_only_its_session(event):
            if not run.session_id:
                return  # no session to keep it for
            done["read_session_cache"] = True
            key = cache_key(run.code, run.backend, env, run.request.options, run.session_id)
            self._answer_burst(run, events, done, only_session=run.session_id)
            self._spawn(self.storage.transaction(
                lambda tx: self._store(tx, key, events, done, utc_timestamp(), worker, program=shared_key),
                durable=False))
            return
        if own_session is not None:  # its own session's waiting runs need no second run
            self._answer_burst(run, events, done, only_session=own_session)
        session_key = cache_key(run.code, run.backend, env, run.request.options, own_session) if own_session else ""
        digest = result_verification.content_digest(events, str(event["status"]))
        started_at, ended_at = recording.started_at, time.time()  # 0: no ``started`` seen, never verifies

        async def settle(tx: Transaction) -> Verdict:
            verdict = await result_verification.judge(tx, shared_key, digest, started_at, ended_at)
            if verdict is Verdict.VERIFIED:
                await self._store(tx, shared_key, events, done, utc_timestamp(), worker, digest, shared_key)
            elif verdict is not Verdict.DIVERGED and session_key:
                await self._store(tx, session_key, events, done, utc_timestamp(), worker, digest, shared_key)
            if verdict is Verdict.FIRST:
                self._new_candidates += 1
                if self._new_candidates % result_verification.PRUNE_EVERY == 0:
                    await result_verification.prune(tx)
            return verdict

        async def settled() -> None:
            verdict = await self.storage.transaction(settle, durable=False)
            log.debug("run %s of a program: %s", run.key, verdict.value)
            if verdict is Verdict.VERIFIED:
                self._answer_burst(run, events, done)

        self._spawn(settled())

    async def _store(self, tx: Transaction, key: str, events: list[dict[str, Any]], done: dict[str, Any],
                     cached_at: str, worker: str, digest: str = "", program: str = "") -> bool:
        """In one write transaction: compress, insert, then evict least recently used entries over the limit.
        ``program``: the shared key of its program (a divergence withdraws every entry of a program)."""
        blob = zlib.compress(json.dumps({"events": events, "done": done}, separators=(",", ":")).encode(), 6)
        if len(blob) > self.max_entry_bytes:
            log.debug("run result of %d bytes not cached (an entry may take %d)", len(blob), self.max_entry_bytes)
            return False
        await tx.execute(
            "INSERT INTO result_cache (key, size, elapsed_ms, cached_at, last_used, recorded, worker, digest, program) "
            "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?) "
            "ON CONFLICT (key) DO UPDATE SET size = excluded.size, elapsed_ms = excluded.elapsed_ms, "
            "cached_at = excluded.cached_at, last_used = excluded.last_used, recorded = excluded.recorded, "
            "worker = excluded.worker, digest = excluded.digest, program = excluded.program",
            (key, len(blob), done["elapsed_ms"], cached_at, time.time(), blob, worker, digest, program))
        await evict(tx, self.limit_bytes)
        return True

    def _spawn(self, work: Any) -> None:
        task = asyncio.ensure_future(work)
        self._pending.add(task)
        task.add_done_callback(self._settled)

    def _settled(self, task: asyncio.Task[Any]) -> None:
        self._pending.discard(task)
        if not task.cancelled() and task.exception() is not None:
            log.error("result cache write failed: %s", task.exception())

    async def drain(self) -> None:
        """Wait for cache writes in flight (shutdown, tests)."""
        while self._pending:
            await asyncio.gather(*list(self._pending), return_exceptions=True)

    # --- inspection ----------------------------------------------------------

    async def refresh_size(self) -> None:
        """Update ``size_snapshot`` (read by the metrics) from the database; while it cannot be read, keep
        the last one and say so in ``storage_reachable``, so /metrics answers through a database outage."""
        if not self.storage.is_open:
            return
        try:
            stats = await asyncio.wait_for(self.stats(), SIZE_READ_S)
        except (StorageError, TimeoutError, sqlite3.Error, psycopg.Error) as exc:
            self.storage_reachable = False
            log.warning("result cache size not read (the metrics keep the last one): %s", exc or type(exc).__name__)
            return
        self.storage_reachable = True
        self.size_snapshot = {"entries": stats["entries"], "bytes": stats["bytes"]}

    async def stats(self) -> dict[str, int]:
        row = await self.storage.fetch_one(
            "SELECT COUNT(*) AS entries, COALESCE(SUM(size), 0) AS bytes FROM result_cache")
        assert row is not None
        return {"entries": int(row["entries"]), "bytes": int(row["bytes"]), "limit_bytes": self.limit_bytes}


async def entries_by_worker(storage: Storage) -> dict[str, int]:
    """How many cached results each worker recorded ('' for entries from before that was kept)."""
    rows = await storage.fetch_all("SELECT worker, COUNT(*) AS n FROM result_cache GROUP BY worker ORDER BY worker")
    return {row["worker"]: int(row["n"]) for row in rows}


async def purge(storage: Storage, worker: str | None) -> int:
    """Delete the cached results ``worker`` recorded (every one when None); returns how many.

    For a worker whose word is no longer trusted: its cached answers stop being served at once.
    """
    async def work(tx: Transaction) -> int:
        where, params = ("", ()) if worker is None else (" WHERE worker = ?", (worker,))
        row = await tx.fetch_one("SELECT COUNT(*) AS n FROM result_cache" + where, params)
        await tx.execute("DELETE FROM result_cache" + where, params)
        return int(row["n"]) if row else 0

    return await storage.transaction(work, durable=True)


async def _touch(tx: Transaction, key: str) -> None:
    await tx.execute("UPDATE result_cache SET last_used = ? WHERE key = ?", (time.time(), key))


async def evict(tx: Transaction, limit_bytes: int) -> int:
    """Delete least recently used entries until the total size is within ``limit_bytes``; returns how many."""
    row = await tx.fetch_one("SELECT COALESCE(SUM(size), 0) AS total FROM result_cache")
    total = int(row["total"]) if row else 0
    removed = 0
    while total > limit_bytes:
        oldest = await tx.fetch_all("SELECT key, size FROM result_cache ORDER BY last_used LIMIT ?", (EVICT_BATCH,))
        if not oldest:
            break
        for entry in oldest:
            if total <= limit_bytes:
                break
            await tx.execute("DELETE FROM result_cache WHERE key = ?", (entry["key"],))
            total -= entry["size"]
            removed += 1
    return removed
