"""JAX runtimes, measured side by side on one real server (worker, bubblewrap sandbox).

The newest JAX (0.12, the default a run that names none gets) against the
venv's own JAX (0.10.2), on every installed runtime offered (``--runtimes all``):

- print(1) and the page's default example, a first run (a new browser session:
  only the shared compile cache is warm) and a re-run (the same session), each
  the median of several; target: 0.12 within 1.1x of the venv's own JAX;
- a jitted function that calls ``jax.debug.print``, run again by the same
  session: 0.11 and newer load it from the persistent cache, 0.10.2 compiles
  it again (it refuses to store executables with host callbacks);
- "Run on all" over every offered runtime at once against one run; target: at
  most 3x;
- an idle runtime's first print(1) (its sandboxes stopped); target: 3 s.

Prints the figures and the ratios; asserts nothing.
"""

from __future__ import annotations

import asyncio
import json
import os
import statistics
import sys
import time
import uuid
from importlib import metadata
from pathlib import Path

import websockets

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from tests.live_server import LiveServer, collect_many  # noqa: E402
from tests.runtimes_server import runtimes_dir, runtimes_server  # noqa: E402

EXAMPLE = (Path(__file__).resolve().parent.parent / "frontend/src/examples/default.py").read_text() \
    .replace("time.sleep(", "(lambda *_: None)(")
CALLBACK = """
import jax
import jax.numpy as jnp

@jax.jit
def noisy(x):
    jax.debug.print("x sums to {s}", s=x.sum())
    return x * 2

print(noisy(jnp.arange(4.0)))
"""
NEWEST = os.environ.get("JAXPLAY_NEWEST_JAX", "0.12.0.1")
OWN = metadata.version("jax")
OLD = "0.4.38"  # stopped when idle, then timed at its first use
IDLE_S = 30  # long enough that no runtime idles out between the phases that expect it warm
REPEATS = 7


async def run_on(ws, code: str, runtimes: list[str | None]) -> tuple[float, dict[str, list[dict]]]:
    """Runs ``code`` once on each runtime at once (one connection, as a person's page); ms until all ended."""
    started = time.perf_counter()
    ids = {}
    for runtime in runtimes:
        run_id = uuid.uuid4().hex[:10]
        ids[run_id] = runtime
        message = {"type": "run", "id": run_id, "code": code, "fresh": True, **({"runtime": runtime} if runtime else {})}
        await ws.send(json.dumps(message))
    results = await collect_many(ws, list(ids), 300)
    assert all(events[-1]["status"] == "ok" for events in results.values()), results
    return (time.perf_counter() - started) * 1000, results


async def timed(ws, code: str, runtime: str | None) -> float:
    return (await run_on(ws, code, [runtime]))[0]


def connect(server: LiveServer):
    """A new browser session, as a person's page has (a socket without the cookie keeps no compile cache)."""
    return websockets.connect(server.ws_url, max_size=None, additional_headers=server.browser_headers())


async def first_run(server: LiveServer, code: str, runtime: str) -> float:
    """The median of runs that are each a new session's first: only the shared compile cache is warm."""
    samples = []
    for _ in range(REPEATS):
        async with connect(server) as ws:
            samples.append(await timed(ws, code, runtime))
        await asyncio.sleep(0.5)
    return statistics.median(samples)


async def re_run(server: LiveServer, code: str, runtime: str) -> float:
    """The median of re-runs by one session, its compile cache holding what the first run compiled."""
    async with connect(server) as ws:
        await timed(ws, code, runtime)
        samples = []
        for _ in range(REPEATS):
            samples.append(await timed(ws, code, runtime))
            await asyncio.sleep(0.5)  # as a person presses Run
    return statistics.median(samples)


async def wait_for_shared_caches(server: LiveServer, runtimes: list[str]) -> None:
    """Until each runtime's shared cache (filled in the background at its first use) holds the example."""
    for runtime in runtimes:
        for _ in range(60):
            async with connect(server) as ws:
                _, results = await run_on(ws, EXAMPLE, [runtime])
            compiled = [e for events in results.values() for e in events if e["type"] == "compiled"]
            if compiled and all(e["persistent_cache_hit"] for e in compiled):
                break
            await asyncio.sleep(2)


async def callback_again(server: LiveServer, runtime: str) -> tuple[float, bool]:
    """A session's second run of the debug.print program: (ms, whether the function came from the cache)."""
    async with connect(server) as ws:
        await run_on(ws, CALLBACK, [runtime])
        ms, results = await run_on(ws, CALLBACK, [runtime])
    (compiled,) = [e for events in results.values() for e in events if e["type"] == "compiled" and e["fn"] == "noisy"]
    return ms, bool(compiled["persistent_cache_hit"])


def side_by_side(label: str, own_ms: float, newest_ms: float, target: str = "<= 1.10") -> None:
    print(f"{label:<28} JAX {OWN} {own_ms:7.1f} ms   JAX {NEWEST} {newest_ms:7.1f} ms   "
          f"ratio {newest_ms / own_ms:.2f} (target {target})", flush=True)


async def main() -> None:
    with runtimes_server(["--runtime-idle-s", str(IDLE_S)], runtimes="all") as server:
        print(f"load average before: {open('/proc/loadavg').read().split()[:3]} ({len(os.sched_getaffinity(0))} cores)")
        (cpu,) = server.get_json("/api/backends")["backends"]
        every = [r["name"] for r in cpu["runtimes"] if not r["problem"]]
        default = next(r["name"] for r in cpu["runtimes"] if r["default"])
        print(f"offered: {', '.join(every)}; a run that names none gets JAX {default} "
              f"(installed in {runtimes_dir()})")
        await wait_for_shared_caches(server, [OWN, NEWEST])
        for label, code in (("print(1)", "print(1)"), ("default example", EXAMPLE)):
            side_by_side(f"{label}, first run", await first_run(server, code, OWN), await first_run(server, code, NEWEST))
            side_by_side(f"{label}, re-run", await re_run(server, code, OWN), await re_run(server, code, NEWEST))
        for runtime in (OWN, NEWEST):
            ms, hit = await callback_again(server, runtime)
            print(f"jax.debug.print in a jit, re-run: JAX {runtime:<9} {ms:7.1f} ms, "
                  f"{'loaded from the persistent cache' if hit else 'compiled again'}", flush=True)
        async with connect(server) as ws:
            await timed(ws, EXAMPLE, None)
            one_ms = statistics.median([await timed(ws, EXAMPLE, None) for _ in range(REPEATS)])
            for runtime in every:
                await timed(ws, EXAMPLE, runtime)  # each warm, its compile caches filled
            all_ms = statistics.median([(await run_on(ws, EXAMPLE, list(every)))[0] for _ in range(3)])
        print(f"run on all ({len(every)} runtimes, warm): {all_ms:.0f} ms vs one run {one_ms:.0f} ms: "
              f"{all_ms / one_ms:.2f}x (target <= 3x)", flush=True)
        if OLD in every:
            stops = server.log_path.read_text().count(f"runtime {OLD}: idle for")  # it ran just now
            for _ in range(IDLE_S + 60):  # the sweep stops the idle runtime's sandboxes
                await asyncio.sleep(1)
                if server.log_path.read_text().count(f"runtime {OLD}: idle for") > stops:
                    break
            async with connect(server) as ws:
                first_ms = await timed(ws, "print(1)", OLD)
            print(f"first use of idle JAX {OLD}: print(1) {first_ms:.0f} ms (target <= 3000)")
        print(f"load average after: {open('/proc/loadavg').read().split()[:3]}")


if __name__ == "__main__":
    asyncio.run(main())
