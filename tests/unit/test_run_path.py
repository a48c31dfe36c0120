"""The one path of every request that executes code (server/runs/run_path.py): limits, budgets, counts.

A real scheduler, run path and browser connection; the worker's events are fed as its socket would feed
them (tests/unit/test_run_watchers.py does the same).
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from jaxplay import browser_protocol as bp
from jaxplay import worker_protocol as wp
from jaxplay.server.browser_socket import BrowserConnection
from jaxplay.server.clients.connection import BrowserHooks
from jaxplay.server.clients.identity import ClientIdentity
from jaxplay.server.runs.run import Run, WorkerLink
from jaxplay.server.runs.run_path import RunPath
from jaxplay.server.runs.scheduler import Scheduler
from jaxplay.settings import Settings


class Socket:
    scope: dict = {"client": ("10.0.0.7", 1)}
    headers: dict = {}


async def no_send(text: str) -> None:
    return None


def a_path(**settings: Any) -> tuple[RunPath, list[tuple]]:
    """A run path with one CPU worker of two slots, and what its hooks are told."""
    scheduler = Scheduler(Settings(local_workers=0, expected_backends="cpu", **settings))
    scheduler.add_worker(WorkerLink(hello=wp.WorkerHello(
        token="", name="w", backend="cpu", device_kind="cpu", device_count=8, jax_version="0.10.2",
        jaxlib_version="0.10.2", slots=2), send=no_send))
    told: list[tuple] = []
    hooks = BrowserHooks()
    hooks.run_told.append(lambda *outcome: told.append(outcome))
    return RunPath(scheduler, [], hooks), told


PASSES = bp.ClientPasses(id="p", code="print(1)", key="1.1", fn="f")


@pytest.mark.parametrize("first, second", [(bp.ClientRun(id="r", code="print(1)"), PASSES),
                                           (PASSES, bp.ClientRun(id="r", code="print(1)"))])
def test_budgets_apply_to_passes_requests_as_to_runs(first, second):
    """One client's runs waiting or running, whatever their kind, count against one limit; so do a
    connection's runs in flight."""
    async def scenario() -> tuple[list[str], list[tuple]]:
        reasons = []
        for limits in ({"max_runs_per_client": 1}, {"max_runs_per_connection": 1}):
            path, told = a_path(**limits)
            connection = BrowserConnection(Socket(), path)  # type: ignore[arg-type]
            await connection.start(first)
            with pytest.raises(bp.ProtocolError) as refused:
                await connection.start(second)
            reasons.append(refused.value.reason)
            connection.outbox.close()
        return reasons, told

    reasons, told = asyncio.run(scenario())
    assert reasons == ["client_limit", "connection_limit"]
    kind = "passes" if second is PASSES else "run"
    assert told == [(None, "rejected", "connection_limit", kind)]  # the last path's count: this refusal


def test_a_passes_request_carries_the_servers_bound_on_its_own_work():
    path, _ = a_path(passes_work_limit_s=4.0)
    request = path.request("print(1)", options=wp.RunOptions(passes=wp.PassesTarget(key="1.1", fn="f")))
    assert request.kind == "passes" and request.options.passes == wp.PassesTarget("1.1", "f", work_limit_s=4.0)
    assert request.timeout_s == 30.0  # the run's own limit still holds the whole request


def test_a_request_is_held_to_the_servers_limits_whoever_makes_it():
    path, _ = a_path(max_code_bytes=100)
    for asked, reason in (({"timeout_s": 31.0}, "timeout_too_long"), ({"backend": "tpu"}, "unknown_backend"),
                          ({"runtime": "0.1.0"}, "unknown_runtime")):
        with pytest.raises(bp.ProtocolError) as refused:
            path.request("print(1)", run_id="x", **asked)
        assert (refused.value.reason, refused.value.run_id) == (reason, "x")
    with pytest.raises(bp.ProtocolError, match="the limit is 100 bytes"):
        path.request("x" * 101)


