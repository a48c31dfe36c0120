"""The fault suite, brokered side: a replica, or Redis, paused (SIGSTOP) longer than the 5 s after which the
replicas take one another for stopped.

A replica judged gone has its queued jobs dropped and its runs on the others'
workers given up. When it was only paused, it must come back whole: the others
take it for live again at its next heartbeat, it queues its dropped jobs again,
and every run still ends with one ``done`` saying what happened, long before
its deadline. A stalled Redis must make nobody judge anybody.

A has no worker; B has one slot: each run of A's browser crosses Redis to B.
"""

from __future__ import annotations

import asyncio
import json
import signal
import time

import pytest
import redis

from jaxplay.server.runs.broker_keys import queue_key
from tests.live.faults import Client, check_run_contract, output_of, readiness, sleeper, wait_until

pytestmark = pytest.mark.live

PAUSE_S = 8.0  # past the 5 s after which a replica is taken for stopped, and the Redis client's 5 s timeout
SOON_S = 30.0  # a run's deadline is its time limit + 35 s: a run lost in the pause would end only then


def paused(process, seconds: float) -> None:
    process.send_signal(signal.SIGSTOP)
    time.sleep(seconds)
    process.send_signal(signal.SIGCONT)


async def ends_ok(client: Client, run_id: str, text: str) -> None:
    done = (await client.all_done([run_id], SOON_S))[run_id]
    check_run_contract(client.events[run_id])
    assert done["status"] == "ok", done
    assert text in output_of(client.events[run_id])


def test_an_origin_paused_until_taken_for_stopped_queues_its_dropped_job_again(replica_pair):
    a, b = replica_pair

    async def scenario() -> None:
        async with Client(b) as on_b, Client(a) as on_a:
            busy = await on_b.run(sleeper(PAUSE_S + 4))  # B's one slot: A's run waits in Redis meanwhile
            await on_b.started(busy)
            waiting = await on_a.run("print('queued through the pause')")
            await asyncio.sleep(0.5)
            await asyncio.to_thread(paused, a.process, PAUSE_S)  # B drops A's job, taking A for stopped
            await ends_ok(on_a, waiting, "queued through the pause")
            await ends_ok(on_b, busy, "finished")
            fresh = await on_a.run(sleeper(2))  # and A's runs cross to B as before
            await ends_ok(on_a, fresh, "finished")

    asyncio.run(scenario())
    assert "took this one for stopped" in a.log_path.read_text()


def test_an_executor_paused_until_taken_for_stopped_runs_the_next_runs_to_their_end(replica_pair):
    a, b = replica_pair
    asyncio.run(asyncio.to_thread(paused, b.process, PAUSE_S))
    wait_until(lambda: readiness(a)[0] == 200, 30, "A ready again")

    async def scenario() -> None:
        async with Client(a) as on_a:
            run_id = await on_a.run(sleeper(3))  # longer than a heartbeat: A judges B's liveness meanwhile
            await ends_ok(on_a, run_id, "finished")

    asyncio.run(scenario())


def test_a_redis_stall_longer_than_the_client_timeout_takes_no_replica_for_stopped(own_redis, replica_pair):
    """Redis stopped for longer than the client's timeout, with runs waiting and cancels sent meanwhile: each
    replica's heartbeat is carried out late, by the client's retry. A read that late judges nobody: before,
    B read A's heartbeat missing (A's own, held up by the same stall, landed just after) and took A for stopped
    for good: A's waiting runs and every later one ended ``crashed`` at their deadline."""
    a, b = replica_pair
    async def scenario() -> None:
        async with Client(a) as hold, Client(a) as on_a, Client(a) as cancelling, Client(a) as during:
            held = await hold.run(sleeper(PAUSE_S + 4))  # B's slot: the others wait in Redis through the stall
            await hold.started(held)
            waiting = [await on_a.run(f"print('waited {n}')") for n in range(3)]
            dropped = [await cancelling.run(f"print('cancelled {n}')") for n in range(4)]
            queued = redis.Redis.from_url(own_redis.url).llen
            await asyncio.to_thread(wait_until, lambda: queued(queue_key("cpu")) == 7, 20, "every job in Redis")

            async def cancel(n: int) -> None:  # each withdrawal waits on Redis beside A's heartbeat
                await cancelling.ws.send(json.dumps({"type": "cancel", "id": dropped[n]}))

            await cancel(0)
            own_redis.pause()
            stopped_at = time.monotonic()
            await cancel(1)
            await asyncio.sleep(1.0)
            await cancel(2)
            sent_during = await during.run("print('sent during the stall')")
            await asyncio.sleep(PAUSE_S - 0.3 - (time.monotonic() - stopped_at))
            await cancel(3)
            own_redis.resume()
            for n, run_id in enumerate(waiting):
                await ends_ok(on_a, run_id, f"waited {n}")
            done = (await during.all_done([sent_during], SOON_S))[sent_during]
            assert done["status"] in ("ok", "rejected"), done  # rejected saying Redis could not take it
            for done in (await cancelling.all_done(dropped, SOON_S)).values():
                assert done["status"] == "cancelled", done
            await ends_ok(hold, held, "finished")
            fresh = await on_a.run(sleeper(3))
            await ends_ok(on_a, fresh, "finished")

    asyncio.run(scenario())
    for server in (a, b):
        assert "stopped (no heartbeat" not in server.log_path.read_text(), server.http_url
