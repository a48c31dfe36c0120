"""Who a cached result answers: its own browser session at first, everyone once a later run agreed.

Against real SQLite and PostgreSQL, driven as in test_storage_result_cache.py
(the scheduler's own ``Run.send`` and ``finish``). The live path, with real
programs reading the clock and the host through every route, is
tests/security/test_result_cache_trust.py.
"""

from __future__ import annotations

import asyncio

import pytest

from jaxplay import browser_protocol as bp
from jaxplay.server.clients.identity import ADDRESS_CLIENT_PREFIX
from jaxplay.server.runs.result_verification import Verdict, content_digest, judge
from jaxplay.server.storage.factory import open_storage
from tests.unit.test_storage_result_cache import RECORDED, Harness, entries

A, B, C = "a" * 32, "b" * 32, "c" * 32
ADDRESS = ADDRESS_CLIENT_PREFIX + "192.0.2.7"


def printed(text: str) -> list[dict]:
    return [RECORDED[0], {"type": "stdout", "text": text}]


def test_what_two_runs_must_agree_on_leaves_out_only_what_the_sandbox_measured():
    compiled = {"type": "compiled", "fn": "f", "jaxpr": "{ lambda ; }", "phases_ms": {"compile": 131.4},
                "persistent_cache_hit": False, "lowered_module_cached": False}
    roofline = {"type": "roofline", "peak": {"flops_per_s": 1e11}, "functions": [
        {"fn": "f", "flops": 3.0, "median_ms": 0.01, "achieved_flops_per_s": 3e5, "fraction_of_roof": 0.1,
         "bound": "memory", "intensity": 0.125}]}
    base = content_digest([RECORDED[0], {"type": "stdout", "text": "a"}, {"type": "stdout", "text": "b\n"},
                           compiled, roofline], "ok")
    # Timings, rates, cache hits, the worker's peak and where it ran differ: the same content.
    other_times = [{**RECORDED[0], "devices": {"worker": "w2"}}, {"type": "stdout", "text": "ab\n"},
                   {**compiled, "phases_ms": {"compile": 12.0}, "persistent_cache_hit": True,
                    "lowered_module_cached": True},  # the shared layer filled between the two runs
                   {**roofline, "peak": {"flops_per_s": 2e11}, "functions": [
                       {**roofline["functions"][0], "median_ms": 0.02, "achieved_flops_per_s": 1.5e5,
                        "fraction_of_roof": 0.05, "bound": "compute"}]}]
    assert content_digest(other_times, "ok") == base
    # Events of different types may interleave differently from run to run.
    assert content_digest([RECORDED[0], compiled, {"type": "stdout", "text": "ab\n"}, roofline], "ok") == base
    # What the program made is compared, wherever it shows.
    assert content_digest([RECORDED[0], {"type": "stdout", "text": "ab!\n"}, compiled, roofline], "ok") != base
    assert content_digest([RECORDED[0], {"type": "stdout", "text": "ab\n"}, {**compiled, "jaxpr": "{ lambda ; 7 }"},
                           roofline], "ok") != base
    assert content_digest([RECORDED[0], {"type": "stdout", "text": "ab\n"}, compiled,
                           {**roofline, "functions": [{**roofline["functions"][0], "flops": 4.0}]}], "ok") != base
    assert content_digest([RECORDED[0], {"type": "stdout", "text": "a"}, {"type": "stderr", "text": "b\n"},
                           compiled, roofline], "ok") != base
    assert content_digest([RECORDED[0], {"type": "stdout", "text": "ab\n"}, compiled, roofline], "error") != base


