"""``GET /metrics``: what operators watch, in Prometheus text format (prometheus_client).

Where each figure comes from::

    runs by status, rejected runs    every outcome an asker is told, once per run, by kind
    by reason                        (``BrowserHooks.run_told``): a run's ``done``, a refusal
                                     (both counted by server/runs/run_path.py), and a crash
                                     told to a browser that came back through another replica
    queue wait, run duration         a run watcher (server/runs/run.py) of every request that
                                     executes code, by kind, those the result cache answers
                                     included
    browser connections              ``BrowserHooks.open``, read at scrape time
    queue depth, oldest waiting      the scheduler, read at scrape time; busy slots
    run, workers, slots              from each worker's own ``slots`` report; with
                                     --broker the depth is the shared Redis queue
    dependency up                    the result cache's last size read (storage),
                                     the broker's last heartbeat (Redis)
    Redis memory                     ``INFO memory``, read at scrape time (--broker)
    sandbox OOM kills and crashes    the workers' ``slots`` reports (cumulative per
                                     worker process; the growth is counted here)
    result cache, snippets           their own counters and the cache's size, read at
                                     scrape time

Every labelled series exists from the first scrape at zero (every backend the
server knows of, every kind of request, every status and rejection reason), so ``rate()`` and alerts
see the first event rather than a series that appears with it. Every metric
lives in this app's own registry, so several apps in one process (tests) never
share counts. Access: ``server/ops/metrics_access.py``.
"""

from __future__ import annotations

import logging
import time
import weakref
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

from prometheus_client import CollectorRegistry, Counter, Histogram, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from jaxplay import browser_protocol as bp
from jaxplay import worker_protocol as wp
from jaxplay.server.clients.connection import BrowserHooks
from jaxplay.server.runs.run import Asker, Run, RunWatcher, WorkerLink
from jaxplay.server.runs.scheduler import Scheduler

if TYPE_CHECKING:
    from jaxplay.server.runs.result_cache import ResultCache
    from jaxplay.server.sharing.snippets import SnippetStore

log = logging.getLogger("jaxplay.metrics")

CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"
QUEUE_WAIT_BUCKETS_S = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300)
RUN_DURATION_BUCKETS_S = (0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120)
# How an accepted run ends (jaxplay_runs_total's status); a rejected one counts in jaxplay_runs_rejected_total.
ENDED_STATUSES = tuple(str(s) for s in bp.RunStatus if s is not bp.RunStatus.REJECTED)