def test_another_entry_point_gets_a_runs_events_through_one_call():
    """``RunPath.events``: a typed request and who asks; the events through the done, counted by kind."""
    async def scenario() -> tuple[list[dict], list[dict], list[tuple]]:
        path, told = a_path(max_runs_per_client=1)
        identity = ClientIdentity(key="address:10.0.0.9", network="10.0.0.9")
        request = path.request("print(1)", options=wp.RunOptions(profile=True))
        events = []

        async def worker() -> None:
            (link,) = path.scheduler.workers
            while not link.runs:
                await asyncio.sleep(0)
            (run,) = link.runs.values()
            path.scheduler.worker_event(link, wp.WorkerEvent(run_id=run.key, event={"type": "stdout", "text": "1\n"}))
            # While it runs, the same client's second request is over its budget.
            refused.extend([e async for e in path.events(request, identity, "second")])
            path.scheduler.worker_finished(link, wp.WorkerFinished(run_id=run.key, status="ok", elapsed_ms=5.0))

        refused: list[dict] = []
        feeding = asyncio.create_task(worker())
        async for event in path.events(request, identity, "first"):
            events.append(event)
        await feeding
        return events, refused, told

    events, refused, told = asyncio.run(scenario())
    assert [e["type"] for e in events] == ["queued", "started", "stdout", "done"]
    assert all(e["id"] == "first" for e in events) and events[-1]["status"] == "ok"
    assert [(e["type"], e["status"], e["reason"]) for e in refused] == [("done", "rejected", "client_limit")]
    assert told == [(None, "rejected", "client_limit", "profile"), ("cpu", "ok", None, "profile")]


def cpu_worker(name: str = "w", backend: str = "cpu") -> WorkerLink:
    return WorkerLink(hello=wp.WorkerHello(
        token="", name=name, backend=backend, device_kind=backend, device_count=1, jax_version="0.10.2",
        jaxlib_version="0.10.2", slots=1), send=no_send)


def test_a_run_sent_before_any_remote_worker_joined_waits_for_it():
    """A server of remote workers only, just restarted: a page's held run names the backend it had. It waits
    for the workers to join; the first join refuses runs for a backend none offers, and a hostile name is
    refused at once (it never becomes a queue)."""
    async def scenario() -> tuple[list[dict], list[dict], set[str]]:
        path = RunPath(Scheduler(Settings(local_workers=0)), [], BrowserHooks())
        identity = ClientIdentity(key="address:10.0.0.9", network="10.0.0.9")
        cpu_events: list[dict] = []
        tpu_events: list[dict] = []

        async def collect(backend: str, into: list[dict]) -> None:
            async for event in path.events(path.request("print(1)", backend=backend), identity, backend):
                into.append(event)

        for made_up in ("X" * 40, "cpu0", "CPU", "cpu "):  # only a backend a worker can offer may wait
            with pytest.raises(bp.ProtocolError, match="offers none yet") as hostile:
                path.request("print(1)", backend=made_up)
            assert hostile.value.reason == "unknown_backend"
        runs = [asyncio.create_task(collect("cpu", cpu_events)), asyncio.create_task(collect("tpu", tpu_events))]
        while path.scheduler.waiting("cpu") + path.scheduler.waiting("tpu") < 2:
            await asyncio.sleep(0)
        link = cpu_worker()
        path.scheduler.add_worker(link)
        await runs[1]
        while not link.runs:
            await asyncio.sleep(0)
        (run,) = link.runs.values()
        path.scheduler.worker_finished(link, wp.WorkerFinished(run_id=run.key, status="ok", elapsed_ms=5.0))
        await runs[0]
        return cpu_events, tpu_events, path.scheduler.awaiting_first_worker

    cpu_events, tpu_events, awaiting = asyncio.run(scenario())
    assert [e["type"] for e in cpu_events] == ["queued", "started", "done"] and cpu_events[-1]["status"] == "ok"
    assert [(e["type"], e["status"], e["reason"]) for e in tpu_events if e["type"] == "done"] == [
        ("done", "rejected", "unknown_backend")]
    assert tpu_events[-1]["message"] == "Unknown backend 'tpu': this server offers cpu."
    assert awaiting == {}


def test_a_run_resolved_before_the_first_worker_joined_is_refused_if_it_reaches_the_queue_after():
    """The first worker joins between a run's backend check and its queueing (the run path awaits between):
    the run is refused then, not left waiting for a backend nobody offers."""
    scheduler = Scheduler(Settings(local_workers=0))
    path = RunPath(scheduler, [], BrowserHooks())
    request = path.request("print(1)", backend="gpu")
    scheduler.add_worker(cpu_worker())
    run = Run(request=request, client_id="r", session_id="s", emit=lambda event: None)
    with pytest.raises(bp.ProtocolError, match="Unknown backend 'gpu': this server offers cpu"):
        scheduler.submit(run)
    assert scheduler.waiting("gpu") == 0 and scheduler.awaiting_first_worker == {}


