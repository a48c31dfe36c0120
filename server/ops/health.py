"""``/healthz`` (the process is alive and serving) and ``/readyz`` (this replica can serve a run now).

Readiness is made of small, separate checks. Each says what it found and what
it is needed for: ``runs`` (a browser here can run a program now) or ``links``
(shared links and rooms can be read and saved). Ready means every check that
runs need passes; a failing check that runs do not need is listed under
``degraded``, with its cause, and leaves the replica in the load balancer.

- ``accepting``: not shutting down (phase 1 of server/ops/shutdown.py turns
  this off first); needed for both.
- ``storage``: a real write transaction commits within ``STORAGE_PROBE_S``
  (after a database restart the first probe already reconnects); needed for
  links only: runs go on without the result cache.
- ``broker`` (with ``--broker``): Redis answers a PING; needed for runs, which
  all go through it.
- ``workers``: a worker that takes new runs is connected, to this replica or,
  with ``--broker``, to any replica, for every backend this replica must
  offer: ``--expected-backends`` and what its local workers offer (a draining
  worker does not count); with neither, any backend. Needed for runs.
- ``local_workers``: how many this server started and how many joined, and
  why any could not start; reported, needed only through ``workers`` (with
  ``--broker`` another replica's workers may serve this replica's runs).

The liveness probe uses /healthz, which never touches storage or workers, so a
slow database or a missing GPU worker never gets a healthy server restarted.
"""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass
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
RUNS, LINKS = "runs", "links"


@dataclass(frozen=True)
class Check:
    name: str
    found: Any  # what /readyz shows under checks[name]
    ok: bool
    needed_for: tuple[str, ...]  # RUNS, LINKS: what cannot be served while it fails


def accepting_check(state: Replica) -> Check:
    return Check("accepting", not state.draining, not state.draining, (RUNS, LINKS))


async def storage_check(state: Replica) -> Check:
    try:
        await asyncio.wait_for(state.storage.probe_writable(), STORAGE_PROBE_S)
        return Check("storage", "writable", True, (LINKS,))
    except Exception as exc:  # any failure means links cannot be served; the reason is shown, not raised
        log.warning("readiness: storage is not writable: %s", exc)
        return Check("storage", f"not writable: {exc or type(exc).__name__}", False, (LINKS,))


async def broker_check(state: Replica) -> Check | None:
    found = await state.scheduler.broker_check()  # with --broker: Redis answers, or runs cannot be queued
    return None if found is None else Check("broker", found, found == "reachable", (RUNS,))


def required_backends(state: Replica) -> set[str]:
    """The backends this replica must have a worker for: expected ones, and what its local workers offer."""
    return state.scheduler.expected_backends | state.scheduler.local_backends


def workers_check(state: Replica, backends: list[dict[str, Any]]) -> tuple[Check, list[str]]:
    """Workers taking new runs per backend (every replica's with --broker), and the required backends without."""
    counts = {b["name"]: b["workers"] for b in backends}
    required = required_backends(state)
    missing = sorted(b for b in required if not counts.get(b))
    ok = not missing and (bool(required) or any(counts.values()))
    return Check("workers", counts, ok, (RUNS,)), missing


def local_workers_check(state: Replica) -> Check | None:
    """How many local workers were started and joined, and why any could not start."""
    workers = state.local_workers
    if workers is None or not workers.settings.local_workers:
        return None
    joined = sum(1 for link in state.scheduler.workers if link.local and not link.draining)
    found = {"started": workers.settings.local_workers, "joined": joined, "refused": dict(workers.refusals)}
    return Check("local_workers", found, joined >= workers.settings.local_workers, ())


async def readiness(state: Replica) -> dict[str, Any]:
    backends = state.scheduler.backends()
    workers, missing = workers_check(state, backends)
    found = [accepting_check(state), await storage_check(state), await broker_check(state), workers,
             local_workers_check(state)]
    checks = [check for check in found if check is not None]
    serving = {what: all(c.ok for c in checks if what in c.needed_for) for what in (RUNS, LINKS)}
    result: dict[str, Any] = {"ready": serving[RUNS], "checks": {c.name: c.found for c in checks},
                              "serving": serving}
    degraded = [c.name for c in checks if not c.ok and RUNS not in c.needed_for]
    if degraded:
        result["degraded"] = degraded
    if missing:
        result["missing_backends"] = missing
    problems = worker_problems(state)
    if problems:
        result["problems"] = problems
    failed = runtimes.failed(backends)
    if failed:  # the other runtimes serve: said here, without making the replica unready
        result["failed_runtimes"] = failed
    return result


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
