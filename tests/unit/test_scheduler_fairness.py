"""Scheduler fairness: clients served in turn, presenters first, per-client limits, honest waits.

The scheduler is driven through its own ``submit`` / ``worker_finished``; the
worker link records the jobs it is sent instead of executing them, so the
order of service can be read exactly.
"""

from __future__ import annotations

import asyncio
import time

import pytest

from jaxplay import browser_protocol as bp
from jaxplay import worker_protocol as wp
from jaxplay.server.runs.fair_queue import FairQueue, RunDurations
from jaxplay.server.runs.scheduler import Run, Scheduler, WorkerLink
from jaxplay.settings import Settings


def hello(slots: int) -> wp.WorkerHello:
    return wp.WorkerHello(token="", name="w", backend="cpu", device_kind="cpu", device_count=8,
                          jax_version="0.10.2", jaxlib_version="0.10.2", slots=slots)


class Harness:
    def __init__(self, slots: int = 1, **settings) -> None:
        self.scheduler = Scheduler(Settings(local_workers=0, **settings))
        self.link = WorkerLink(hello=hello(slots), send=self._job_sent)
        self.events: dict[str, list[dict]] = {}
        self.runs: dict[str, Run] = {}

    async def _job_sent(self, text: str) -> None:
        return None  # nothing executes: the test ends runs itself with worker_finished

    def submit(self, name: str, session: str, priority: bool = False, network: str = "") -> Run:
        events = self.events.setdefault(name, [])
        run = Run(client_id=name, request=wp.RunRequest(code=f"print({name!r})", backend="cpu", timeout_s=30.0),
                  emit=events.append, session_id=session, priority=priority, network=network)
        self.runs[name] = run
        self.scheduler.submit(run)
        return run

    def started(self) -> list[str]:
        return [name for name, events in self.events.items() if any(e["type"] == "started" for e in events)]

    def finish_one(self) -> str:
        """The worker ends its oldest running run; returns its name."""
        run = next(iter(self.link.runs.values()))
        self.scheduler.worker_finished(self.link, wp.WorkerFinished(run_id=run.key, status="ok", elapsed_ms=10.0))
        return run.client_id

    def start_order(self, total: int) -> list[str]:
        order = []
        while len(order) < total:
            before = set(self.started())
            if self.link not in self.scheduler.workers:
                self.scheduler.add_worker(self.link)
            else:
                self.finish_one()
            order += [n for n in self.started() if n not in before]
        return order

    def last_queued(self, name: str) -> dict:
        return [e for e in self.events[name] if e["type"] == "queued"][-1]


def run_async(test):
    return asyncio.run(test())


def test_a_flood_from_one_client_delays_another_by_at_most_one_run():
    async def scenario():
        h = Harness(slots=1, max_runs_per_client=100)
        for i in range(50):
            h.submit(f"flood{i}", "flooder")
        h.submit("other", "someone-else")
        order = h.start_order(51)
        # The other client's run starts second: after the one flood run ahead of it in the round.
        assert order.index("other") == 1, order
        assert h.events["other"][0] == {"type": "queued", "id": "other", "position": 2, "estimated_wait_s": None}
    run_async(scenario)


def test_many_clients_are_served_in_turn():
    async def scenario():
        h = Harness(slots=2, max_runs_per_client=10)
        for turn in range(3):
            for client in "abcd":
                h.submit(f"{client}{turn}", client)
        order = h.start_order(12)
        # Each round serves every client once before anyone's second run.
        rounds = [sorted(name[0] for name in order[i:i + 4]) for i in range(0, 12, 4)]
        assert rounds == [list("abcd")] * 3, order
        assert [name[1] for name in order] == sorted(name[1] for name in order)
    run_async(scenario)


def test_the_position_told_is_the_order_of_service():
    async def scenario():
        h = Harness(slots=1, max_runs_per_client=10)
        for name, client in [("a0", "a"), ("a1", "a"), ("a2", "a"), ("b0", "b"), ("c0", "c"), ("b1", "b")]:
            h.submit(name, client)
        told = {name: h.last_queued(name)["position"] for name in h.runs}
        order = h.start_order(6)
        assert order == ["a0", "b0", "c0", "a1", "b1", "a2"]
        assert sorted(told, key=told.get) == order and sorted(told.values()) == [1, 2, 3, 4, 5, 6]
    run_async(scenario)