class PlaygroundMetrics(RunWatcher):
    def __init__(self, scheduler: Scheduler, hooks: BrowserHooks) -> None:
        self.scheduler = scheduler
        self.hooks = hooks
        # Set by server/app.py once sharing exists: their counters are read at scrape time.
        self.cache: ResultCache | None = None
        self.snippets: SnippetStore | None = None
        self.registry = CollectorRegistry()
        r = self.registry
        self.runs = Counter("jaxplay_runs", "Runs that ended, as their asker was told, by backend, kind (run, "
                            "profile, compare, passes) and final status (cached runs included; rejected ones: "
                            "jaxplay_runs_rejected_total).", ["backend", "kind", "status"], registry=r)
        self.queue_wait = Histogram("jaxplay_queue_wait_seconds", "Time a run waited in its queue for a worker slot.",
                                    ["backend", "kind"], buckets=QUEUE_WAIT_BUCKETS_S, registry=r)
        self.run_duration = Histogram("jaxplay_run_duration_seconds",
                                      "Time from a run's start on a worker to its end, as the worker measured it.",
                                      ["backend", "kind"], buckets=RUN_DURATION_BUCKETS_S, registry=r)
        self.rejected = Counter("jaxplay_runs_rejected", "Runs told they were rejected (never run), by reason and "
                                "kind.", ["reason", "kind"], registry=r)
        self.oom_kills = Counter("jaxplay_sandbox_oom_kills", "Runs the kernel's OOM killer ended in a sandbox.",
                                 ["backend"], registry=r)
        self.crashes = Counter("jaxplay_sandbox_crashes", "Runs whose sandbox or Python process ended abruptly.",
                               ["backend"], registry=r)
        self._reported: dict[tuple[str, str], tuple[int, int]] = {}
        self.broker_memory: tuple[int, int] | None = None  # Redis's (used, max) bytes, as of the last refresh
        for reason in bp.REJECTION_REASONS:
            for kind in wp.RUN_KINDS:
                self.rejected.labels(reason, kind)
        # Runs from their dispatch to their done, and when a worker took each (weakly: a run refused before
        # it was queued never sends its done).
        self._watched: weakref.WeakSet[Run] = weakref.WeakSet()
        self._started: weakref.WeakKeyDictionary[Run, float] = weakref.WeakKeyDictionary()
        r.register(_StateCollector(self))
        hooks.run_told.append(self.run_told)
        scheduler.slots_listeners.append(self.worker_reported)

    # --- events ------------------------------------------------------------

    async def before_dispatch(self, run: Run, asker: Asker) -> bool:
        """Times every request that executes code, its queue wait and duration, by kind; answers none."""
        self._watched.add(run)
        return False

    def on_event(self, run: Run, event: dict[str, Any]) -> None:
        # A cache replay repeats 'started' while the run is still queued.
        if event.get("type") == "started" and run.state == "running" and run in self._watched:
            self._started.setdefault(run, time.monotonic())
            self.queue_wait.labels(run.backend, run.request.kind).observe(self._started[run] - run.submitted_at)

    def on_done(self, run: Run, done: dict[str, Any]) -> None:
        # Its status is counted where its browser is told (``run_told``).
        if run not in self._watched:
            return
        self._watched.discard(run)
        if self._started.pop(run, None) is not None and not done.get("cached"):
            self.run_duration.labels(run.backend, run.request.kind).observe(
                float(done.get("elapsed_ms", 0.0)) / 1000)

    def run_told(self, backend: str | None, status: str, reason: str | None, kind: str) -> None:
        """One outcome an asker was told (``BrowserHooks.run_told``): a rejection by its reason and kind, any
        other end by its backend, kind and status."""
        kind = kind if kind in wp.RUN_KINDS else "run"
        if status == bp.RunStatus.REJECTED:
            self.rejected.labels(reason if reason in bp.REJECTION_REASONS else "other", kind).inc()
        elif backend is not None:
            self.runs.labels(backend, kind, status).inc()

    def worker_reported(self, link: WorkerLink, report: wp.WorkerSlots) -> None:
        # Counts are cumulative per worker process; a reconnect repeats them, a restarted worker starts at 0.
        key = (link.hello.name, link.hello.backend)
        last_oom, last_crashes = self._reported.get(key, (0, 0))
        grew_oom = report.oom_kills - last_oom if report.oom_kills >= last_oom else report.oom_kills
        grew_crashes = report.crashes - last_crashes if report.crashes >= last_crashes else report.crashes
        self._reported[key] = (report.oom_kills, report.crashes)
        if grew_oom:
            self.oom_kills.labels(link.hello.backend).inc(grew_oom)
        if grew_crashes:
            self.crashes.labels(link.hello.backend).inc(grew_crashes)

    # --- scrape ------------------------------------------------------------

    async def refresh(self) -> None:
        """Read what lives outside this process (with --broker: the shared queue, Redis's memory) before a scrape."""
        await self.scheduler.refresh_waiting()
        self.broker_memory = await self.scheduler.broker_memory()

    def scrape(self) -> bytes:
        for backend in known_backends(self.scheduler):  # a backend's series exist before its first run
            for kind in wp.RUN_KINDS:
                for status in ENDED_STATUSES:
                    self.runs.labels(backend, kind, status)
                self.queue_wait.labels(backend, kind)
                self.run_duration.labels(backend, kind)
            for labelled in (self.oom_kills, self.crashes):
                labelled.labels(backend)
        return generate_latest(self.registry)


def known_backends(scheduler: Scheduler) -> list[str]:
    """Every backend this server knows of: its workers', queued runs', expected, and (with --broker) the
    other replicas' workers'."""
    backends = {w.hello.backend for w in scheduler.workers} | set(scheduler.queues) | scheduler.expected_backends
    backends |= {entry["name"] for entry in scheduler.backends()}
    return sorted(backends)