def test_text_a_program_writes_under_a_measured_name_is_compared():
    """A run writes its own events (its event channel is the program's): under a measured name it may put
    text, not a figure. A recalibrated peak differs only in its figures, and still agrees."""
    peak = {"flops_per_s": 1e11, "bytes_per_s": 2e10, "device_kind": "cpu", "measured_at": "2026-11-27T16:00:01Z",
            "how": "float32 matmul 1024x1024 (2.15e+09 FLOP), the best of 5 samples of 12 and 40 calls"}
    roofline = {"type": "roofline", "peak": peak, "functions": [], "left_out": 0}
    base = content_digest([RECORDED[0], roofline, {"type": "timing", "label": "f", "mean_ms": 1.5}], "ok")
    recalibrated = {**peak, "flops_per_s": 9e10, "measured_at": "2026-11-28T22:10:00Z",
                    "how": "float32 matmul 1024x1024 (2.15e+09 FLOP), the best of 5 samples of 11 and 38 calls"}
    assert content_digest([RECORDED[0], {**roofline, "peak": recalibrated},
                           {"type": "timing", "label": "f", "mean_ms": 0.9}], "ok") == base
    assert content_digest([RECORDED[0], {**roofline, "peak": {**peak, "how": "run af48cb"}},
                           {"type": "timing", "label": "f", "mean_ms": 1.5}], "ok") != base
    assert content_digest([RECORDED[0], roofline, {"type": "timing", "label": "f", "mean_ms": "run af48cb"}],
                          "ok") != base
    assert content_digest([RECORDED[0], {**roofline, "functions": [{"fn": "f", "bound": "run af48cb"}]},
                           {"type": "timing", "label": "f", "mean_ms": 1.5}], "ok") != \
        content_digest([RECORDED[0], {**roofline, "functions": [{"fn": "f", "bound": "memory"}]},
                        {"type": "timing", "label": "f", "mean_ms": 1.5}], "ok")


def test_a_result_answers_its_own_session_until_a_later_run_agrees(harness: Harness):
    async def scenario():
        await harness.execute("print(1)", session=A)
        assert (await harness.submit("print(1)", session=A))[2]  # its own session: at once
        for other in (B, ADDRESS, ""):
            run, _, answered = await harness.submit("print(1)", session=other)
            assert not answered, other
            harness.scheduler.cancel(run)
        await harness.execute("print(1)", session=B)  # began after A's ended, printed the same
        for anyone in (C, ADDRESS, ""):
            assert (await harness.submit("print(1)", session=anyone))[2], anyone
        await harness.cache.drain()

    harness.run(scenario)


def test_a_cookie_less_clients_result_answers_no_one_until_verified(harness: Harness):
    """An address client may be a whole classroom behind one address: no one else's run is its own."""
    async def scenario():
        await harness.execute("print(2)", session=ADDRESS)
        assert await entries(harness) == 0
        run, _, answered = await harness.submit("print(2)", session=ADDRESS)
        assert not answered
        harness.scheduler.cancel(run)
        await harness.execute("print(2)", session=ADDRESS, fresh=True)
        assert (await harness.submit("print(2)", session=ADDRESS))[2]
        await harness.cache.drain()

    harness.run(scenario)


def test_runs_that_differ_are_never_shared_and_take_back_their_sessions_entries(harness: Harness):
    async def scenario():
        await harness.execute("load()", events=printed("0.52 0.48\n"), session=A)
        await harness.execute("load()", events=printed("0.61 0.50\n"), session=B)
        for anyone in (A, B, C):  # A's entry is withdrawn too: its program is not what a run shows again
            run, _, answered = await harness.submit("load()", session=anyone)
            assert not answered, anyone
            harness.scheduler.cancel(run)
        # Two later runs that happen to agree do not make it shareable.
        await harness.execute("load()", events=printed("0.61 0.50\n"), session=C)
        await harness.execute("load()", events=printed("0.61 0.50\n"), session=C, fresh=True)
        run, _, answered = await harness.submit("load()", session="d" * 32)
        assert not answered and await entries(harness) == 0
        harness.scheduler.cancel(run)
        await harness.cache.drain()

    harness.run(scenario)