def test_runs_accepted_while_their_backend_was_known_are_never_refused_by_a_later_join():
    """Only runs accepted blind are settled by a join: a cpu run queued while its worker was connected keeps
    waiting through that worker's restart, whatever joins meanwhile."""
    async def scenario() -> Scheduler:
        scheduler = Scheduler(Settings(local_workers=0))
        first = cpu_worker("c1")
        first.free_slots = 0
        scheduler.workers.append(first)  # connected, busy
        run = Run(request=RunPath(scheduler, [], BrowserHooks()).request("print(1)", backend="cpu"), client_id="r",
                  session_id="s", emit=lambda event: None)
        scheduler.submit(run)
        scheduler.remove_worker(first)
        scheduler.add_worker(cpu_worker("g1", backend="gpu"))
        return scheduler

    scheduler = asyncio.run(scenario())
    assert scheduler.waiting("cpu") == 1


def test_a_run_waiting_for_a_first_worker_that_never_joins_is_told_so(monkeypatch):
    """The wait for the first worker is bounded: the run ends `rejected`, saying no worker joined."""
    from jaxplay.server.runs import scheduler as scheduler_module

    monkeypatch.setattr(scheduler_module, "FIRST_WORKER_WAIT_S", 0.05)

    async def scenario() -> tuple[list[dict], Scheduler]:
        path = RunPath(Scheduler(Settings(local_workers=0)), [], BrowserHooks())
        identity = ClientIdentity(key="address:10.0.0.9", network="10.0.0.9")
        events = [e async for e in path.events(path.request("print(1)", backend="cpu"), identity, "held")]
        return events, path.scheduler

    events, scheduler = asyncio.run(scenario())
    assert [e["type"] for e in events] == ["queued", "done"]
    assert (events[-1]["status"], events[-1]["reason"]) == ("rejected", "no_worker")
    assert events[-1]["message"].startswith("No worker is connected to this server to take this run, and none came "
                                            "in the 0.05 s it waited")
    assert scheduler.waiting("cpu") == 0 and scheduler.awaiting_first_worker == {}


def test_a_run_refused_while_none_is_known_holds_nothing():
    """Only a queued run waits for a first worker: one refused (here, the queue full) keeps no timer, entry or
    code on the server, however many a client sends."""
    async def scenario() -> tuple[int, list[str]]:
        scheduler = Scheduler(Settings(local_workers=0, queue_limit=1))
        path = RunPath(scheduler, [], BrowserHooks())
        reasons = []
        for n in range(50):
            run = Run(request=path.request("print(1)", backend="cpu"), client_id=f"r{n}", session_id=f"s{n}",
                      emit=lambda event: None)
            try:
                scheduler.submit(run)
            except bp.ProtocolError as exc:
                reasons.append(exc.reason)
        return len(scheduler.awaiting_first_worker), reasons

    awaiting, reasons = asyncio.run(scenario())
    assert awaiting == 1 and reasons == ["queue_full"] * 49


def test_a_short_run_waits_for_a_first_worker_no_longer_than_the_server_waits_for_its_result():
    """With --broker a run's deadline in Redis is its time limit plus the worker's grace and a few seconds: its
    wait for a first worker ends before, so it is told no worker came, not that a worker stopped answering."""
    async def scenario() -> float:
        scheduler = Scheduler(Settings(local_workers=0))
        run = Run(request=RunPath(scheduler, [], BrowserHooks()).request("print(1)", backend="cpu", timeout_s=5.0),
                  client_id="r", session_id="s", emit=lambda event: None)
        scheduler.submit(run)
        (_, timer), = scheduler.awaiting_first_worker.values()
        return timer.when() - asyncio.get_running_loop().time()

    from jaxplay.server.runs.scheduler import WORKER_GRACE_S

    assert asyncio.run(scenario()) == pytest.approx(5.0 + WORKER_GRACE_S, abs=0.5)
