"""A job on this worker, from its arrival to its ``finished``: refused, or seated and run on its runtime's sandbox.

``WorkerAgent`` (sandbox/agent.py) is a ``JobsOnSeats``: the receive loop starts
``execute`` as a task of its own for each job; a cancel reaches the run's
sandbox through ``cancel``, and a lost connection cancels every run in flight
(``abandon_runs``)::

    execute(job)
      ├─ refused at once ("rejected", no seat taken): a runtime this worker does
      │  not offer, or flags the XLA of the job's runtime does not know
      ├─ a seat (``Seats.take``: one where its runtime is warm with a spare
      │  ready, preferably), then its runtime's sandbox on it
      │  (``RuntimePool.sandbox_for``: an idle runtime, or a dead sandbox, starts here)
      ├─ the run (``WarmSandbox.run``); one whose program never reached a
      │  process (``NothingRan``: killed from outside) goes once more
      └─ ``finished``, then the seat is given back; where the default runtime's
         sandbox died (it stays warm), only once it has started again (``_revive``)

A run the drain ended (sandbox/agent_drain.py) is reported with the drain's
message, not as "cancelled" (``drained``). A fault of the worker's own is
reported ``crashed`` with its reason, and the worker keeps serving.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
from collections.abc import Callable
from typing import Any, cast

from jaxplay import run_flags
from jaxplay import worker_protocol as wp
from jaxplay.browser_protocol import RunStatus
from jaxplay.run_events import RunEvent
from jaxplay.sandbox.agent_drain import WorkerDrain
from jaxplay.sandbox.engine.run_outcome import RunResult
from jaxplay.sandbox.engine.runtime_pool import RuntimePool, Seats
from jaxplay.sandbox.engine.warm_sandbox import LOST_TO_SANDBOX, NothingRan, WarmSandbox
from jaxplay.sandbox.engine.zygote_link import SandboxDied

log = logging.getLogger("jaxplay.worker")

# A run whose program never reached a process goes again only when that was found within this (it is found
# in milliseconds when a spare or sandbox had died; a hung one would otherwise give the run its time twice).
RETRY_WITHIN_S = 2.0


class JobsOnSeats:
    """What the agent does with a job. Its state is the agent's, set in ``WorkerAgent.__init__``."""

    pools: dict[str, RuntimePool]  # JAX version -> its sandboxes
    default_runtime: str
    runtime_entries: list[wp.WorkerRuntime]
    description: dict[str, Any]  # the worker's own JAX's probe
    seats: Seats
    running: dict[str, WarmSandbox | None]  # None while the run's sandbox starts
    cancelled_early: set[str]
    drain: WorkerDrain | None
    oom_kills: int
    crashes: int
    report_slots: Callable[[], None]

    def cancel(self, run_id: str) -> None:
        if run_id not in self.running:
            return
        self.cancelled_early.add(run_id)  # kept: a run that goes again (``NothingRan``) is not started again
        sandbox = self.running[run_id]
        if sandbox is not None:  # None: its runtime's sandbox is still starting
            sandbox.cancel(run_id)

    def runtime_refusal(self, name: str) -> str:
        offered = ", ".join(e.name + (" (default)" if e.default else "") for e in self.runtime_entries if not e.problem)
        broken = next((e for e in self.runtime_entries if e.name == name and e.problem), None)
        why = f"JAX {name} cannot run programs here: {broken.problem}" if broken else f"JAX {name} is not offered here"
        return f"{why}. This worker offers JAX {offered}."

    def flags_refusal(self, job: wp.ServerJob) -> str | None:
        """Why this worker will not run the job's flags (the server checked them; a sandbox's XLA aborts on a
        flag it does not know), or None."""
        if not job.options.flags:
            return None
        name = job.runtime or self.default_runtime
        entry = next((e for e in self.runtime_entries if e.name == name), None)
        version = (entry.jaxlib_version or entry.jax_version) if entry else self.description.get("jaxlib_version")
        try:
            run_flags.validate(job.options.flags, version or None, self.description.get("backend"))
        except run_flags.FlagError as exc:
            return str(exc)
        return None

    async def execute(self, job: wp.ServerJob, outbox: asyncio.Queue[str]) -> None:
        pool = self.pools.get(job.runtime or self.default_runtime)
        if pool is None:
            outbox.put_nowait(wp.encode(wp.WorkerFinished(job.run_id, "rejected", 0.0,
                                                          self.runtime_refusal(job.runtime))))
            return
        refusal = self.flags_refusal(job)
        if refusal is not None:
            outbox.put_nowait(wp.encode(wp.WorkerFinished(job.run_id, "rejected", 0.0, refusal)))
            return
        seat = await self.seats.take(pool.warm_on, pool.spare_ready_on)
        if self.drain is not None and self.drain.cut_short:  # it waited for a seat while the drain ran out
            self.seats.give(seat)
            outbox.put_nowait(wp.encode(wp.WorkerFinished(job.run_id, "crashed", 0.0, self.drain.message)))
            return
        self.running[job.run_id] = None
        pool.taken()
        self.report_slots()

        def send(event: dict[str, Any]) -> None:
            # The relay passes on only the kinds a run may send (sandbox/output/event_channel.py).
            outbox.put_nowait(wp.encode(wp.WorkerEvent(run_id=job.run_id, event=cast(RunEvent, event))))

        sandbox: WarmSandbox | None = None
        try:
            for tries_left in (2, 1, 0):  # a dead spare, then its sandbox found dead: both in milliseconds
                try:
                    sandbox = await pool.sandbox_for(seat)  # an idle runtime (or a dead sandbox) starts here
                except SandboxDied as died:  # its start was killed from outside: nothing of the run happened
                    lost: Exception = died
                    tried_s = 0.0  # a start is not the run's own time
                else:
                    self.running[job.run_id] = sandbox
                    if job.run_id in self.cancelled_early:
                        outbox.put_nowait(wp.encode(self.drained(wp.WorkerFinished(job.run_id, "cancelled", 0.0,
                                                                                   "Stopped at your request."))))
                        return
                    try:
                        result = await sandbox.run(job.run_id, job.code, job.timeout_s, job.options, send)
                        break
                    except NothingRan as nothing:  # killed from outside before the program reached it
                        lost, tried_s = nothing, nothing.tried_s
                        if not sandbox.alive:
                            await sandbox.close()
                # Again, on a sound sandbox (a spare found dead may be followed by its sandbox found dead); only when its own time (from when its seat was free) had hardly
                # run (a dead spare or sandbox is found in milliseconds), so a run never gets its time limit twice.
                again = bool(tries_left) and tried_s < RETRY_WITHIN_S
                log.warning("slot %d: run %s never reached a process (%s)%s", seat, job.run_id, lost,
                            "; it goes again" if again else "")
                self.running[job.run_id] = None
                result = RunResult(RunStatus.CRASHED, 0.0, LOST_TO_SANDBOX)
                if not again:
                    break
            self.oom_kills += result.out_of_memory
            self.crashes += result.status == "crashed"
            outbox.put_nowait(wp.encode(self.drained(wp.WorkerFinished(
                job.run_id, str(result.status), result.elapsed_ms, result.message, result.read_session_cache))))
        except Exception as exc:  # a worker fault, not the user's: report it and keep serving
            log.exception("run %s failed in the worker", job.run_id)
            self.crashes += 1
            outbox.put_nowait(wp.encode(wp.WorkerFinished(job.run_id, "crashed", 0.0, f"Worker fault: {exc}")))
        finally:
            del self.running[job.run_id]
            self.cancelled_early.discard(job.run_id)
            pool.released()
            self.report_slots()
            if pool.stays_warm and not pool.warm_on(seat):
                asyncio.create_task(self._revive(pool, seat))
            else:  # another runtime's dead sandbox is started again at its next run
                self.seats.give(seat)

    def drained(self, finished: wp.WorkerFinished) -> wp.WorkerFinished:
        """A run the drain cancelled is reported as ended by the worker's stop, saying so, not as 'cancelled'."""
        if self.drain is None or finished.run_id not in self.drain.ended or finished.status != "cancelled":
            return finished
        return dataclasses.replace(finished, status="crashed", message=self.drain.message)

    async def _revive(self, pool: RuntimePool, seat: int) -> None:
        await pool.start_again(seat)  # tries until it starts (or the pool closes)
        self.seats.give(seat)

    async def abandon_runs(self) -> None:
        for run_id in list(self.running):
            self.cancel(run_id)
