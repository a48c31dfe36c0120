"""The warm engine, side by side in one run: a real program in the playground vs plain Python.

Measures on this machine, in one process:
- the page's default example (sleeps removed):
  - first run of code never seen before (a fresh browser session, a constant changed so its
    functions compile anew; the common operations come from the shared cache);
  - re-runs from the same session (its private compile cache);
  - a fresh ``python`` process running the same file (no sandbox);
  - a warm in-process re-exec of the same code (what a notebook user sees on a re-run);
- ``print(1)``, as a person presses Run (0.5 s apart) and back-to-back (each run sent the
  moment the previous one is done: then every run also waits for its slot's previous process
  to tear down and for a fresh spare, the cost of a new process per run);
- 100 distinct small snippets submitted at once (p50, p95, runs/s).

Targets (issue 11): re-run p50 <= 300 ms and within 4x of the in-process re-run; first run
<= 0.5x the fresh process; 100 snippets p95 <= 4 s; print(1) p50 <= 15 ms.

With ``--checkout DIR`` (repeatable; each with its own ``.venv``) it compares instead: servers of
this checkout and of each DIR run side by side, and round after round each is measured in turn for
the two figures a change to the engine must not slow (print(1) 0.5 s apart, the default example's
re-run), printed with their ratio to this checkout's.
Usage: python bench/warm.py [--runs 10] | python bench/warm.py --checkout ../main [--rounds 6]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import subprocess
import sys
import tempfile
import time
import urllib.request
import uuid
from pathlib import Path

import websockets

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.checkouts import servers  # noqa: E402
from bench.stats import percentile  # noqa: E402
from tests import host_processes  # noqa: E402
from tests.live_server import LiveServer, running_server  # noqa: E402

DEFAULT = (ROOT / "frontend" / "src" / "examples" / "default.py").read_text().replace("time.sleep(", "(lambda *_: 0)(")
SNIPPET = "import jax.numpy as jnp\nprint(float((jnp.arange({n}.0) * {k}).sum()))\n"


def wait_for_shared_cache(server: LiveServer, limit_s: float = 300) -> float:
    """Seconds until the worker's one-time fill of the shared compile cache ended (it runs at the
    lowest priority, once per environment on a host, but takes a core from the runs while it works)."""
    start = time.monotonic()
    time.sleep(2)  # the worker starts the fill once its slots are up
    while time.monotonic() - start < limit_s:
        filling = [proc for proc in host_processes.matching("from jaxplay.sandbox.engine.shared_cache_fill import fill_main")
                   if host_processes.is_descendant(proc.pid, server.process.pid)]
        if not filling:
            break
        time.sleep(1)
    return time.monotonic() - start


def session_cookie(server: LiveServer) -> str:
    with urllib.request.urlopen(server.http_url + "/") as response:
        return response.headers["set-cookie"].split(";")[0]


async def timed_runs(server: LiveServer, codes: list[str], cookie: str | None, gap_s: float = 0.0) -> list[float]:
    samples = []
    headers = {"Cookie": cookie} if cookie else {}
    async with websockets.connect(server.ws_url, max_size=None, additional_headers=headers) as ws:
        for code in codes:
            await asyncio.sleep(gap_s)
            run_id = uuid.uuid4().hex[:12]
            start = time.perf_counter()
            await ws.send(json.dumps({"type": "run", "id": run_id, "code": code, "fresh": True}))
            while True:
                event = json.loads(await ws.recv())
                if event.get("id") == run_id and event["type"] == "done":
                    assert event["status"] == "ok", event
                    break
            samples.append((time.perf_counter() - start) * 1000)
    return samples


async def burst(server: LiveServer, count: int) -> tuple[list[float], float]:
    async def one(i: int) -> float:
        code = SNIPPET.format(n=10 + i, k=i + 1)
        return (await timed_runs(server, [code], None))[0]

    start = time.perf_counter()
    samples = await asyncio.gather(*(one(i) for i in range(count)))
    return list(samples), count / (time.perf_counter() - start)


def fresh_python(code: str, runs: int) -> list[float]:
    with tempfile.NamedTemporaryFile("w", suffix=".py", delete=False) as f:
        f.write(code)
    samples = []
    for _ in range(runs):
        start = time.perf_counter()
        subprocess.run([sys.executable, f.name], check=True, capture_output=True)
        samples.append((time.perf_counter() - start) * 1000)
    return samples


IN_PROCESS = """
import sys, time, io, contextlib
code = open(sys.argv[1]).read()
with contextlib.redirect_stdout(io.StringIO()):
    exec(compile(code, "<p>", "exec"), {"__name__": "__main__"})
    samples = []
    for _ in range(int(sys.argv[2])):
        start = time.perf_counter()
        exec(compile(code, "<p>", "exec"), {"__name__": "__main__"})
        samples.append((time.perf_counter() - start) * 1000)
