"""The workers connected to this server, and the backends and runtimes they offer.

``Scheduler`` (server/runs/scheduler.py) is one: it adds the queues, the runs
and the clients' limits. What is read here: which workers take new runs, the
backends listed to browsers (each with its devices, runtimes, seats and
queue), and the backend and runtime a run gets for what it asked (or for
nothing). ``BrokeredScheduler`` (server/runs/brokered_scheduler.py) widens
these to the workers of the other replicas.

A backend is listed once a worker offers it, or when it is expected: named by
``--expected-backends``, or the local workers' while they start (the host's
devices decide: gpu on a GPU host, else cpu). On the server's one event loop,
as the scheduler is.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import Any

from jaxplay import browser_protocol as bp
from jaxplay import host_devices
from jaxplay import worker_protocol as wp
from jaxplay.server.runs import runtimes
from jaxplay.server.runs.run import WorkerLink
from jaxplay.settings import Settings


class OfferedBackends(ABC):
    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self.workers: list[WorkerLink] = []
        self.expected_backends: set[str] = {b.strip() for b in settings.expected_backends.split(",") if b.strip()}
        # What the local workers will offer, until they say: the host's devices decide (gpu on a GPU host,
        # else cpu), so a run sent while they start waits for them on the right backend. Readiness waits
        # for the local workers themselves to join (server/ops/health.py), whatever they offer.
        self.local_backends: set[str] = {host_devices.local_backend()} if settings.local_workers > 0 else set()

    @abstractmethod
    def waiting(self, backend: str) -> int:
        """Runs of ``backend`` waiting for a slot (the scheduler's queues)."""

    def serving(self) -> list[WorkerLink]:
        """The connected workers that take new runs (a draining one only finishes its own)."""
        return [w for w in self.workers if not w.draining]

    def takes_new_runs(self, backend: str) -> bool:
        return any(w.hello.backend == backend for w in self.serving())

    def backends(self) -> list[dict[str, Any]]:
        names = sorted({w.hello.backend for w in self.workers} | self.expected_backends | self.local_backends)
        result = []
        for name in names:
            links = [w for w in self.serving() if w.hello.backend == name]
            first = links[0].hello if links else None
            result.append({
                "name": name,
                "device_kind": first.device_kind if first else None,
                "device_count": first.device_count if first else None,
                "device_memory_bytes": first.device_memory_bytes if first else None,
                "jax_version": first.jax_version if first else None,
                "jaxlib_version": first.jaxlib_version if first else None,
                "libraries": first.libraries if first else {},
                "device_peak": wp.to_wire(first.device_peak) if first else None,
                "runtimes": runtimes.describe(w.hello for w in links),
                "workers": len(links),
                "slots": sum(w.hello.slots for w in links),
                "free_slots": sum(w.free_slots for w in links),
                "queued": self.waiting(name),
                "sandbox": self.settings.sandbox,
                "draining": sum(1 for w in self.workers if w.draining and w.hello.backend == name),
            })
        return result

    def worker_hellos(self, backend: str) -> list[wp.WorkerHello]:
        """What the workers that can run ``backend`` said of themselves (the result cache keys on it)."""
        return [w.hello for w in self.workers if w.hello.backend == backend]

    def local_worker_refused(self) -> None:
        """A local worker cannot start: expect of the local workers only what those that joined offer."""
        self.local_backends = {w.hello.backend for w in self.workers if w.local}

    def default_backend(self) -> str | None:
        """What a run that names no backend runs on: ``--default-backend`` while it has a worker, else
        ``cpu`` where connected, else the first backend with a worker, else the first one expected."""
        listed = self.backends()
        connected = [b["name"] for b in listed if b["workers"]]
        chosen = self.settings.default_backend
        if chosen and chosen in connected:
            return chosen
        if connected:
            return "cpu" if "cpu" in connected else connected[0]
        if chosen and any(b["name"] == chosen for b in listed):
            return chosen
        return listed[0]["name"] if listed else None

    def resolve_runtime(self, backend: str, requested: str | None) -> str:
        """The runtime a run of ``backend`` gets (server/runs/runtimes.py); refused when none offers it."""
        return runtimes.resolve(self.worker_hellos(backend), backend, requested)

    def known_backends(self) -> set[str]:
        """The backends a run may wait for: offered by a connected worker, expected, or the local workers'."""
        return {w.hello.backend for w in self.workers} | self.expected_backends | self.local_backends

    def resolve_backend(self, requested: str | None) -> str:
        known = self.known_backends()
        if requested is None:
            default = self.default_backend()
            if default is None:
                raise bp.ProtocolError("No worker is connected to this server yet; try again in a moment.",
                                       reason="no_worker")
            return default
        if requested not in known:
            # Nothing known yet (a server of remote workers just started, or its workers restart): a run for
            # a backend a worker could offer waits for the workers to join, as a page's held run after a
            # restart must; the first worker to join settles it (``Scheduler.refuse_unoffered``).
            if not known and requested in WORKER_BACKENDS:
                return requested
            raise bp.ProtocolError(unknown_backend(requested, known), reason="unknown_backend")
        return requested


# The backends a worker can offer (``jax.default_backend()``'s names): all a run may wait for before any
# worker joined, so no name a client makes up becomes a queue, a metrics label or a Redis list of its own.
WORKER_BACKENDS = frozenset({"cpu", "gpu", "tpu"})


def unknown_backend(requested: str, known: set[str]) -> str:
    offered = ", ".join(sorted(known)) or "none yet"
    shown = requested if len(requested) <= 40 else requested[:40] + "…"
    return f"Unknown backend {shown!r}: this server offers {offered}."
