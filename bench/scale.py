"""One server replica vs two replicas sharing queues and workers through Redis (--broker).

Measures, on this machine, with 4 worker slots in total in every set-up:
- single: one `jaxplay serve`, one local worker with 4 slots, no broker;
- pair:   two `jaxplay serve --broker redis://...`, each with a local worker
          of 2 slots; clients connect to both, alternately;
- cross:  two replicas with Redis, A without workers, B with 4 slots; every
          run is submitted on A and executed on B (the worst case: each event
          crosses Redis).

Figures: throughput of cached runs (identical `print(1)`, answered from the
result cache) and of tiny runs (`print(i)`, fresh) with 8 concurrent clients;
latency p50/p95 of sequential `print(1)` runs (fresh, inspect off).

Also, in the cross set-up: what each replica's /metrics reports as jaxplay_queue_depth while a
backlog of sleeping runs drains, against the Redis list's own length (LLEN) read at the same
moment. The autoscaler scales on that metric, so it must follow the real backlog.

Target: Redis adds at most 3 ms to the p50 latency.
Usage: python bench/scale.py [--runs 60] [--seconds 10]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import itertools
import json
import re
import shutil
import sys
import tempfile
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import websockets

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.stats import percentile  # noqa: E402
from tests.live_server import LiveServer  # noqa: E402
from tests.redis_server import RedisServer  # noqa: E402

CLIENTS = 8


@contextlib.contextmanager
def replicas(kind: str, everyone: list[LiveServer] | None = None,
             redis_urls: list[str] | None = None) -> Iterator[list[LiveServer]]:
    """The servers of one set-up, ready, with 4 worker slots in total; stopped on exit. ``everyone`` and
    ``redis_urls`` (when given) receive every replica and the Redis URL."""
    root = Path(tempfile.mkdtemp(prefix="jaxplay-scale-"))
    redis = RedisServer() if kind != "single" else None
    servers: list[LiveServer] = []
    try:
        if kind == "single":
            servers.append(LiveServer(root / "a", ["--slots", "4"]))
            servers[0].wait_ready()
        else:
            broker = ["--broker", redis.url] if redis else []
            first_args = ["--no-local-worker"] if kind == "cross" else ["--slots", "2"]
            servers.append(LiveServer(root / "a", [*first_args, *broker]))
            servers[0].wait_ready(workers=0 if kind == "cross" else 1)
            servers.append(LiveServer(root / "b", ["--slots", "4" if kind == "cross" else "2", *broker]))
            servers[1].wait_ready()
            deadline = time.monotonic() + 10
            while sum(b["slots"] for b in servers[0].get_json("/api/backends")["backends"]) < 4:
                assert time.monotonic() < deadline, "replica A never learnt of B's worker"
                time.sleep(0.05)
        if everyone is not None:
            everyone.extend(servers)
        if redis_urls is not None and redis is not None:
            redis_urls.append(redis.url)
        yield servers[:1] if kind == "cross" else servers  # cross: submit on A only
    finally:
        for server in servers:
            server.stop()
        if redis is not None:
            redis.stop()
        shutil.rmtree(root, ignore_errors=True)


async def run_once(ws, run_id: str, code: str, fresh: bool) -> float:
    start = time.perf_counter()
    await ws.send(json.dumps({"type": "run", "id": run_id, "code": code, "inspect": False, "fresh": fresh}))
    while True:
        event = json.loads(await ws.recv())
        if event.get("id") == run_id and event["type"] == "done":
            assert event["status"] == "ok", event
            return (time.perf_counter() - start) * 1000


async def latencies(servers: list[LiveServer], runs: int, warmup: int = 5) -> list[float]:
    samples = []
    sockets = [await websockets.connect(s.ws_url) for s in servers]
    try:
        for i in range(warmup + runs):
            ms = await run_once(sockets[i % len(sockets)], f"l{i}", "print(1)", fresh=True)
            if i >= warmup:
                samples.append(ms)
    finally:
        for ws in sockets:
            await ws.close()
    return samples


async def throughput(servers: list[LiveServer], seconds: float, cached: bool) -> float:
    """Runs finished per second by CLIENTS clients, each running one after another."""
    counter = itertools.count()
    if cached:  # record the entry once, then every run is answered from the cache
        async with websockets.connect(servers[0].ws_url) as ws:
            await run_once(ws, "warm", "print(1)", fresh=False)
    done = 0

    async def client(index: int) -> None:
        nonlocal done
        async with websockets.connect(servers[index % len(servers)].ws_url) as ws:
            while time.perf_counter() < stop:
                n = next(counter)
                await run_once(ws, f"t{n}", "print(1)" if cached else f"print({n})", fresh=not cached)
                done += 1

    stop = time.perf_counter() + seconds
    start = time.perf_counter()
    await asyncio.gather(*(client(i) for i in range(CLIENTS)))
    return done / (time.perf_counter() - start)


async def broker_hops(url: str, runs: int) -> list[float]:
    """The Redis work the broker adds to one run, without a sandbox: queue the job, take it, send its
    events back (one pipelined batch) and read them, as the two replicas do."""
    import redis.asyncio as aioredis

    submitter, taker = aioredis.from_url(url), aioredis.from_url(url)
    samples, last = [], "0-0"
    try:
        for i in range(runs + 5):
            start = time.perf_counter()
            async with submitter.pipeline(transaction=False) as pipe:
                pipe.rpush("bench:queue", f"job {i}")
                pipe.hset("bench:session", str(i), "x")
                await pipe.execute()
            await taker.blpop(["bench:queue"], timeout=1)
            async with taker.pipeline(transaction=False) as pipe:
                for kind in ("queued", "started", "stdout", "done"):
                    pipe.xadd("bench:events", {"key": str(i), "event": kind})
                await pipe.execute()
            replies = await submitter.xread({"bench:events": last}, count=100)
            last = replies[0][1][-1][0]
            if i >= 5:
                samples.append((time.perf_counter() - start) * 1000)
    finally:
        await submitter.aclose()
        await taker.aclose()
    return samples


def queue_metric(server: LiveServer) -> float:
    with urllib.request.urlopen(server.http_url + "/metrics", timeout=10) as response:
        text = response.read().decode()
    match = re.search(r'^jaxplay_queue_depth\{backend="cpu"\} (\S+)$', text, flags=re.M)
    return float(match.group(1)) if match else float("nan")


async def backlog_agreement(servers: list[LiveServer], redis_url: str, runs: int = 16) -> list[tuple[int, list[float]]]:
    """(LLEN, each replica's jaxplay_queue_depth) sampled while ``runs`` sleepers drain through 4 slots."""
    import redis.asyncio as aioredis

    from jaxplay.server.runs.broker_keys import queue_key

    client = aioredis.from_url(redis_url)
    # Four browsers (a session each: cookie-less sockets would all be one client, held to its run limit).
    sockets = [await websockets.connect(servers[0].ws_url, additional_headers=servers[0].browser_headers())
               for _ in range(runs // 4)]
    samples = []
    try:
        for n in range(runs):
            code = f"import time\ntime.sleep(1.5)  # {n} {time.time()}"
            await sockets[n % len(sockets)].send(json.dumps({"type": "run", "id": f"b{n}", "code": code,
                                                             "fresh": True}))
        await asyncio.sleep(0.5)
        while True:
            length = await client.llen(queue_key("cpu"))
            reported = await asyncio.gather(*(asyncio.to_thread(queue_metric, s) for s in servers))
            samples.append((length, list(reported)))
            if length == 0 and not any(reported):
                break
            await asyncio.sleep(0.5)
    finally:
        for ws in sockets:
            await ws.close()
        await client.aclose()
    return samples


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=60, help="sequential runs for the latency figures")
    parser.add_argument("--seconds", type=float, default=10.0, help="duration of each throughput figure")
    args = parser.parse_args()
    results = {}
    redis = RedisServer()
    try:
        hops = asyncio.run(broker_hops(redis.url, 500))
    finally:
        redis.stop()
    backlog: list[tuple[int, list[float]]] = []
    for kind in ("single", "pair", "cross"):
        everyone: list[LiveServer] = []
        redis_urls: list[str] = []
        with replicas(kind, everyone, redis_urls) as servers:
            lat = asyncio.run(latencies(servers, args.runs))
            tiny = asyncio.run(throughput(servers, args.seconds, cached=False))
            cached = asyncio.run(throughput(servers, args.seconds, cached=True))
            results[kind] = (percentile(lat, 0.5), percentile(lat, 0.95), tiny, cached)
            if kind == "cross":
                backlog = asyncio.run(backlog_agreement(everyone, redis_urls[0]))

    print(f"{'set-up':<42} {'p50 ms':>8} {'p95 ms':>8} {'tiny runs/s':>12} {'cached runs/s':>14}")
    labels = {"single": "one replica, in-process queue, 4 slots",
              "pair": "two replicas + Redis, 2+2 slots",
              "cross": "two replicas + Redis, every run crosses"}
    for kind, (p50, p95, tiny, cached) in results.items():
        print(f"{labels[kind]:<42} {p50:8.1f} {p95:8.1f} {tiny:12.1f} {cached:14.1f}")
    base = results["single"]
    for kind in ("pair", "cross"):
        p50, p95, tiny, cached = results[kind]
        print(f"{kind} vs single: {p50 - base[0]:+.1f} ms p50, {p95 - base[1]:+.1f} ms p95 end to end; "
              f"throughput x{tiny / base[2]:.2f} tiny, x{cached / base[3]:.2f} cached")
    hop50 = percentile(hops, 0.5)
    print(f"Redis work per run (queue, take, events back), isolated: p50 {hop50:.2f} ms, "
          f"p95 {percentile(hops, 0.95):.2f} ms (target: Redis adds at most 3 ms p50: "
          f"{'met' if hop50 <= 3 else 'NOT met'})")
    print("End-to-end differences smaller than the run-to-run spread of the sandbox path are noise.")
    print("\nQueue metric against the real backlog (cross set-up, 16 sleepers of 1.5 s on 4 slots):")
    print(f"{'LLEN':>6} {'metric A':>9} {'metric B':>9}")
    for length, reported in backlog:
        print(f"{length:6d} " + " ".join(f"{value:9.0f}" for value in reported))
    worst = max((abs(v - length) for length, reported in backlog for v in reported), default=float("nan"))
    print(f"largest difference between a replica's jaxplay_queue_depth and LLEN: {worst:.0f} run(s) "
          "(reads are up to a heartbeat apart; runs a replica has taken but not started count in the metric)")


if __name__ == "__main__":
    main()