class _StateCollector(Collector):
    """Gauges read from the live state at each scrape, so they can never drift from it."""

    def __init__(self, metrics: PlaygroundMetrics) -> None:
        self.metrics = metrics

    def collect(self) -> Iterator[Metric]:
        scheduler = self.metrics.scheduler
        depth = GaugeMetricFamily("jaxplay_queue_depth", "Runs waiting for a worker slot.", labels=["backend"])
        workers = GaugeMetricFamily("jaxplay_workers_connected", "Workers connected.", labels=["backend"])
        total = GaugeMetricFamily("jaxplay_slots_total", "Sandbox slots of the connected workers.", labels=["backend"])
        busy = GaugeMetricFamily("jaxplay_slots_busy", "Slots running a program now.", labels=["backend"])
        oldest = GaugeMetricFamily("jaxplay_queue_oldest_age_seconds", "Seconds the longest-waiting run this "
                                   "replica's browsers submitted has waited for a slot; 0 when none waits.",
                                   labels=["backend"])
        now = time.monotonic()
        for backend in known_backends(scheduler):
            links = [w for w in scheduler.workers if w.hello.backend == backend]
            # With --broker this is the shared queue, the same on every replica: aggregate replicas with max().
            depth.add_metric([backend], scheduler.waiting(backend))
            workers.add_metric([backend], len(links))
            total.add_metric([backend], sum(_slots(w)[1] for w in links))
            busy.add_metric([backend], sum(_slots(w)[0] for w in links))
            since = scheduler.waiting_since(backend)
            oldest.add_metric([backend], 0.0 if since is None else max(0.0, now - since))
        yield from (depth, workers, total, busy, oldest)
        yield GaugeMetricFamily("jaxplay_browser_connections", "Browser websockets open.",
                                value=len(self.metrics.hooks.open))
        cache, snippets = self.metrics.cache, self.metrics.snippets
        up = GaugeMetricFamily("jaxplay_dependency_up", "1 while this replica reaches the service, else 0: "
                               "'storage' (its database, as of this scrape), 'broker' (Redis, with --broker).",
                               labels=["dependency"])
        if cache is not None:
            up.add_metric(["storage"], int(cache.storage_reachable))
        if scheduler.broker_reachable is not None:
            up.add_metric(["broker"], int(scheduler.broker_reachable))
        yield up
        # With --broker, Redis's INFO memory as of this scrape; no sample while Redis does not answer.
        used = GaugeMetricFamily("jaxplay_broker_memory_used_bytes", "Memory Redis uses (INFO used_memory), "
                                 "read at this scrape; with --broker only.")
        limit = GaugeMetricFamily("jaxplay_broker_memory_max_bytes", "Redis's maxmemory (0: no limit), read at "
                                  "this scrape; with --broker only.")
        if self.metrics.broker_memory is not None:
            used.add_metric([], self.metrics.broker_memory[0])
            limit.add_metric([], self.metrics.broker_memory[1])
        yield from (used, limit)
        if cache is None or snippets is None:
            return
        yield CounterMetricFamily("jaxplay_result_cache_hits", "Runs answered from the result cache.",
                                  value=cache.hits)
        yield CounterMetricFamily("jaxplay_result_cache_misses", "Cache lookups that found nothing to answer with.",
                                  value=cache.misses)
        yield CounterMetricFamily("jaxplay_snippets_created", "Snippets shared (new content only).",
                                  value=snippets.created)
        size = cache.size_snapshot
        yield GaugeMetricFamily("jaxplay_result_cache_bytes", "Compressed size of the result cache's entries.",
                                value=size["bytes"])
        yield GaugeMetricFamily("jaxplay_result_cache_entries", "Entries in the result cache.",
                                value=size["entries"])


def _slots(link: WorkerLink) -> tuple[int, int]:
    """(busy, total): the worker's own report once it sent one, else the server's accounting."""
    if link.slots_report is not None:
        return link.slots_report.busy, link.slots_report.total
    return link.hello.slots - link.free_slots, link.hello.slots
