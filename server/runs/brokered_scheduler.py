"""The scheduler of a replica started with ``--broker``: its runs go through Redis (server/runs/broker_redis.py).

Browser connections, the result cache and shutdown use it exactly as they use
``Scheduler``; only where a run waits changes. Its own local queues hold just
the runs this replica took from Redis for its own workers (the broker's ``queue_here``).
What it reports (``backends``, ``waiting``: /api/backends, /metrics, /readyz) is
the whole set of replicas: the shared queue's length and every replica's workers
and free slots, so that every replica tells the same and an autoscaler sees the
real backlog.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

from redis.exceptions import RedisError

from jaxplay import browser_protocol as bp
from jaxplay import worker_protocol as wp
from jaxplay.server.clients.sessions import SessionKeys
from jaxplay.server.runs import runtimes
from jaxplay.server.runs.broker_keys import PROBE_S, hello_of
from jaxplay.server.runs.broker_redis import RedisBroker
from jaxplay.server.runs.scheduler import Run, Scheduler, WorkerLink
from jaxplay.settings import Settings

log = logging.getLogger("jaxplay.broker")


class BrokeredScheduler(Scheduler):
    """A scheduler whose runs go through Redis; its local queues hold only runs it pulled for its workers."""

    def __init__(self, settings: Settings, session_keys: SessionKeys | None = None) -> None:
        super().__init__(settings, session_keys)
        self.broker = RedisBroker(settings.broker, self)

    def known_backends(self) -> set[str]:
        """Also the backends the other replicas' workers offer (as of their last heartbeat)."""
        return super().known_backends() | self.broker.remote_backends()

    def refuse(self, run: Run, message: str, reason: str) -> None:
        """One of this replica's runs waiting in Redis is taken back from the shared queue first."""
        pending = self.broker.pending.get(run.key)
        if pending is None:
            super().refuse(run, message, reason)
        elif pending.executor is None:  # taken by an executor: it runs on a worker that offers its backend
            self.broker.give_up(run, bp.RunStatus.REJECTED, message, reason=reason)

    def backends(self) -> list[dict[str, Any]]:
        """Every replica's backends: workers, slots and free slots of the other replicas (as of their last
        heartbeat) counted in, and the shared queue, so that every replica tells the same."""
        listed = {entry["name"]: entry for entry in super().backends()}
        for beat in self._other_beats():
            for name, remote in beat.get("backends", {}).items():
                entry = listed.setdefault(name, {"name": name, **remote["describe"], "workers": 0, "slots": 0,
                                                 "free_slots": 0, "queued": self.waiting(name),
                                                 "sandbox": self.settings.sandbox})
                if entry.get("device_kind") is None:
                    entry.update(remote["describe"])
                entry["workers"] += remote["workers"]
                entry["slots"] += remote["slots"]
                entry["free_slots"] += remote.get("free_slots", 0)
        for name, entry in listed.items():  # every replica's workers' runtimes
            entry["runtimes"] = runtimes.describe(self.worker_hellos(name))
        return [listed[name] for name in sorted(listed)]

    def _other_beats(self) -> list[dict[str, Any]]:
        return [beat for replica, beat in self.broker.live.items() if replica != self.broker.id]

    def waiting(self, backend: str) -> int:
        """Runs of ``backend`` waiting anywhere: the shared Redis queue (as last read), plus the few that a
        replica has taken for its workers and not yet started (this one's now, the others' at their beat)."""
        taken = sum(beat.get("backends", {}).get(backend, {}).get("queued", 0) for beat in self._other_beats())
        return self.broker.waiting.get(backend, 0) + taken + super().waiting(backend)

    async def refresh_waiting(self) -> None:
        await self.broker.heartbeat.refresh_waiting()

    def waiting_since(self, backend: str) -> float | None:
        """Also this replica's browsers' runs waiting in Redis: each replica reports the oldest of its own,
        so the max over replicas is the oldest anywhere (a run taken by an executor starts at once)."""
        in_redis = (p.run.submitted_at for p in self.broker.pending.values()
                    if p.run.backend == backend and p.run.state == "queued")
        here = super().waiting_since(backend)
        return min((*in_redis, *(() if here is None else (here,))), default=None)

    async def broker_memory(self) -> tuple[int, int] | None:
        redis = self.broker.redis
        if redis is None:
            return None
        try:
            info = await asyncio.wait_for(redis.info("memory"), PROBE_S)
            return int(info["used_memory"]), int(info["maxmemory"])
        except (RedisError, OSError, TimeoutError, KeyError, ValueError) as exc:
            log.debug("broker: Redis's memory not read: %s", exc)  # dependency_up says whether it answers
            return None

    @property
    def broker_reachable(self) -> bool | None:
        return self.broker.liveness.reachable

    async def broker_check(self) -> str | None:
        return await self.broker.probe()

    def worker_hellos(self, backend: str) -> list[wp.WorkerHello]:
        remote = [hello_of(hello) for replica, beat in self.broker.live.items()
                  if replica != self.broker.id for hello in beat.get("backends", {}).get(backend, {}).get("hellos", [])]
        return super().worker_hellos(backend) + remote

    def add_worker(self, link: WorkerLink) -> None:
        super().add_worker(link)
        self.broker.beat_soon()  # other replicas learn of the new backend now, not at the next beat

    def worker_draining(self, link: WorkerLink, message: wp.WorkerDraining) -> None:
        super().worker_draining(link, message)  # its free slots are 0: this replica's puller takes no job for it
        self.broker.beat_soon()  # and the other replicas stop counting it now

    def submit(self, run: Run) -> None:
        self.admit(run)  # shutting down, or the browser at its limit: refused here, never queued
        self.count_for_client(run)
        self.broker.enqueue(run)
        self.await_first_worker(run)

    def cancel(self, run: Run) -> None:
        if run.key in self.broker.pending:
            self.broker.cancel(run)
        else:
            super().cancel(run)

    def withdraw(self, run: Run) -> bool:
        # A run in Redis cannot be taken back synchronously; burst followers simply run.
        return False if run.key in self.broker.pending else super().withdraw(run)

    def runs_in_flight(self) -> int:
        return super().runs_in_flight() + len(self.broker.pending)
