"""The result cache against real SQLite and PostgreSQL: what is stored, what is answered, how fast, what is evicted.

Runs are driven through the scheduler's own ``Run.send`` and ``finish`` (the
path worker events take); the worker link is a plain record of a worker's
hello, since no code executes here.
"""

from __future__ import annotations

import asyncio
import base64
import gc
import os
import time
from pathlib import Path
from typing import Any

import pytest

from jaxplay import browser_protocol as bp
from jaxplay import worker_protocol as wp
from jaxplay.server.runs.result_cache import ResultCache
from jaxplay.server.runs.run import Run, WorkerLink, before_dispatch
from jaxplay.server.runs.scheduler import Scheduler
from jaxplay.server.storage.factory import open_storage
from jaxplay.settings import Settings

RECORDED = [
    {"type": "started", "backend": "cpu", "devices": {"kind": "cpu", "count": 8, "worker": "w"}, "jax_version": "0.10.2"},
    {"type": "stdout", "text": "[0 2 4]\n"},
    {"type": "compiled", "fn": "f", "jaxpr": "{ lambda ; a:i32[3]. let b = mul a 2 in (b,) }"},
    {"type": "display", "mime": "text/plain", "data": "Array([1., 1.])", "role": "result"},
]


def hello(**changes) -> wp.WorkerHello:
    fields = {"token": "", "name": "w", "backend": "cpu", "device_kind": "cpu", "device_count": 8,
              "jax_version": "0.10.2", "jaxlib_version": "0.10.2", "slots": 2, **changes}
    return wp.WorkerHello(**fields)


async def no_send(text: str) -> None:
    return None


class Harness:
    def __init__(self, database_url: str, data_dir: Path, limit_bytes: int = 1 << 20) -> None:
        self.storage = open_storage(database_url, data_dir)
        self.scheduler = Scheduler(Settings(local_workers=0))
        self.link = WorkerLink(hello=hello(), send=no_send, trusted=True)
        self.scheduler.workers.append(self.link)
        self.cache = ResultCache(self.storage, self.scheduler, limit_bytes)

    def run(self, scenario) -> Any:
        """``scenario()`` with the storage open, all in one event loop (a PostgreSQL connection lives in one)."""
        async def main():
            await self.storage.open()
            try:
                return await scenario()
            finally:
                await self.cache.drain()
                await self.storage.close()

        return asyncio.run(main())

    async def submit(self, code: str, fresh: bool = False, timeout_s: float = 30.0, session: str = "",
                     **options) -> tuple[Run, list[dict], bool]:
        """Offer a run to the cache as the browser socket does; returns (run, events sent, answered)."""
        sent: list[dict] = []
        request = wp.RunRequest(code=code, backend="cpu", timeout_s=timeout_s, options=wp.RunOptions(**options),
                                fresh=fresh)
        run = Run(client_id="c1", request=request, emit=sent.append, session_id=session)
        answered = await before_dispatch(run, None, [self.cache])  # type: ignore[arg-type]
        return run, sent, answered

    async def execute(self, code: str, events=RECORDED, status=bp.RunStatus.OK, elapsed_ms=250.0, session: str = "",
                      read_session_cache: bool = False, **options):
        """A run the cache does not answer, executed by the (pretend) worker; waits for its cache write."""
        run, sent, answered = await self.submit(code, session=session, **options)
        assert not answered
        run.send(bp.queued_event("c1", 1))
        run.worker, run.state = self.link, "running"
        if not events or events[0]["type"] != "started":  # every run the worker starts says so first
            run.send(bp.started_event("c1", "cpu", self.link.describe(), "0.10.2"))
        for event in events:
            run.send(event)
        # As Scheduler.worker_finished marks the done of a run that could load its session's own entries.
        self.scheduler.finish(run, status, None, elapsed_ms,
                              **({"read_session_cache": True} if read_session_cache else {}))
        await self.cache.drain()
        return sent

    async def execute_verified(self, code: str, session: str = "", **fields) -> list[dict]:
        """``code`` run twice, the second run starting after the first ended and agreeing with it:
        the result then answers anyone (server/runs/result_verification.py)."""
        await self.execute(code, session=session, **fields)
        return await self.execute(code, session=session, fresh=True, **fields)


@pytest.fixture
def harness(database_url, tmp_path):
    return Harness(database_url, tmp_path)