print(" ".join(f"{s:.3f}" for s in samples))
"""


def in_process_reruns(code: str, runs: int) -> list[float]:
    with tempfile.NamedTemporaryFile("w", suffix=".py", delete=False) as f:
        f.write(code)
    out = subprocess.run([sys.executable, "-c", IN_PROCESS, f.name, str(runs)], check=True, capture_output=True,
                         text=True).stdout
    return [float(x) for x in out.split()]


def line(name: str, samples: list[float]) -> str:
    return (f"{name:<46} n={len(samples):<3} p50={percentile(samples, 0.5):8.1f} ms  "
            f"p95={percentile(samples, 0.95):8.1f} ms")


def verdict(ok: bool) -> str:
    return "met" if ok else "MISSED"


def compare(checkouts: list[Path], rounds: int, runs: int) -> None:
    """print(1) spaced and the default example's re-run, for each checkout in turn, round after round."""
    with servers(checkouts) as started:
        cookies = {checkout: session_cookie(server) for checkout, server in started.items()}
        print1: dict[Path, list[float]] = {checkout: [] for checkout in started}
        reruns: dict[Path, list[float]] = {checkout: [] for checkout in started}
        for checkout, server in started.items():
            wait_for_shared_cache(server)
            asyncio.run(timed_runs(server, ["print(0)"] * 3 + [DEFAULT] * 2, cookies[checkout]))
        for _ in range(rounds):
            for checkout, server in started.items():
                print1[checkout] += asyncio.run(timed_runs(server, ["print(1)"] * runs, None, gap_s=0.5))
                reruns[checkout] += asyncio.run(timed_runs(server, [DEFAULT] * runs, cookies[checkout]))
    first = next(iter(started))
    for checkout in started:
        p1, rr = percentile(print1[checkout], 0.5), percentile(reruns[checkout], 0.5)
        print(f"{str(checkout):<32} print(1) 0.5 s apart p50 {p1:7.1f} ms "
              f"({p1 / percentile(print1[first], 0.5):4.2f}x)   default example re-run p50 {rr:7.1f} ms "
              f"({rr / percentile(reruns[first], 0.5):4.2f}x)   n={len(print1[checkout])}+{len(reruns[checkout])}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=10)
    parser.add_argument("--burst", type=int, default=100)
    parser.add_argument("--checkout", action="append", default=[], type=Path)
    parser.add_argument("--rounds", type=int, default=6)
    args = parser.parse_args()
    if args.checkout:
        compare(args.checkout, args.rounds, max(3, args.runs // 2))
        return
    with running_server() as server:
        fill_s = wait_for_shared_cache(server)
        print(f"(waited {fill_s:.0f} s for the worker's one-time fill of the shared compile cache, if it ran)")
        time.sleep(3)  # the slots' first spares are prepared
        asyncio.run(timed_runs(server, ["print(0)"] * 3, None))
        print1 = asyncio.run(timed_runs(server, ["print(1)"] * (args.runs * 3), None, gap_s=0.5))
        print1_back_to_back = asyncio.run(timed_runs(server, ["print(1)"] * (args.runs * 3), None))
        firsts = []
        for i in range(args.runs):  # each in a new session, with code never seen before
            code = DEFAULT.replace("0.3 *", f"0.3{i + 1} *")
            firsts += asyncio.run(timed_runs(server, [code], session_cookie(server)))
        cookie = session_cookie(server)
        reruns = asyncio.run(timed_runs(server, [DEFAULT] * (args.runs + 1), cookie))[1:]
        time.sleep(1)
        burst_samples, rate = asyncio.run(burst(server, args.burst))
    fresh = fresh_python(DEFAULT, max(3, args.runs // 2))
    warm = in_process_reruns(DEFAULT, args.runs)

    print(line("print(1), playground, runs 0.5 s apart", print1))
    print(line("print(1), playground, back-to-back", print1_back_to_back))
    print(line("default example, first run (new session, new code)", firsts))
    print(line("default example, re-run in the same session", reruns))
    print(line("default example, fresh python process", fresh))
    print(line("default example, warm in-process re-exec", warm))
    print(line(f"{args.burst} distinct small snippets at once", burst_samples) + f"  {rate:.1f} runs/s")
    rerun, first, fresh50, warm50 = (percentile(s, 0.5) for s in (reruns, firsts, fresh, warm))
    print(f"re-run / in-process re-exec (p50): {rerun / warm50:.1f}x   first run / fresh python (p50): "
          f"{first / fresh50:.2f}x")
    print(f"targets: re-run p50 <= 300 ms [{verdict(rerun <= 300)}], re-run <= 4x in-process "
          f"[{verdict(rerun <= 4 * warm50)}], first <= 0.5x fresh [{verdict(first <= 0.5 * fresh50)}], "
          f"burst p95 <= 4 s [{verdict(percentile(burst_samples, 0.95) <= 4000)}], "
          f"print(1) p50 <= 15 ms [{verdict(percentile(print1, 0.5) <= 15)} 0.5 s apart, "
          f"{verdict(percentile(print1_back_to_back, 0.5) <= 15)} back-to-back]")


if __name__ == "__main__":
    main()
