"""``/healthz`` (the process is alive and serving) and ``/readyz`` (it can take runs now).

Ready means all of:
- not shutting down (phase 1 of ``server/ops/shutdown.py`` turns this off first);
- storage writable: a real write transaction commits within ``STORAGE_PROBE_S``
  (after a database restart the first probe already reconnects: no stale 503);
- with ``--broker``: Redis answers a PING (runs cannot be queued without it);
- at least one worker connected for each expected backend (``cpu`` when local
  workers run, plus ``--expected-backends``), to this replica or, with
  ``--broker``, to any replica.

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
    checks["workers"] = {b["name"]: b["workers"] for b in scheduler.backends()}
    connected = {name for name, count in checks["workers"].items() if count}
    missing = sorted(scheduler.expected_backends - connected)
    ready = checks["accepting"] and checks["storage"] == "writable" and broker in (None, "reachable") and not missing
    result: dict[str, Any] = {"ready": ready, "checks": checks}
    if missing:
        result["missing_backends"] = missing
    return result


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
