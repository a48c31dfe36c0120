"""``--broker redis://...``: several server replicas share one set of queues and workers.

Each run goes through Redis, whichever replica its browser is connected to
(the *origin*) and whichever replica its worker is connected to (the
*executor*; often the same one)::

    origin A                          Redis                          executor B
    submit ── RPUSH job ───────────▶ jaxplay:queue:<backend> ──BLPOP──▶ puller (only while B
                                                                       has a free slot) ->
                                                                       a local Run on B's
                                                                       scheduler -> worker
    relay  ◀── XREAD ─── jaxplay:events:<A> (stream) ◀── XADD ──────── each event, in order
    cancel ─── PUBLISH ───────────▶ jaxplay:cancels ─── SUBSCRIBE ──▶ cancels its local Run
    heartbeat: SET jaxplay:replica:<id> EX 3 every second, with its backends

Why streams for events: a stream keeps order and keeps entries while the
origin's reader reconnects, where pub/sub would drop them; events are the
one thing that must not be lost or reordered. Cancels use pub/sub: they
are idempotent and every run still has its deadline.

What holds:
- exactly one ``done`` per run: only the origin's ``Scheduler.finish`` emits
  it (from the executor's ``done``, a cancel while still in Redis, the
  origin's own deadline, or the executor's death);
- a job is taken by exactly one executor (BLPOP), and a cancel races it
  safely: LREM removes it if still queued, otherwise the cancel is published;
- a dead executor (heartbeat gone): its origin ends the run as ``crashed``;
  a dead origin: executors cancel its runs and drop its queued jobs, and its
  browsers, reconnecting to another replica, are sent a ``done`` for each
  run they had in flight (kept per session in ``jaxplay:session:<id>``).
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
import uuid
from dataclasses import asdict, dataclass
from typing import Any

import redis.asyncio as aioredis
from redis.exceptions import RedisError

from jaxplay import browser_protocol as bp
from jaxplay import worker_protocol as wp
from jaxplay.server.clients.identity import is_browser_session
from jaxplay.server.runs.scheduler import WORKER_GRACE_S, Run, Scheduler, WorkerLink

log = logging.getLogger("jaxplay.broker")

PREFIX = "jaxplay:"
HEARTBEAT_S = 1.0
HEARTBEAT_TTL_S = 3
STREAM_MAXLEN = 100_000
EXECUTOR_GONE = "The server replica running this program stopped; run it again."
ORIGIN_GONE = ("The server this page was connected to stopped while this run was in flight, so its result "
               "was lost; run it again.")


@dataclass(eq=False)
class Pending:
    """A run this replica's browser submitted, while it is in Redis or on another replica."""
    run: Run
    payload: str
    executor: str | None = None


def public_hello(hello: wp.WorkerHello) -> dict[str, Any]:
    """A worker's hello without its token: what other replicas may know of it."""
    return {k: v for k, v in asdict(hello).items() if k not in ("token", "type")}


async def _nowhere(text: str) -> None:
    """The send of a worker on another replica: this replica never writes to it."""


