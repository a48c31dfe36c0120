"""Sharing and the result cache, measured on a real server with its real sandboxed worker.

Measures, in one run on this machine:
- create: ``POST /api/snippets`` of N distinct snippets (each committed with
  an fsync before the answer), one keep-alive connection, sequential;
- load: ``GET /api/snippets/{id}`` of each of them;
- page: ``GET /s/{id}`` (the share page with the snippet in its boot data);
- one JAX snippet run fresh (``"fresh": true``, executed by the worker) vs
  answered from the result cache, alternating, from ``run`` sent to ``done``
  received over /ws, and the cache's own answer time inside the server
  (from its debug log).

Targets: a cached answer under 20 ms server side.
Usage: python bench/sharing.py [--snippets 1000] [--runs 20]
"""

from __future__ import annotations

import argparse
import asyncio
import http.client
import json
import re
import sys
import time
from pathlib import Path

import websockets

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.stats import percentile  # noqa: E402
from tests.live_server import LiveServer, running_server  # noqa: E402

SNIPPET = """\
import jax, jax.numpy as jnp

@jax.jit
def loss(w, x):
    return jnp.mean(jnp.tanh(x @ w) ** 2)

x = jnp.ones((64, 32))
w = jnp.full((32, 16), 0.01)
print(loss(w, x), jax.grad(loss)(w, x).shape)
"""
CACHE_LOG = re.compile(r"answered from the cache in ([0-9.]+) ms")


def line(name: str, samples: list[float]) -> str:
    return (f"{name:<34} n={len(samples):<5} p50={percentile(samples, 0.5):8.2f} ms  "
            f"p95={percentile(samples, 0.95):8.2f} ms")


def http_timings(server: LiveServer, count: int) -> tuple[list[float], list[float], list[float]]:
    connection = http.client.HTTPConnection("127.0.0.1", server.port, timeout=30)
    creates, loads, pages, ids = [], [], [], []
    for i in range(count):
        body = json.dumps({"code": f"# bench {i}\n{SNIPPET}", "backend": "cpu", "settings": {"inspect": True}})
        start = time.perf_counter()
        connection.request("POST", "/api/snippets", body, {"content-type": "application/json"})
        response = connection.getresponse()
        answer = json.loads(response.read())
        creates.append((time.perf_counter() - start) * 1000)
        assert response.status == 201, answer
        ids.append(answer["id"])
    for path, samples in (("/api/snippets/", loads), ("/s/", pages)):
        for snippet_id in ids:
            start = time.perf_counter()
            connection.request("GET", path + snippet_id)
            response = connection.getresponse()
            response.read()
            samples.append((time.perf_counter() - start) * 1000)
            assert response.status == 200, (path, response.status)
    connection.close()
    return creates, loads, pages


async def run_timings(server: LiveServer, runs: int) -> tuple[list[float], list[float]]:
    fresh, cached = [], []
    async with websockets.connect(server.ws_url, max_size=None) as ws:
        # A result answers others once a second run agreed with the first: the first fresh run of the
        # loop is that second one.
        await ws.send(json.dumps({"type": "run", "id": "first", "code": SNIPPET, "fresh": True}))
        while not ((event := json.loads(await ws.recv()))["type"] == "done" and event["id"] == "first"):
            pass
        for i in range(2 * runs + 1):
            want_fresh = i % 2 == 0
            start = time.perf_counter()
            await ws.send(json.dumps({"type": "run", "id": f"r{i}", "code": SNIPPET, "fresh": want_fresh}))
            while True:
                event = json.loads(await ws.recv())
                if event["type"] == "done" and event["id"] == f"r{i}":
                    break
            elapsed = (time.perf_counter() - start) * 1000
            assert event["status"] == "ok", event
            assert bool(event.get("cached")) != want_fresh, event
            if i > 0:  # the first fresh run also warms the worker
                (fresh if want_fresh else cached).append(elapsed)
            await asyncio.sleep(0.2)  # let the fresh result's cache write land
    return fresh, cached


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--snippets", type=int, default=1000)
    parser.add_argument("--runs", type=int, default=20)
    args = parser.parse_args()
    with running_server(["--log-level", "debug"]) as server:
        creates, loads, pages = http_timings(server, args.snippets)
        fresh, cached = asyncio.run(run_timings(server, args.runs))
        inside = [float(m) for m in CACHE_LOG.findall(server.log_path.read_text())]
    print(line("create snippet (POST, fsync)", creates))
    print(line("load snippet (GET /api/snippets)", loads))
    print(line("share page (GET /s/{id})", pages))
    print(line("run, fresh (worker), send->done", fresh))
    print(line("run, cached, send->done", cached))
    print(line("cached answer inside the server", inside))
    ratio = percentile(fresh, 0.5) / percentile(cached, 0.5)
    met = "met" if percentile(inside, 0.95) < 20 else "MISSED"
    print(f"cached vs fresh (p50): {ratio:.0f}x faster   target: cached answer < 20 ms server side [{met}]")


if __name__ == "__main__":
    main()
