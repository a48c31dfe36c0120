"""One way to watch a run (server/runs/run.py): every request that executes code passes the same watchers.

A real browser connection, scheduler and worker link; the worker's events are fed as its socket would
feed them. The watchers here only record what they are shown, except the ones that answer or fail.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from jaxplay import browser_protocol as bp
from jaxplay import worker_protocol as wp
from jaxplay.server.browser_socket import BrowserConnection
from jaxplay.server.clients.connection import BrowserHooks, Client
from jaxplay.server.ops.metrics import PlaygroundMetrics
from jaxplay.server.runs.run import Run, RunWatcher, WorkerLink
from jaxplay.server.runs.run_path import RunPath
from jaxplay.server.runs.scheduler import Scheduler
from jaxplay.settings import Settings


class Socket:
    scope: dict = {"client": ("10.0.0.7", 1)}
    headers: dict = {}


class Recorder(RunWatcher):
    def __init__(self, name: str, seen: list[tuple[str, ...]], answer: bool = False, fail: bool = False) -> None:
        self.name, self.seen, self.answer, self.fail = name, seen, answer, fail

    async def before_dispatch(self, run: Run, client: Client) -> bool:
        self.seen.append((self.name, "before", run.request.kind))
        if self.fail:
            raise RuntimeError("a watcher's own fault")
        if self.answer:  # as the result cache answers: the events, then the done, without a worker
            run.send({"type": "stdout", "text": "cached\n"})
            client.scheduler.finish(run, bp.RunStatus.OK, None, 1.0, cached=True)  # type: ignore[attr-defined]
        return self.answer

    def on_event(self, run: Run, event: dict[str, Any]) -> None:
        self.seen.append((self.name, event["type"]))

    def on_done(self, run: Run, done: dict[str, Any]) -> None:
        self.seen.append((self.name, "done", done["status"]))


async def no_send(text: str) -> None:
    return None


def connect(watchers: list[RunWatcher], seen: list[tuple[str, ...]]) -> tuple[BrowserConnection, WorkerLink]:
    """A browser connection whose events land in ``seen``, and one connected worker with two slots."""
    scheduler = Scheduler(Settings(local_workers=0, expected_backends="cpu"))
    link = WorkerLink(hello=wp.WorkerHello(token="", name="w", backend="cpu", device_kind="cpu", device_count=8,
                                           jax_version="0.10.2", jaxlib_version="0.10.2", slots=2), send=no_send)
    scheduler.add_worker(link)
    connection = BrowserConnection(Socket(), RunPath(scheduler, watchers, BrowserHooks()))  # type: ignore[arg-type]
    told = connection.emit  # its own bookkeeping too: a run that ended leaves the connection

    def emit(event: dict[str, Any]) -> None:
        seen.append(("browser", event["type"]))
        told(event)
    connection.emit = emit  # type: ignore[method-assign]
    return connection, link


def finish_on_the_worker(connection: BrowserConnection, link: WorkerLink) -> None:
    (run,) = link.runs.values()
    connection.scheduler.worker_event(link, wp.WorkerEvent(run_id=run.key, event={"type": "stdout", "text": "1\n"}))
    connection.scheduler.worker_finished(link, wp.WorkerFinished(run_id=run.key, status="ok", elapsed_ms=5.0))


def test_a_run_and_a_passes_request_take_the_same_path_past_the_same_watchers_in_order():
    async def scenario() -> list[list[tuple[str, ...]]]:
        paths = []
        for start in (lambda c: c.start(bp.ClientRun(id="r", code="print(1)")),
                      lambda c: c.start(bp.ClientPasses(id="p", code="print(1)", key="1.1", fn="f"))):
            seen: list[tuple[str, ...]] = []
            connection, link = connect([Recorder("rooms", seen), Recorder("cache", seen)], seen)
            await start(connection)
            finish_on_the_worker(connection, link)
            connection.outbox.close()
            paths.append(seen)
        return paths

    run_path, passes_path = asyncio.run(scenario())
    expected = [("rooms", "before", "run"), ("cache", "before", "run")]
    for kind in ("queued", "started", "stdout"):  # each watcher, in order, before the browser
        expected += [("rooms", kind), ("cache", kind), ("browser", kind)]
    expected += [("rooms", "done", "ok"), ("cache", "done", "ok"), ("browser", "done")]
    assert run_path == expected
    # The passes request's events go to the same watchers; the page gets only its course, not the output.
    assert passes_path[:2] == [("rooms", "before", "passes"), ("cache", "before", "passes")]
    assert ("cache", "stdout") in passes_path and ("browser", "stdout") not in passes_path
    assert passes_path[-3:] == [("rooms", "done", "ok"), ("cache", "done", "ok"), ("browser", "done")]


def test_a_watcher_that_answers_the_run_keeps_it_from_the_queue_and_from_the_watchers_after_it():
    async def scenario() -> tuple[list[tuple[str, ...]], BrowserConnection, WorkerLink]:
        seen: list[tuple[str, ...]] = []
        first = Recorder("metrics", seen)
        connection, link = connect([first, Recorder("cache", seen, answer=True), Recorder("later", seen)], seen)
        await connection.start(bp.ClientRun(id="r", code="print(1)"))
        connection.outbox.close()
        return seen, connection, link

    seen, connection, link = asyncio.run(scenario())
    assert not link.runs and not connection.scheduler.queues.get("cpu")
    assert not [entry for entry in seen if entry[0] == "later"]
    assert seen[-3:] == [("metrics", "done", "ok"), ("cache", "done", "ok"), ("browser", "done")]


def test_a_watcher_that_fails_costs_the_run_nothing():
    async def scenario() -> list[tuple[str, ...]]:
        seen: list[tuple[str, ...]] = []
        connection, link = connect([Recorder("broken", seen, fail=True), Recorder("after", seen)], seen)
        await connection.start(bp.ClientRun(id="r", code="print(1)"))
        finish_on_the_worker(connection, link)
        connection.outbox.close()
        return seen

    seen = asyncio.run(scenario())
    assert ("after", "before", "run") in seen and seen[-1] == ("browser", "done")


def test_every_kind_of_request_is_timed_and_counted_by_its_kind():
    """A run, a profiled run, a Compare run and a passes request: each is counted in jaxplay_runs_total and
    timed (queue wait, duration) with its kind; a refused passes request is counted as one too."""
    async def scenario() -> PlaygroundMetrics:
        seen: list[tuple[str, ...]] = []
        connection, link = connect([], seen)
        metrics = PlaygroundMetrics(connection.scheduler, connection.hooks)
        connection.path.watchers = [metrics]
        for message in (bp.ClientPasses(id="p", code="print(1)", key="1.1", fn="f"),
                        bp.ClientRun(id="r", code="print(1)"), bp.ClientRun(id="pr", code="print(1)", profile=True),
                        bp.ClientRun(id="c", code="print(1)", compare=True, runtime="0.10.2")):
            await connection.start(message)
            finish_on_the_worker(connection, link)
        connection.scheduler.accepting = False  # shutting down: the next one is refused
        with pytest.raises(bp.ProtocolError):
            await connection.start(bp.ClientPasses(id="p2", code="print(1)", key="1.1", fn="f"))
        connection.outbox.close()
        return metrics

    metrics = asyncio.run(scenario())
    sample = metrics.registry.get_sample_value
    for kind in ("run", "profile", "compare", "passes"):
        labels = {"backend": "cpu", "kind": kind}
        assert sample("jaxplay_runs_total", labels | {"status": "ok"}) == 1, kind
        assert sample("jaxplay_run_duration_seconds_count", labels) == 1, kind
        assert sample("jaxplay_queue_wait_seconds_count", labels) == 1, kind
    assert sample("jaxplay_runs_rejected_total", {"reason": "shutting_down", "kind": "passes"}) == 1