class RedisBroker:
    def __init__(self, url: str, scheduler: Scheduler) -> None:
        self.url = url
        self.scheduler = scheduler
        self.id = uuid.uuid4().hex[:12]
        self.redis: aioredis.Redis | None = None
        self.pending: dict[str, Pending] = {}
        self.executing: dict[str, tuple[Run, str]] = {}  # run key -> (local run, origin)
        self.cancelled: dict[str, float] = {}  # keys cancelled before this replica registered them
        self.live: dict[str, dict[str, Any]] = {}  # replica id -> its heartbeat
        self.outgoing: asyncio.Queue[tuple[str, str, dict[str, Any], dict[str, Any] | None]] = asyncio.Queue()
        self.pushes: asyncio.Queue[tuple[Run, str]] = asyncio.Queue()
        self.tasks: list[asyncio.Task[None]] = []
        self.pullers: dict[str, asyncio.Task[None]] = {}

    # --- lifecycle ---------------------------------------------------------

    async def start(self) -> None:
        self.redis = aioredis.from_url(self.url, decode_responses=True)
        try:
            await self.redis.ping()
        except (RedisError, OSError) as exc:
            raise RuntimeError(f"Cannot reach the broker at {self.url}: {exc}. Check --broker "
                               "(JAXPLAY_BROKER) and that Redis is running.") from exc
        await self._heartbeat_once()
        for loop in (self._heartbeat_loop, self._read_events, self._listen_cancels, self._send_events,
                     self._push_in_order):
            self.tasks.append(asyncio.create_task(loop()))
        log.info("broker: replica %s on %s", self.id, self.url)

    async def stop(self) -> None:
        for task in [*self.tasks, *self.pullers.values()]:
            task.cancel()
        await asyncio.gather(*self.tasks, *self.pullers.values(), return_exceptions=True)
        if self.redis is not None:
            try:
                await self.redis.delete(f"{PREFIX}replica:{self.id}", f"{PREFIX}events:{self.id}")
                await self.redis.srem(f"{PREFIX}replicas", self.id)
            except (RedisError, OSError):
                pass
            await self.redis.aclose()

    def abandon_all(self, message: str) -> None:
        """Shutdown, after the drain: end this replica's runs still out in Redis or on other replicas."""
        for pending in list(self.pending.values()):
            asyncio.create_task(self._cancel(pending.run))
            self._end(pending.run, bp.RunStatus.CRASHED, message)

    def remote_backends(self) -> set[str]:
        return {b for info in self.live.values() for b, n in info.get("backends", {}).items() if n["workers"]}

    # --- origin side -------------------------------------------------------

    def enqueue(self, run: Run) -> None:
        job = {"key": run.key, "origin": self.id, "code": run.code, "backend": run.backend,
               "timeout_s": run.timeout_s, "options": run.options, "session_id": run.session_id,
               "network": run.network, "runtime": run.runtime}
        payload = json.dumps(job, separators=(",", ":"))
        self.pending[run.key] = Pending(run, payload)
        loop = asyncio.get_running_loop()
        run._deadline = loop.call_later(run.timeout_s + WORKER_GRACE_S + HEARTBEAT_TTL_S, self._overdue, run)
        self.pushes.put_nowait((run, payload))

    async def _push_in_order(self) -> None:
        """One task pushes every job, so the shared queue keeps the order the browsers submitted in."""
        while True:
            run, payload = await self.pushes.get()
            await self._push(run, payload)

    async def _push(self, run: Run, payload: str) -> None:
        assert self.redis is not None
        queue = f"{PREFIX}queue:{run.backend}"
        try:
            waiting = await self.redis.llen(queue)
            if waiting >= self.scheduler.settings.queue_limit:
                self._end(run, bp.RunStatus.REJECTED,
                          f"The {run.backend} queue is full ({waiting} runs waiting); try again in a minute.")
                return
            async with self.redis.pipeline(transaction=False) as pipe:
                pipe.rpush(queue, payload)
                if is_browser_session(run.session_id):  # an address client is nobody who comes back
                    pipe.hset(f"{PREFIX}session:{run.session_id}", run.client_id,
                              json.dumps({"origin": self.id, "key": run.key}))
                    pipe.expire(f"{PREFIX}session:{run.session_id}", 24 * 3600)
                position, *_ = await pipe.execute()
        except (RedisError, OSError) as exc:
            log.error("broker: could not queue run %s: %s", run.key, exc)
            self._end(run, bp.RunStatus.CRASHED, "The server could not reach its broker; run it again.")
            return
        if run.key in self.pending and run.state == "queued":
            run.send(bp.queued_event(run.client_id, int(position)))

    def cancel(self, run: Run) -> None:
        asyncio.create_task(self._cancel(run))

    async def _cancel(self, run: Run) -> None:
        pending = self.pending.get(run.key)
        if pending is None or self.redis is None:
            return
        try:
            if pending.executor is None and await self.redis.lrem(f"{PREFIX}queue:{run.backend}", 1, pending.payload):
                self._end(run, bp.RunStatus.CANCELLED, "Cancelled before it started.")
                return
            await self.redis.publish(f"{PREFIX}cancels", run.key)
        except (RedisError, OSError) as exc:
            log.warning("broker: cancel of %s could not reach Redis: %s", run.key, exc)

    def _overdue(self, run: Run) -> None:
        log.warning("run %s: no result through the broker within its deadline", run.key)
        asyncio.create_task(self._cancel(run))
        self._end(run, bp.RunStatus.CRASHED, "The worker stopped answering; the run was abandoned.")

    def _end(self, run: Run, status: bp.RunStatus, message: str | None = None,
             elapsed_ms: float | None = None, **extra: Any) -> None:
        self.pending.pop(run.key, None)
        self.scheduler.finish(run, status, message, elapsed_ms, **extra)
        if is_browser_session(run.session_id) and self.redis is not None:
            asyncio.create_task(self._forget(run))

    async def _forget(self, run: Run) -> None:
        try:
            assert self.redis is not None
            await self.redis.hdel(f"{PREFIX}session:{run.session_id}", run.client_id)
        except (RedisError, OSError):
            pass

    def deliver(self, key: str, executor: str, event: dict[str, Any], hello: dict[str, Any] | None = None) -> None:
        """An event of one of this replica's runs, from whichever replica executes it.

        ``started`` comes with the executing worker's hello, which the result cache keys on, and
        whether the executing replica trusts that worker's results (``WorkerLink.trusted``): only a
        trusted worker's result may be cached and replayed to others.
        """
        pending = self.pending.get(key)
        if pending is None:
            return
        pending.executor = executor
        run = pending.run
        kind = event.get("type")
        if kind == "queued":
            return  # the executor's own queue: the browser already has its place in the shared one
        if kind == "done":
            extra = {k: v for k, v in event.items() if k not in ("type", "id", "status", "elapsed_ms", "message")}
            self._end(run, bp.RunStatus(event["status"]), event.get("message"), event.get("elapsed_ms"), **extra)
            return
        if kind == "started":
            run.state = "running"
            if hello is not None and run.worker is None:
                hello = dict(hello)
                trusted = hello.pop("trusted", False) is True
                run.worker = WorkerLink(hello=wp.WorkerHello(token="", **hello), send=_nowhere, trusted=trusted)
        run.send(event)

    async def _read_events(self) -> None:
        assert self.redis is not None
        stream, last = f"{PREFIX}events:{self.id}", "$"
        while True:
            try:
                replies = await self.redis.xread({stream: last}, block=1000, count=1000)
            except (RedisError, OSError) as exc:
                log.warning("broker: reading events failed (%s); retrying", exc)
                await asyncio.sleep(0.5)
                continue
            for _, entries in replies or ():
                for entry_id, fields in entries:
                    last = entry_id
                    hello = json.loads(fields["hello"]) if "hello" in fields else None
                    self.deliver(fields["key"], fields["executor"], json.loads(fields["event"]), hello)

    # --- executor side -----------------------------------------------------

    def _free_slots(self, backend: str) -> int:
        free = sum(w.free_slots for w in self.scheduler.workers if w.hello.backend == backend)
        return free - len(self.scheduler.queues.get(backend, ()))

    async def _pull(self, backend: str) -> None:
        """Take jobs for ``backend`` from Redis while this replica has a free slot for one."""
        connection = aioredis.from_url(self.url, decode_responses=True)  # BLPOP holds its connection
        try:
            while True:
                if not self.scheduler.accepting or self._free_slots(backend) <= 0:
                    await asyncio.sleep(0.005)
                    continue
                try:
                    item = await connection.blpop([f"{PREFIX}queue:{backend}"], timeout=1)
                except (RedisError, OSError) as exc:
                    log.warning("broker: taking a job failed (%s); retrying", exc)
                    await asyncio.sleep(0.5)
                    continue
                if item is not None:
                    self._execute(json.loads(item[1]))
        finally:
            await connection.aclose()

    def _execute(self, job: dict[str, Any]) -> None:
        key, origin = job["key"], job["origin"]
        if origin != self.id and origin not in self.live:
            log.info("broker: dropping run %s of replica %s, which stopped", key, origin)
            return

        def relay(event: dict[str, Any]) -> None:
            if event.get("type") == "done":
                self.executing.pop(key, None)
            hello = None
            if event.get("type") == "started" and run.worker:
                hello = public_hello(run.worker.hello) | {"trusted": run.worker.trusted}
            if origin == self.id:
                self.deliver(key, self.id, event, hello)
            else:
                self.outgoing.put_nowait((origin, key, event, hello))

        run = Run(client_id=key, code=job["code"], backend=job["backend"], timeout_s=float(job["timeout_s"]),
                  options=job["options"], emit=relay, session_id=job.get("session_id") or "", network=job.get("network") or "",
                  key=key, runtime=str(job.get("runtime") or ""))
        self.executing[key] = (run, origin)
        if self.cancelled.pop(key, None) is not None:
            self.scheduler.finish(run, bp.RunStatus.CANCELLED, "Stopped at your request.")
            return
        try:
            # A job taken from the shared queue: it counts against its browser on the replica it came from.
            self.scheduler.queue_here(run, count=False)
        except bp.ProtocolError as exc:
            self.scheduler.finish(run, bp.RunStatus.REJECTED, str(exc))

    async def _send_events(self) -> None:
        """XADD events to their origins' streams in order, many per round trip."""
        assert self.redis is not None
        while True:
            batch = [await self.outgoing.get()]
            while not self.outgoing.empty():
                batch.append(self.outgoing.get_nowait())
            try:
                async with self.redis.pipeline(transaction=False) as pipe:
                    for origin, key, event, hello in batch:
                        fields = {"key": key, "executor": self.id, "event": json.dumps(event, separators=(",", ":"))}
                        if hello is not None:
                            fields["hello"] = json.dumps(hello)
                        pipe.xadd(f"{PREFIX}events:{origin}", fields, maxlen=STREAM_MAXLEN, approximate=True)
                    await pipe.execute()
            except (RedisError, OSError) as exc:
                log.error("broker: %d event(s) could not be sent: %s", len(batch), exc)

    async def _listen_cancels(self) -> None:
        assert self.redis is not None
        async with self.redis.pubsub() as pubsub:
            await pubsub.subscribe(f"{PREFIX}cancels")
            async for message in pubsub.listen():
                if message.get("type") != "message":
                    continue
                key = message["data"]
                entry = self.executing.get(key)
                if entry is not None:
                    Scheduler.cancel(self.scheduler, entry[0])
                else:  # not taken yet (maybe still on its way into Redis): refuse it when it is
                    self.cancelled[key] = time.monotonic()

    # --- liveness ----------------------------------------------------------

    async def _heartbeat_once(self) -> None:
        assert self.redis is not None
        backends: dict[str, dict[str, int]] = {}
        for link in self.scheduler.workers:
            hello = link.hello
            describe = {"device_kind": hello.device_kind, "device_count": hello.device_count,
                        "jax_version": hello.jax_version, "jaxlib_version": hello.jaxlib_version}
            entry = backends.setdefault(hello.backend, {"workers": 0, "slots": 0, "describe": describe, "hellos": []})
            entry["hellos"].append(public_hello(hello))
            entry["workers"] += 1
            entry["slots"] += link.hello.slots
        beat = json.dumps({"backends": backends, "at": time.time()})
        async with self.redis.pipeline(transaction=False) as pipe:
            pipe.set(f"{PREFIX}replica:{self.id}", beat, ex=HEARTBEAT_TTL_S)
            pipe.sadd(f"{PREFIX}replicas", self.id)
            await pipe.execute()
        ids = sorted(await self.redis.smembers(f"{PREFIX}replicas"))
        beats = await self.redis.mget([f"{PREFIX}replica:{i}" for i in ids]) if ids else []
        live = {i: json.loads(b) for i, b in zip(ids, beats, strict=True) if b is not None}
        gone = set(ids) - set(live)
        if gone:
            await self.redis.srem(f"{PREFIX}replicas", *gone)
        self.live = live
        for backend in backends:
            if backend not in self.pullers:
                self.pullers[backend] = asyncio.create_task(self._pull(backend))

    def beat_soon(self) -> None:
        if self.redis is not None:
            task = asyncio.ensure_future(self._heartbeat_once())
            self.tasks.append(task)
            task.add_done_callback(self.tasks.remove)

    async def _heartbeat_loop(self) -> None:
        while True:
            await asyncio.sleep(HEARTBEAT_S)
            try:
                await self._heartbeat_once()
            except (RedisError, OSError) as exc:
                log.warning("broker: heartbeat failed: %s", exc)
                continue
            for pending in list(self.pending.values()):
                if pending.executor is not None and pending.executor not in self.live:
                    self._end(pending.run, bp.RunStatus.CRASHED, EXECUTOR_GONE)
            for key, (run, origin) in list(self.executing.items()):
                if origin not in self.live:
                    log.info("broker: replica %s stopped; cancelling its run %s", origin, key)
                    self.executing.pop(key, None)
                    Scheduler.cancel(self.scheduler, run)
            cutoff = time.monotonic() - 60
            self.cancelled = {k: t for k, t in self.cancelled.items() if t > cutoff}

    # --- browsers that come back -------------------------------------------

    async def tell_returning_browser(self, session_id: str, emit: Any) -> None:
        """A browser connected here: end the runs it had in flight on a replica that has since stopped."""
        if not is_browser_session(session_id) or self.redis is None:
            return
        try:
            runs = await self.redis.hgetall(f"{PREFIX}session:{session_id}")
            for client_id, raw in runs.items():
                origin = json.loads(raw)["origin"]
                if origin != self.id and origin not in self.live:
                    emit(bp.done_event(client_id, bp.RunStatus.CRASHED, 0.0, ORIGIN_GONE))
                    await self.redis.hdel(f"{PREFIX}session:{session_id}", client_id)
        except (RedisError, OSError) as exc:
            log.warning("broker: could not look up session runs: %s", exc)
