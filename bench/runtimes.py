"""JAX runtimes, measured side by side on one real server (worker, bubblewrap sandbox).

Targets (this 2-core machine): a warm non-default runtime costs the same as the
default (print(1) and the default example re-run within 10%); an idle runtime's
first print(1) within 3 s; "run on all" for the default example over the offered
runtimes within 4x one run. Prints the figures and the ratios; asserts nothing.
Runtimes: JAXPLAY_TEST_RUNTIMES (make bench installs them).
"""

from __future__ import annotations

import asyncio
import json
import os
import statistics
import sys
import time
import uuid
from pathlib import Path

import websockets

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from tests.live_server import collect_many  # noqa: E402
from tests.runtimes_server import TEST_RUNTIMES, runtimes_server  # noqa: E402

EXAMPLE = (Path(__file__).resolve().parent.parent / "frontend/src/examples/default.py").read_text() \
    .replace("time.sleep(", "(lambda *_: None)(")
IDLE_S = 30  # long enough that no runtime idles out between the phases that expect it warm
REPEATS = 7


async def run_on(ws, code: str, runtimes: list[str | None]) -> float:
    """Runs ``code`` once on each runtime at once (one connection, as a person's page); ms until all ended."""
    started = time.perf_counter()
    ids = []
    for runtime in runtimes:
        run_id = uuid.uuid4().hex[:10]
        ids.append(run_id)
        message = {"type": "run", "id": run_id, "code": code, "fresh": True, **({"runtime": runtime} if runtime else {})}
        await ws.send(json.dumps(message))
    results = await collect_many(ws, ids, 300)
    assert all(events[-1]["status"] == "ok" for events in results.values()), results
    return (time.perf_counter() - started) * 1000


async def timed(ws, code: str, runtime: str | None) -> float:
    return await run_on(ws, code, [runtime])


async def median(ws, code: str, runtime: str | None) -> float:
    await timed(ws, code, runtime)  # warm: this session's compile cache holds its functions
    samples = []
    for _ in range(REPEATS):
        samples.append(await timed(ws, code, runtime))
        await asyncio.sleep(0.5)  # as a person presses Run
    return statistics.median(samples)


async def main() -> None:
    with runtimes_server(["--runtime-idle-s", str(IDLE_S)]) as server:
        print(f"load average before: {open('/proc/loadavg').read().split()[:3]} ({len(os.sched_getaffinity(0))} cores)")
        old = TEST_RUNTIMES[0]
        every: list[str | None] = [None, *TEST_RUNTIMES]
        # A browser session, as a person's page has: a socket without the cookie keeps no compile cache.
        cookie = {"cookie": server.session_cookie()}
        async with websockets.connect(server.ws_url, max_size=None, additional_headers=cookie) as ws:
            for label, code in (("print(1)", "print(1)"), ("default example", EXAMPLE)):
                default_ms = await median(ws, code, None)
                for other in TEST_RUNTIMES:
                    other_ms = await median(ws, code, other)
                    print(f"{label:<16} default {default_ms:7.1f} ms   JAX {other} (warm) {other_ms:7.1f} ms   "
                          f"ratio {other_ms / default_ms:.2f} (target <= 1.10)", flush=True)
            one_ms = await median(ws, EXAMPLE, None)
            for runtime in every:
                await timed(ws, EXAMPLE, runtime)  # each warm, its compile caches filled
            all_ms = statistics.median([await run_on(ws, EXAMPLE, every) for _ in range(3)])
            print(f"run on all ({len(every)} runtimes, warm): {all_ms:.0f} ms vs one run {one_ms:.0f} ms: "
                  f"{all_ms / one_ms:.2f}x (target <= {len(every)}x)")
            stops = server.log_path.read_text().count(f"runtime {old}: idle for")  # it ran just now
            for _ in range(IDLE_S + 60):  # the sweep stops the idle runtime's sandboxes
                await asyncio.sleep(1)
                if server.log_path.read_text().count(f"runtime {old}: idle for") > stops:
                    break
            first_ms = await timed(ws, "print(1)", old)
            print(f"first use of idle JAX {old}: print(1) {first_ms:.0f} ms (target <= 3000)")
        print(f"load average after: {open('/proc/loadavg').read().split()[:3]}")


if __name__ == "__main__":
    asyncio.run(main())