def test_a_fresh_run_that_differs_withdraws_a_shared_result(harness: Harness):
    async def scenario():
        await harness.execute_verified("maybe()", events=printed("same\n"), session=A)
        assert (await harness.submit("maybe()", session=B))[2]
        await harness.execute("maybe()", events=printed("other\n"), session=C, fresh=True)
        run, _, answered = await harness.submit("maybe()", session=B)
        assert not answered and await entries(harness) == 0
        harness.scheduler.cancel(run)
        await harness.cache.drain()

    harness.run(scenario)


def test_runs_that_overlapped_in_time_do_not_verify_each_other(harness: Harness):
    """Two runs at the same moment read the same second of the wall clock: the one that verifies
    must begin after the first has ended."""
    async def scenario():
        first, _, _ = await harness.submit("clock()", session=A)
        second, _, _ = await harness.submit("clock()", session=B)
        for run in (first, second):
            run.worker, run.state = harness.link, "running"
            run.send(RECORDED[0])
        for run in (first, second):
            for event in RECORDED[1:]:
                run.send(event)
            harness.scheduler.finish(run, bp.RunStatus.OK, None, 250.0)
            await harness.cache.drain()
        run, _, answered = await harness.submit("clock()", session=C)
        assert not answered
        harness.scheduler.cancel(run)
        await harness.execute("clock()", session=C)  # later: it verifies
        assert (await harness.submit("clock()", session="d" * 32))[2]
        await harness.cache.drain()

    harness.run(scenario)


@pytest.fixture
def harness(database_url, tmp_path):
    return Harness(database_url, tmp_path)



@pytest.mark.parametrize("shared_before", [True, False], ids=["shared", "candidate"])
def test_a_run_judged_while_another_replica_marks_the_program_diverged_does_not_share_it(postgres, tmp_path,
                                                                                         shared_before):
    """Two replicas judge runs of one program at once: one run differs (its transaction withdraws the
    program and marks it diverged), the other agrees with what the first saw. Before, the agreeing run read
    the old state, waited on the withdrawal's row lock, and then stored the program as shared again, beside
    its divergence mark: shared though two runs had differed."""
    url = postgres.new_database()
    diverging, agreeing = open_storage(url, tmp_path / "a"), open_storage(url, tmp_path / "b")
    key, agreed, differed = "k" * 64, "d1", "d2"

    async def store_shared(tx) -> None:
        await tx.execute("INSERT INTO result_cache (key, size, elapsed_ms, cached_at, last_used, recorded, worker, "
                         "digest, program) VALUES (?, 1, 1.0, '', 0, ?, 'w', ?, ?)", (key, b"x", agreed, key))

    async def scenario() -> tuple[Verdict, bool]:
        await diverging.open()
        await agreeing.open()
        try:
            if shared_before:
                await diverging.transaction(store_shared, durable=True)
            else:
                await diverging.transaction(lambda tx: judge(tx, key, agreed, 1.0, 2.0), durable=True)
            judged, release = asyncio.Event(), asyncio.Event()

            async def differ(tx) -> None:
                assert await judge(tx, key, differed, 3.0, 4.0) is Verdict.DIVERGED
                judged.set()
                await release.wait()  # holds its transaction open while the other replica judges

            async def agree(tx) -> Verdict:
                verdict = await judge(tx, key, agreed, 3.0, 4.0)
                if verdict is Verdict.VERIFIED:
                    await store_shared(tx)
                return verdict

            withdrawal = asyncio.ensure_future(diverging.transaction(differ, durable=True))
            await judged.wait()
            verification = asyncio.ensure_future(agreeing.transaction(agree, durable=True))
            await asyncio.sleep(0.5)
            release.set()
            await withdrawal
            verdict = await verification
            shared = await agreeing.fetch_one("SELECT key FROM result_cache WHERE key = ?", (key,))
            return verdict, shared is not None
        finally:
            await diverging.close()
            await agreeing.close()

    verdict, shared = asyncio.run(scenario())
    assert (verdict, shared) == (Verdict.DIVERGED, False)
