"""What do the performance views cost? The page's default example plain, profiled, and its passes.

Through a real server with its real sandboxed worker, alternating for several
rounds (``fresh`` so nothing comes from the result cache; the example's
sleeps removed):

- plain: the default example as a run, inspection on (what every run pays);
- profiled: the same run with ``"profile": true``;
- passes: a ``passes`` request for its ``update`` (the program again, up to
  that compilation, compiled with XLA's per-pass dumps and once more under
  the profiler).

A run's time is its ``done`` ``elapsed_ms`` (execution on the worker,
queueing excluded). Prints each round, then the best and median of each, the
passes request's own figures (its two compiles, what XLA wrote), and the
profile's. On a shared machine other processes only add time: the minimum is
the estimate of the cost itself.
Usage: python bench/perf_views.py [--rounds 5]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import sys
import uuid
from pathlib import Path

import websockets

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from tests.live_server import LiveServer, collect, done_of, output_text, running_server  # noqa: E402

EXAMPLE = (Path(__file__).resolve().parent.parent / "frontend" / "src" / "examples" / "default.py").read_text()
CODE = EXAMPLE.replace("time.sleep(0.25)", "pass")


def timed(server: LiveServer, **fields: object) -> tuple[float, list[dict]]:
    events = server.run(CODE, timeout=180, fresh=True, **fields)
    done = done_of(events)
    if done["status"] != "ok":
        raise RuntimeError(f"run failed ({done['status']}): {output_text(events, 'stderr')[-2000:]}")
    return done["elapsed_ms"], events


def passes(server: LiveServer) -> tuple[float, dict]:
    async def ask() -> list[dict]:
        run_id = uuid.uuid4().hex[:12]
        async with websockets.connect(server.ws_url, max_size=None) as ws:
            await ws.send(json.dumps({"type": "passes", "id": run_id, "code": CODE, "key": "1.1", "fn": "update"}))
            return await collect(ws, run_id, 180)

    events = asyncio.run(ask())
    answer = next((e for e in events if e["type"] == "passes"), None)
    if done_of(events)["status"] != "ok" or answer is None or "error" in answer:
        raise RuntimeError(f"passes request failed: {done_of(events)} {answer and answer.get('error')}")
    return done_of(events)["elapsed_ms"], answer


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    times: dict[str, list[float]] = {"plain": [], "profiled": [], "passes": []}
    last_passes: dict = {}
    last_profile: dict = {}
    with running_server() as server:
        timed(server)  # warm the worker's pool and the session's compile cache
        for round_number in range(1, args.rounds + 1):
            plain_ms, _ = timed(server)
            profiled_ms, events = timed(server, profile=True)
            last_profile = next(e for e in events if e["type"] == "profile")
            passes_ms, last_passes = passes(server)
            for name, value in (("plain", plain_ms), ("profiled", profiled_ms), ("passes", passes_ms)):
                times[name].append(value)
            print(f"round {round_number}: plain {plain_ms:8.1f} ms   profiled {profiled_ms:8.1f} ms   "
                  f"passes request {passes_ms:8.1f} ms", flush=True)
    for name, values in times.items():
        print(f"{name:9s} best {min(values):8.1f} ms   median {statistics.median(values):8.1f} ms")
    print(f"passes of update: compile with dumps {last_passes['compile_ms']} ms, under the profiler "
          f"{last_passes['profiled_compile_ms']} ms, {len(last_passes['passes'])} passes "
          f"({sum(p['changed'] for p in last_passes['passes'])} changed), {last_passes['dump_files']} files, "
          f"{last_passes['dump_bytes'] / 1024:.0f} KiB dumped")
    trace = last_profile.get("trace") or {}
    print(f"profile: {last_profile.get('total_slices')} slices, {last_profile.get('duration_us', 0) / 1e3:.0f} ms "
          f"long, read back in {last_profile.get('summarize_ms')} ms, raw trace {trace.get('bytes', 0) / 1024:.0f} KiB")


if __name__ == "__main__":
    main()