def test_a_presenter_runs_in_the_priority_lane():
    async def scenario():
        h = Harness(slots=1, max_runs_per_client=10)
        h.scheduler.add_worker(h.link)
        for i in range(5):
            h.submit(f"attendee{i}", f"s{i}")
        assert h.last_queued("attendee1")["position"] == 1
        h.submit("presenter", "p", priority=True)
        assert h.last_queued("presenter")["position"] == 1
        assert h.last_queued("attendee1")["position"] == 2
        assert h.finish_one() == "attendee0" and "presenter" in h.started() and "attendee1" not in h.started()
    run_async(scenario)


def test_per_client_run_limit_has_a_clear_message_and_frees_on_done():
    async def scenario():
        h = Harness(slots=1, max_runs_per_client=3)
        h.scheduler.add_worker(h.link)
        for i in range(3):
            h.submit(f"r{i}", "busy")
        with pytest.raises(bp.ProtocolError, match=r"You already have 3 runs waiting or running \(the limit is 3"):
            h.submit("r3", "busy")
        h.submit("fine", "another")  # the limit is per client
        h.finish_one()
        h.submit("r4", "busy")
        h.scheduler.cancel(h.runs["r4"])
        assert h.scheduler.active_runs["busy"] == 2
    run_async(scenario)


def test_per_client_connection_limit():
    scheduler = Scheduler(Settings(local_workers=0, max_connections_per_client=2))
    scheduler.attach_client("s")
    scheduler.attach_client("s")
    with pytest.raises(bp.ProtocolError, match=r"already has 2 connections open .*the limit is 2\)"):
        scheduler.attach_client("s")
    scheduler.attach_client("t")
    scheduler.detach_client("s")
    scheduler.attach_client("s")


def test_estimated_wait_comes_from_recent_run_durations():
    async def scenario():
        h = Harness(slots=1, max_runs_per_client=10)
        h.scheduler.add_worker(h.link)
        h.scheduler.durations["cpu"] = durations = RunDurations()
        for seconds in (2.0, 4.0):
            durations.record(seconds)
        h.submit("running", "a")
        h.runs["running"].started_at = time.monotonic() - 1.0
        h.submit("first", "b")
        h.submit("second", "c")
        # Mean 3 s; the running run has used 1 s of it.
        assert h.last_queued("first")["estimated_wait_s"] == pytest.approx(2.0, abs=0.1)
        assert h.last_queued("second")["estimated_wait_s"] == pytest.approx(5.0, abs=0.1)
    run_async(scenario)


def test_wait_estimate_fills_the_slot_that_frees_first():
    durations = RunDurations()
    durations.record(10.0)
    assert durations.waits(3, 2, [9.0]) == [0.0, 1.0, 10.0]
    assert RunDurations().waits(2, 2, []) == [None, None]


def test_fair_queue_iterates_in_service_order_and_removes():
    class R:
        def __init__(self, name: str, session_id: str, priority: bool = False) -> None:
            self.name, self.session_id, self.priority, self.network = name, session_id, priority, ""

    queue: FairQueue[R] = FairQueue()
    runs = [R("a0", "a"), R("a1", "a"), R("b0", "b"), R("p", "p", True)]
    for run in runs:
        queue.append(run)
    assert [r.name for r in queue] == ["p", "a0", "b0", "a1"]
    queue.remove(runs[2])
    assert [r.name for r in queue] == ["p", "a0", "a1"] and len(queue) == 3
    assert [queue.popleft().name for _ in range(3)] == ["p", "a0", "a1"] and not queue


