"""``/healthz`` (the process is alive and serving) and ``/readyz`` (it can take runs now).

Ready means all of:
- not shutting down (phase 1 of ``server/ops/shutdown.py`` turns this off first);
- storage writable: a real write transaction commits within ``STORAGE_PROBE_S``
  (after a database restart the first probe already reconnects: no stale 503);
- with ``--broker``: Redis answers a PING (runs cannot be queued without it);
- every local worker this server started has joined, whatever backend its
  host offers (``cpu``, or ``gpu`` on a GPU host); one that cannot start is
  named with its cause, and the server stays up, unready, instead of looping;
- at least one worker connected for each of ``--expected-backends``, to this
  replica or, with ``--broker``, to any replica.

A load balancer or Kubernetes sends browsers only to ready replicas; the
liveness probe uses /healthz, which never touches storage or workers, so a slow
database or a missing GPU worker never gets a healthy server restarted.
"""

from __future__ import annotations

import asyncio
import logging
from typing import TYPE_CHECKING, Any

from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from jaxplay import __version__
from jaxplay.server.runs import runtimes

if TYPE_CHECKING:
    from jaxplay.server.ops.replica import Replica

log = logging.getLogger("jaxplay.server")

STORAGE_PROBE_S = 2.0
HEALTH_PATHS = ("/healthz", "/readyz")


async def readiness(state: Replica) -> dict[str, Any]:
    scheduler = state.scheduler
    checks: dict[str, Any] = {"accepting": not state.draining}
    try:
        await asyncio.wait_for(state.storage.probe_writable(), STORAGE_PROBE_S)
        checks["storage"] = "writable"
    except Exception as exc:  # any failure means not ready; the reason is shown, not raised
        log.warning("readiness: storage is not writable: %s", exc)
        checks["storage"] = f"not writable: {exc or type(exc).__name__}"
    broker = await scheduler.broker_check()  # with --broker: Redis answers, or runs cannot be queued
    if broker is not None:
        checks["broker"] = broker
    # With --broker, backends() counts the workers of every replica: any of them can take this one's runs.
    backends = scheduler.backends()
    checks["workers"] = {b["name"]: b["workers"] for b in backends}
    connected = {name for name, count in checks["workers"].items() if count}
    missing = sorted(scheduler.expected_backends - connected)
    local = local_worker_check(state)
    if local is not None:
        checks["local_workers"] = local
    local_ready = local is None or local["joined"] >= local["started"]
    ready = (checks["accepting"] and checks["storage"] == "writable" and broker in (None, "reachable") and not missing
             and local_ready)
    result: dict[str, Any] = {"ready": ready, "checks": checks}
    if missing:
        result["missing_backends"] = missing
    problems = worker_problems(state)
    if problems:
        result["problems"] = problems
    failed = runtimes.failed(backends)
    if failed:  # the other runtimes serve: said here, without making the replica unready
        result["failed_runtimes"] = failed
    return result


def local_worker_check(state: Replica) -> dict[str, Any] | None:
    """How many local workers were started and joined, and why any could not start."""
    workers = state.local_workers
    if workers is None or not workers.settings.local_workers:
        return None
    joined = sum(1 for link in state.scheduler.workers if link.local)
    return {"started": workers.settings.local_workers, "joined": joined, "refused": dict(workers.refusals)}


def worker_problems(state: Replica) -> list[str]:
    """What an operator (and the page) must know: local workers that refused to start, with their cause."""
    workers = state.local_workers
    if workers is None:
        return []
    return [f"The local worker {name} cannot start: {cause}" for name, cause in sorted(workers.refusals.items())]


def health_routes(state: Replica) -> list[Route]:
    async def healthz(request: Request) -> Response:
        scheduler = state.scheduler
        return JSONResponse({"ok": True, "version": __version__, "workers": len(scheduler.workers),
                             "backends": [b["name"] for b in scheduler.backends()],
                             "draining": state.draining})

    async def readyz(request: Request) -> Response:
        result = await readiness(state)
        return JSONResponse(result, status_code=200 if result["ready"] else 503)

    return [Route("/healthz", healthz), Route("/readyz", readyz)]