def incompressible(size: int) -> str:
    return base64.b64encode(os.urandom(size * 3 // 4)).decode()


async def entries(h: Harness) -> int:
    return (await h.storage.fetch_one("SELECT COUNT(*) AS n FROM result_cache"))["n"]


def test_an_identical_run_is_answered_from_the_cache_with_the_same_events(harness):
    async def scenario():
        live = await harness.execute_verified("print(1)")
        run, cached, answered = (await harness.submit("print(1)"))
        assert answered and run.state == "done"
        # Everything the worker sent is replayed in order; the queue position is not.
        assert [{k: v for k, v in e.items() if k != "id"} for e in cached[:-1]] == RECORDED
        assert all(e["id"] == "c1" for e in cached)
        done, live_done = cached[-1], live[-1]
        assert done["type"] == "done" and done["status"] == "ok" and done["elapsed_ms"] == live_done["elapsed_ms"]
        assert done["cached"] is True and done["cached_at"].endswith("Z") and "cached" not in live_done
        await harness.cache.drain()

    harness.run(scenario)


def test_a_large_answer_replays_every_event_in_order(harness):
    # Its speed (under 20 ms server side) is measured by bench/sharing.py, not asserted here.
    big = [RECORDED[0]] + [{"type": "stdout", "text": f"line {i} " + "x" * 90 + "\n"} for i in range(5000)]

    async def scenario():
        await harness.execute_verified("big()", events=big)
        _, sent, answered = await harness.submit("big()")
        assert answered and [{k: v for k, v in e.items() if k != "id"} for e in sent[:-1]] == big
        await harness.cache.drain()

    harness.run(scenario)


def test_a_burst_is_answered_by_the_first_later_run_that_agrees(harness):
    """A fair queue may start a later identical run before the first to arrive. The first to end
    answers no other session; a run that began after it ended and agrees answers every identical run
    still waiting, and the runs already running go on."""
    async def scenario():
        harness.link.free_slots = 0  # everything waits until the test starts a run by hand
        runs = []
        for _ in range(5):
            run, sent, answered = await harness.submit("burst()")
            assert not answered
            harness.scheduler.submit(run)
            runs.append((run, sent))
        (first, first_sent), (second, _), (third, _), (fourth, fourth_sent), (last, _) = runs

        def start(run: Run) -> None:
            assert harness.scheduler.withdraw(run)
            run.worker, run.state = harness.link, "running"
            run.send(RECORDED[0])

        for started in (last, second):  # the queue picks the last and the second to arrive
            start(started)
        for event in RECORDED[1:]:
            last.send(event)
        harness.scheduler.finish(last, bp.RunStatus.OK, None, 250.0)
        await harness.cache.drain()
        assert first.state == third.state == fourth.state == "queued"  # one run vouches for nothing
        start(third)  # after the first ended
        for run in (second, third):  # the second began before the first ended: it verifies nothing
            for event in RECORDED[1:]:
                run.send(event)
            harness.scheduler.finish(run, bp.RunStatus.OK, None, 250.0)
            await harness.cache.drain()
            if run is second:
                assert first.state == fourth.state == "queued"
        for waiting, sent in ((first, first_sent), (fourth, fourth_sent)):
            assert waiting.state == "done" and sent[-1]["cached"] is True
            replayed = [{k: v for k, v in e.items() if k != "id"} for e in sent if e["type"] != "queued"]
            assert replayed[:-1] == RECORDED
        assert len(harness.scheduler.queues["cpu"]) == 0 and harness.cache._bursts == {}

    harness.run(scenario)


def test_fresh_runs_on_the_worker_and_refreshes_the_entry(harness):
    async def scenario():
        await harness.execute_verified("print(1)")
        first = (await harness.storage.fetch_one("SELECT elapsed_ms FROM result_cache"))["elapsed_ms"]
        run, sent, answered = (await harness.submit("print(1)", fresh=True))
        assert not answered and sent == [] and run.state == "queued"
        await harness.execute("print(1)", fresh=True, elapsed_ms=99.0)
        assert await entries(harness) == 1 and first == 250.0
        assert (await harness.storage.fetch_one("SELECT elapsed_ms FROM result_cache"))["elapsed_ms"] == 99.0

    harness.run(scenario)


@pytest.mark.parametrize("status", [bp.RunStatus.ERROR, bp.RunStatus.TIMEOUT, bp.RunStatus.CANCELLED,
                                    bp.RunStatus.CRASHED])
def test_only_successful_runs_are_cached(harness, status):
    async def scenario():
        await harness.execute("raise ValueError()", status=status)
        assert await entries(harness) == 0 and not (await harness.submit("raise ValueError()"))[2]

    harness.run(scenario)


def test_a_run_that_read_the_clock_or_randomness_is_not_cached(harness):
    nondeterministic = RECORDED[:2] + [{"type": "nondeterministic", "kind": "time", "source": "time.time", "line": 1}]

    async def scenario():
        await harness.execute("import time; print(time.time())", events=nondeterministic)
        assert await entries(harness) == 0

    harness.run(scenario)


def test_anything_that_may_change_the_output_is_part_of_the_key(harness):
    async def scenario():
        await harness.execute_verified("print(2)")
        assert (await harness.submit("print(2)"))[2]
        assert not (await harness.submit("print(2) "))[2]
        assert not (await harness.submit("print(2)", inspect=False))[2]
        for changed in ({"device_count": 4}, {"jax_version": "0.10.3"}, {"jaxlib_version": "0.10.3"},
                        {"device_kind": "NVIDIA H100"}, {"platform_version": "cuda 12.8"}):
            harness.link.hello = hello(**changed)
            assert not (await harness.submit("print(2)"))[2], changed
        harness.link.hello = hello()
        harness.scheduler.workers.clear()  # no worker: the environment is unknown, so no answer
        assert not (await harness.submit("print(2)"))[2]
        await harness.cache.drain()

    harness.run(scenario)


def test_a_recorded_run_slower_than_the_requested_limit_is_run_again(harness):
    async def scenario():
        await harness.execute_verified("slow()", elapsed_ms=5000.0)
        assert not (await harness.submit("slow()", timeout_s=2.0))[2]
        assert (await harness.submit("slow()", timeout_s=10.0))[2]
        await harness.cache.drain()

    harness.run(scenario)


def test_least_recently_used_entries_are_evicted_beyond_the_size_limit(database_url, tmp_path):
    h = Harness(database_url, tmp_path, limit_bytes=20_000)  # room for about eight 2.3 KB entries

    async def scenario():
        for i in range(12):
            await h.execute_verified(f"step({i})", events=[{"type": "stdout", "text": incompressible(3000)}])
            time.sleep(0.002)
            if i == 7:
                assert (await h.submit("step(0)"))[2]  # step(0) becomes the most recently used
                await h.cache.drain()
        stats = await h.cache.stats()
        assert 15_000 < stats["bytes"] <= 20_000
        kept = {i for i in range(12) if (await h.submit(f"step({i})"))[2]}
        assert kept == {0, *range(5, 12)}

    h.run(scenario)


def test_an_entry_larger_than_an_eighth_of_the_cache_is_not_stored(database_url, tmp_path):
    h = Harness(database_url, tmp_path, limit_bytes=64_000)

    async def scenario():
        await h.execute("huge()", events=[{"type": "stdout", "text": incompressible(12_000)}])
        assert await entries(h) == 0

    h.run(scenario)


def test_the_cache_survives_a_restart(database_url, tmp_path):
    async def record():
        await h.execute_verified("print(5)")

    async def answer():
        return (await again.submit("print(5)"))[2]

    h = Harness(database_url, tmp_path)
    h.run(record)
    again = Harness(database_url, tmp_path)
    assert again.run(answer)


def test_a_zero_limit_turns_the_cache_off(database_url, tmp_path):
    h = Harness(database_url, tmp_path, limit_bytes=0)

    async def scenario():
        run, _, answered = await h.submit("print(1)")
        assert not answered and run not in h.cache._recordings

    h.run(scenario)


def test_an_unreadable_entry_costs_only_the_cache_not_the_run(harness):
    async def scenario():
        await harness.execute_verified("print(9)")
        await harness.storage.transaction(lambda tx: tx.execute("UPDATE result_cache SET recorded = ?", (b"\x00\xff",)),
                                          durable=False)
        run, sent, answered = await harness.submit("print(9)")
        assert not answered and sent == [] and run.state == "queued" and run in harness.cache._recordings

    harness.run(scenario)


@pytest.mark.attack("keys and privileges")
def test_an_untrusted_workers_result_is_never_cached(harness):
    """A remote worker (its token could be stolen) answers only its own run, never later users'."""
    async def scenario():
        harness.link.trusted = False
        await harness.execute("print('forged?')")
        _, _, answered = await harness.submit("print('forged?')")
        assert not answered and await entries(harness) == 0

    harness.run(scenario)


@pytest.mark.attack("keys and privileges")
def test_a_workers_entries_can_be_purged_and_are_then_never_served(harness):
    """Trust in a worker can end: what it recorded is taken back, and only that."""
    from jaxplay.server.runs import result_cache

    async def scenario():
        await harness.execute_verified("print('from w')")
        harness.link = WorkerLink(hello=hello(name="remote-1"), send=no_send, trusted=True)
        harness.scheduler.workers[:] = [harness.link]
        await harness.execute_verified("print('from remote-1')")
        assert await result_cache.entries_by_worker(harness.storage) == {"remote-1": 1, "w": 1}
        assert await result_cache.purge(harness.storage, "remote-1") == 1
        _, _, answered = await harness.submit("print('from remote-1')")
        assert not answered  # runs again, on a worker
        _, _, answered = await harness.submit("print('from w')")
        assert answered
        assert await result_cache.purge(harness.storage, None) == 1 and await entries(harness) == 0

    harness.run(scenario)


def test_purge_results_lists_and_deletes_beside_the_database(tmp_path):
    """The operator's command, on the SQLite file a server uses."""
    import subprocess
    import sys

    h = Harness("", tmp_path)

    async def record():
        await h.execute_verified("print(1)")
        h.link = WorkerLink(hello=hello(name="remote-1"), send=no_send, trusted=True)
        h.scheduler.workers[:] = [h.link]
        await h.execute_verified("print(2)")

    h.run(record)

    def jaxplay(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([sys.executable, "-m", "jaxplay.cli", "purge-results", "--data-dir", str(tmp_path), *args],
                              capture_output=True, text=True, timeout=60, cwd=Path(__file__).resolve().parents[2])

    listing = jaxplay()
    assert listing.returncode == 0 and "remote-1: 1" in listing.stdout and "w: 1" in listing.stdout
    purged = jaxplay("--worker", "remote-1")
    assert purged.returncode == 0 and "Removed 1 cached result(s) recorded by worker 'remote-1'" in purged.stdout
    unknown = jaxplay("--worker", "nobody")
    assert unknown.returncode == 0 and "Removed 0" in unknown.stdout and "'w'" in unknown.stderr
    assert "remote-1" not in jaxplay().stdout
    assert jaxplay("--worker", "w", "--all").returncode == 2  # one or the other


POISONED = [RECORDED[0], {"type": "stdout", "text": "[-7. 93. 193.]\n"}]


@pytest.mark.attack("compile cache")
def test_a_result_that_may_rest_on_its_sessions_own_cache_answers_that_session_alone(harness):
    """A run that could load what its session's earlier runs wrote into the compile cache (code JAX
    executes) may have computed anything they planted: no other session is ever answered with it."""
    async def scenario():
        await harness.execute("honest()", events=POISONED, session="a" * 32, read_session_cache=True)
        for session in ("b" * 32, ""):
            run, _, answered = await harness.submit("honest()", session=session)
            assert not answered  # another session runs it for real
            harness.scheduler.finish(run, bp.RunStatus.CANCELLED)
        _, sent, answered = await harness.submit("honest()", session="a" * 32)
        assert answered and sent[1]["text"] == POISONED[1]["text"]  # its own session: its own doing
        await harness.execute_verified("honest()", session="c" * 32)  # runs that read no session's entries
        _, sent, answered = await harness.submit("honest()", session="b" * 32)
        assert answered and sent[1] == {**RECORDED[1], "id": "c1"}  # answers anyone
        await harness.cache.drain()

    harness.run(scenario)


@pytest.mark.attack("compile cache")
def test_a_run_that_read_its_sessions_cache_answers_no_other_sessions_burst(harness):
    async def scenario():
        harness.link.free_slots = 0
        runs = []
        for session in ("a" * 32, "b" * 32, "a" * 32):
            run, sent, answered = await harness.submit("burst()", session=session)
            assert not answered
            harness.scheduler.submit(run)
            runs.append((run, sent))
        (first, _), (other, other_sent), (same, same_sent) = runs
        assert harness.scheduler.withdraw(first)
        first.worker, first.state = harness.link, "running"
        for event in POISONED:
            first.send(event)
        harness.scheduler.finish(first, bp.RunStatus.OK, None, 250.0, read_session_cache=True)
        assert same.state == "done" and same_sent[-1]["cached"] is True  # the same session's waiting run
        assert other.state == "queued" and not any(e["type"] == "stdout" for e in other_sent)
        harness.scheduler.cancel(other)
        await harness.cache.drain()

    harness.run(scenario)


def test_runs_refused_before_the_queue_leave_nothing_behind_in_the_cache(harness):
    """A browser at its limit (or a server shutting down) has each run refused after the cache looked it up:
    such a run never sends a done. The cache held every one in its bursts, for good, one per refusal."""
    async def scenario():
        harness.scheduler.accepting = False
        for i in range(50):
            run, _, answered = await harness.submit(f"print({i})")
            assert not answered
            with pytest.raises(bp.ProtocolError):
                harness.scheduler.submit(run)
        del run
        gc.collect()
        assert harness.cache._bursts == {} and len(harness.cache._recordings) == 0

    harness.run(scenario)


def test_a_passes_request_is_neither_answered_nor_recorded(harness):
    async def scenario():
        await harness.execute("print(3)")
        run, _, answered = await harness.submit("print(3)", passes=wp.PassesTarget(key="1.1", fn="f"))
        assert not answered and run not in harness.cache._recordings

    harness.run(scenario)