def test_a_full_queue_sheds_the_floods_newest_run_instead_of_refusing_another_user():
    from jaxplay.server.runs.scheduler import Run, Scheduler
    from jaxplay.settings import Settings

    scheduler = Scheduler(Settings(local_workers=1, queue_limit=6, max_runs_per_client=100))
    sent: list[dict] = []
    flood = [Run(client_id=f"f{i}", request=wp.RunRequest(code="print(1)", backend="cpu", timeout_s=5), emit=sent.append,
                 session_id="flood") for i in range(6)]
    for run in flood:
        scheduler.submit(run)
    other = Run(client_id="o", request=wp.RunRequest(code="print(2)", backend="cpu", timeout_s=5), emit=sent.append,
                session_id="someone-else")
    scheduler.submit(other)  # accepted: the flood's newest run made room
    assert other.state == "queued" and flood[-1].state == "done"
    assert any(e["type"] == "done" and e["id"] == "f5" and e["status"] == "rejected" for e in sent)


def test_a_client_at_its_limit_is_refused_before_a_full_queue_sheds_anyone():
    scheduler = Scheduler(Settings(local_workers=1, queue_limit=4, max_runs_per_client=2))
    sent: list[dict] = []

    def run(name: str, session: str) -> Run:
        return Run(client_id=name, request=wp.RunRequest(code="print(1)", backend="cpu", timeout_s=5), emit=sent.append,
                   session_id=session)

    queued = [run("a0", "a"), run("a1", "a"), run("b0", "b"), run("b1", "b")]
    for each in queued:
        scheduler.submit(each)
    with pytest.raises(bp.ProtocolError) as refused:
        scheduler.submit(run("a2", "a"))
    assert refused.value.reason == "client_limit"
    assert all(each.state == "queued" for each in queued) and not any(e["type"] == "done" for e in sent)
    assert scheduler.active_runs == {"a": 2, "b": 2}


def test_a_refused_run_leaves_its_clients_count_unchanged():
    scheduler = Scheduler(Settings(local_workers=1, queue_limit=1, max_runs_per_client=5))
    first = Run(client_id="x", request=wp.RunRequest(code="", backend="cpu", timeout_s=5), emit=lambda e: None,
                session_id="s")
    scheduler.submit(first)
    scheduler.accepting = False
    for reason in ("shutting_down", "queue_full"):
        with pytest.raises(bp.ProtocolError) as refused:
            scheduler.submit(Run(client_id="y", request=wp.RunRequest(code="", backend="cpu", timeout_s=5),
                                 emit=lambda e: None, session_id="s"))
        assert refused.value.reason == reason
        scheduler.accepting = True
    assert scheduler.active_runs == {"s": 1}


def test_with_a_broker_the_per_client_limit_holds_on_the_replica_the_browser_uses():
    from jaxplay.server.runs.brokered_scheduler import BrokeredScheduler

    async def scenario():
        # Nothing reaches Redis here: submit only admits, counts and hands the job to the push task.
        scheduler = BrokeredScheduler(Settings(local_workers=0, broker="redis://127.0.0.1:9/0",
                                               max_runs_per_client=2))
        runs = [Run(client_id=f"r{i}", request=wp.RunRequest(code="", backend="cpu", timeout_s=5), emit=lambda e: None,
                    session_id="s") for i in range(3)]
        scheduler.submit(runs[0])
        scheduler.submit(runs[1])
        with pytest.raises(bp.ProtocolError) as refused:
            scheduler.submit(runs[2])
        assert refused.value.reason == "client_limit" and len(scheduler.broker.pending) == 2
        scheduler.finish(runs[0], bp.RunStatus.CANCELLED)
        assert scheduler.active_runs == {"s": 1}
        for pending in scheduler.broker.pending.values():
            pending.run._deadline.cancel()
    run_async(scenario)


def test_sessions_minted_in_bulk_on_one_network_delay_another_network_by_at_most_one_run():
    async def scenario():
        h = Harness(slots=1, max_runs_per_client=100)
        for i in range(40):  # forty sessions of one script, two runs each
            h.submit(f"flood{i}a", f"minted{i}", network="198.51.100.7")
            h.submit(f"flood{i}b", f"minted{i}", network="198.51.100.7")
        h.submit("other", "someone-else", network="203.0.113.5")
        assert h.last_queued("other")["position"] == 2
        order = h.start_order(3)
        assert order[:2] == ["flood0a", "other"]
    run_async(scenario)


def test_within_a_network_its_browsers_take_turns():
    async def scenario():
        h = Harness(slots=1, max_runs_per_client=100)
        for i in range(3):
            h.submit(f"a{i}", "alice", network="nat")
        h.submit("b0", "bob", network="nat")
        h.submit("c0", "carol", network="elsewhere")
        # Networks in turn (nat, elsewhere, nat, ...), and the browsers of nat in turn within its turns.
        assert h.start_order(5) == ["a0", "c0", "b0", "a1", "a2"]
    run_async(scenario)


def test_a_full_queue_sheds_the_busiest_network_before_refusing_another():
    scheduler = Scheduler(Settings(local_workers=1, queue_limit=6, max_runs_per_client=100))
    sent: list[dict] = []

    def run(name: str, session: str, network: str) -> Run:
        return Run(client_id=name, request=wp.RunRequest(code="print(1)", backend="cpu", timeout_s=5), emit=sent.append,
                   session_id=session, network=network)

    flood = [run(f"f{i}", f"minted{i}", "198.51.100.7") for i in range(6)]  # six sessions, one run each
    for each in flood:
        scheduler.submit(each)
    other = run("o", "someone-else", "203.0.113.5")
    scheduler.submit(other)
    assert other.state == "queued" and sum(each.state == "done" for each in flood) == 1


def test_connections_count_per_client_and_per_network():
    scheduler = Scheduler(Settings(local_workers=0, max_connections_per_client=2, max_connections_per_address=3))
    scheduler.attach_client("address:192.0.2.1", "192.0.2.1")
    scheduler.attach_client("address:192.0.2.1", "192.0.2.1")
    with pytest.raises(bp.ProtocolError, match="without the playground's session cookie from your address"):
        scheduler.attach_client("address:192.0.2.1", "192.0.2.1")
    scheduler.attach_client("s", "192.0.2.1")
    with pytest.raises(bp.ProtocolError, match=r"address already has 3 connections open .*the limit is 3\)"):
        scheduler.attach_client("t", "192.0.2.1")
    scheduler.attach_client("t", "192.0.2.2")
    scheduler.detach_client("s", "192.0.2.1")
    scheduler.attach_client("t", "192.0.2.1")


def test_only_a_browser_session_gets_a_private_compile_cache(tmp_path):
    from jaxplay.server.clients.sessions import SessionKeys

    scheduler = Scheduler(Settings(local_workers=0), SessionKeys.load_or_create(tmp_path))

    def options(session: str) -> wp.JobOptions:
        return scheduler.job_options(Run(client_id="r", request=wp.RunRequest(code="", backend="cpu", timeout_s=5),
                                         emit=lambda e: None, session_id=session))

    named = options("0123456789abcdef0123456789abcdef").compile_cache
    assert named is not None and len(named) == 32
    # Everyone at an address without the cookie is one client, but maybe many people: no shared writable cache.
    assert options("address:192.0.2.1").compile_cache is None
    assert "compile_cache" not in wp.encode(wp.ServerJob("r", "", 5, options("address:192.0.2.1")))


def test_a_run_whose_browser_left_before_it_was_queued_is_cancelled_with_its_done():
    """A browser that closes while a hook (the cache, during a database outage) still looks its run up:
    the run was never queued, and cancelling it must still end it with a done (it raised KeyError)."""
    async def scenario():
        h = Harness(slots=1)
        h.submit("queued", "other")  # the queue exists and holds another client's run
        events: list[dict] = []
        unqueued = Run(client_id="mine", request=wp.RunRequest(code="print(1)", backend="cpu", timeout_s=5), emit=events.append,
                       session_id="me")
        h.scheduler.cancel(unqueued)
        assert [(e["type"], e["status"]) for e in events] == [("done", "cancelled")]
        assert [r.client_id for r in h.scheduler.queues["cpu"]] == ["queued"]
    run_async(scenario)
