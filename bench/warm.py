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
- 100 distinct small snippets submitted at once (p50, p95, runs/s), and the CPU each costs: every
  process of the server's tree, read from /proc before the burst and after it has settled (its
  runs torn down, the spares that replace them prepared), divided by the snippets (``tree_cpu``).

Targets: re-run p50 <= 120 ms and within 2.5x of the in-process re-exec; first run p50 <= 200 ms;
CPU per snippet (in the sandboxes) <= 100 ms; 100 snippets p95 <= 5 s; print(1) back-to-back
p50 <= 15 ms, 0.5 s apart <= 12 ms.

With ``--checkout DIR`` (repeatable; each with its own ``.venv``) it compares instead: servers of
this checkout and of each DIR run side by side, and round after round each is measured in turn
for every figure above, printed with the ratio of this checkout's p50 to each other's.
Usage: python bench/warm.py [--runs 10] | python bench/warm.py --checkout ../main [--rounds 3]
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import json
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
import uuid
from dataclasses import dataclass, field
from pathlib import Path

import websockets

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench import tree_cpu  # noqa: E402
from bench.checkouts import servers  # noqa: E402
from bench.stats import percentile  # noqa: E402
from tests import host_processes  # noqa: E402
from tests.live_server import LiveServer, running_server  # noqa: E402

DEFAULT = (ROOT / "frontend" / "src" / "examples" / "default.py").read_text().replace("time.sleep(", "(lambda *_: 0)(")
# The burst's snippets come without a session cookie, as one client of one address (no compile cache of
# their own): the per-client limits are raised to let its 100 connections and runs in at once.
BURST_LIMITS = ["--max-connections-per-client", "1000", "--max-runs-per-client", "1000"]
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


async def timed_runs(server: LiveServer, codes: list[str], cookie: str | None, gap_s: float = 0.0,
                     backend: str | None = None, field: str = "wall") -> list[float]:
    """Each program's time, run one after another on one connection: ``wall`` from send to ``done``,
    or ``elapsed`` as the worker measured the run."""
    samples = []
    headers = {"Cookie": cookie} if cookie else {}
    async with websockets.connect(server.ws_url, max_size=None, additional_headers=headers) as ws:
        for code in codes:
            await asyncio.sleep(gap_s)
            run_id = uuid.uuid4().hex[:12]
            start = time.perf_counter()
            await ws.send(json.dumps({"type": "run", "id": run_id, "code": code, "fresh": True,
                                      **({"backend": backend} if backend else {})}))
            while True:
                event = json.loads(await ws.recv())
                if event.get("id") == run_id and event["type"] == "done":
                    assert event["status"] == "ok", event
                    break
            wall = (time.perf_counter() - start) * 1000
            samples.append(wall if field == "wall" else event["elapsed_ms"])
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
    return (f"{name:<50} n={len(samples):<3} p50={percentile(samples, 0.5):8.1f} ms  "
            f"p95={percentile(samples, 0.95):8.1f} ms")


def verdict(ok: bool) -> str:
    return "met" if ok else "MISSED"


@dataclass
class Figures:
    """One server's samples, gathered over one or more rounds."""
    print1: list[float] = field(default_factory=list)
    print1_back_to_back: list[float] = field(default_factory=list)
    firsts: list[float] = field(default_factory=list)
    reruns: list[float] = field(default_factory=list)
    burst: list[float] = field(default_factory=list)
    rates: list[float] = field(default_factory=list)
    cpu_ms: list[float] = field(default_factory=list)  # per snippet of a burst: the server's whole tree
    sandbox_cpu_ms: list[float] = field(default_factory=list)  # of which its sandboxes'


_first_runs = itertools.count(1)


def measure_round(server: LiveServer, cookie: str, runs: int, burst_count: int, figures: Figures) -> None:
    """Each figure once more, in the order a person meets them; ``cookie``'s session has run DEFAULT."""
    figures.print1 += asyncio.run(timed_runs(server, ["print(1)"] * runs, None, gap_s=0.5))
    figures.print1_back_to_back += asyncio.run(timed_runs(server, ["print(1)"] * runs, None))
    for _ in range(max(1, runs // 3)):  # each in a new session, with code never seen before
        code = DEFAULT.replace("0.3 *", f"0.3{next(_first_runs)}{uuid.uuid4().int % 10**6} *")
        figures.firsts += asyncio.run(timed_runs(server, [code], session_cookie(server)))
    figures.reruns += asyncio.run(timed_runs(server, [DEFAULT] * runs, cookie))
    if burst_count:
        tree_cpu.settle(server.process.pid)
        total_before, sandboxes_before = tree_cpu.tree_cpu_s(server.process.pid)
        samples, rate = asyncio.run(burst(server, burst_count))
        tree_cpu.settle(server.process.pid)  # the spares made after the burst, the runs torn down
        total_after, sandboxes_after = tree_cpu.tree_cpu_s(server.process.pid)
        figures.burst += samples
        figures.rates.append(rate)
        figures.cpu_ms.append((total_after - total_before) * 1000 / burst_count)
        figures.sandbox_cpu_ms.append((sandboxes_after - sandboxes_before) * 1000 / burst_count)


def report(figures: Figures, burst_count: int, warm: list[float], fresh: list[float] | None = None) -> None:
    print(line("print(1), playground, runs 0.5 s apart", figures.print1))
    print(line("print(1), playground, back-to-back", figures.print1_back_to_back))
    print(line("default example, first run (new session, new code)", figures.firsts))
    print(line("default example, re-run in the same session", figures.reruns))
    if fresh:
        print(line("default example, fresh python process", fresh))
    print(line("default example, warm in-process re-exec", warm))
    if figures.burst:
        print(line(f"{burst_count} distinct small snippets at once", figures.burst)
              + f"  {sum(figures.rates) / len(figures.rates):.1f} runs/s")
        print(f"CPU per distinct small snippet (burst, spares and teardown included): "
              f"{statistics.median(figures.sandbox_cpu_ms):.0f} ms in the sandboxes, "
              f"{statistics.median(figures.cpu_ms):.0f} ms with the server and worker (median of "
              f"{len(figures.cpu_ms)} bursts)")
    rerun, first, warm50 = (percentile(s, 0.5) for s in (figures.reruns, figures.firsts, warm))
    print(f"re-run / in-process re-exec (p50): {rerun / warm50:.2f}x" +
          (f"   first run / fresh python (p50): {first / percentile(fresh, 0.5):.2f}x" if fresh else ""))
    targets = [f"re-run p50 <= 120 ms [{verdict(rerun <= 120)}]",
               f"re-run <= 2.5x in-process [{verdict(rerun <= 2.5 * warm50)}]",
               f"first run p50 <= 200 ms [{verdict(first <= 200)}]"]
    if figures.burst:
        cpu = statistics.median(figures.sandbox_cpu_ms)
        targets += [f"CPU per snippet <= 100 ms [{verdict(cpu <= 100)}]",
                    f"burst p95 <= 5 s [{verdict(percentile(figures.burst, 0.95) <= 5000)}]"]
    targets += [f"print(1) back-to-back p50 <= 15 ms [{verdict(percentile(figures.print1_back_to_back, 0.5) <= 15)}]",
                f"spaced p50 <= 12 ms [{verdict(percentile(figures.print1, 0.5) <= 12)}]"]
    print("targets: " + ", ".join(targets))


def compare(checkouts: list[Path], rounds: int, runs: int, burst_count: int) -> None:
    """Every figure for each checkout in turn, round after round, on servers running side by side."""
    warm = in_process_reruns(DEFAULT, runs * 2)
    with servers(checkouts, BURST_LIMITS) as started:
        cookies = {checkout: session_cookie(server) for checkout, server in started.items()}
        figures = {checkout: Figures() for checkout in started}
        for checkout, server in started.items():
            wait_for_shared_cache(server)
            asyncio.run(timed_runs(server, ["print(0)"] * 3 + [DEFAULT] * 2, cookies[checkout]))
        for round_number in range(rounds):  # in turn, each round in the other order
            for checkout, server in list(started.items())[::-1 if round_number % 2 else 1]:
                measure_round(server, cookies[checkout], runs, burst_count, figures[checkout])
    first = figures[next(iter(started))]
    for checkout, measured in figures.items():
        print(f"--- {checkout}")
        report(measured, burst_count, warm)
    print("--- ratios to this checkout's p50 (this / other)")
    for checkout, measured in list(figures.items())[1:]:
        ratios = [f"{name} {percentile(getattr(first, name), 0.5) / percentile(getattr(measured, name), 0.5):.2f}x"
                  for name in ("print1", "print1_back_to_back", "firsts", "reruns", "burst")
                  if getattr(measured, name)]
        print(f"{checkout}: " + ", ".join(ratios))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=10)
    parser.add_argument("--burst", type=int, default=100)
    parser.add_argument("--checkout", action="append", default=[], type=Path)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    if args.checkout:
        compare(args.checkout, args.rounds, args.runs, args.burst)
        return
    figures = Figures()
    with running_server(BURST_LIMITS) as server:
        fill_s = wait_for_shared_cache(server)
        print(f"(waited {fill_s:.0f} s for the worker's one-time fill of the shared compile cache, if it ran)")
        time.sleep(3)  # the slots' first spares are prepared
        cookie = session_cookie(server)
        asyncio.run(timed_runs(server, ["print(0)"] * 3 + [DEFAULT], cookie))
        measure_round(server, cookie, args.runs * 3, args.burst, figures)
    fresh = fresh_python(DEFAULT, max(3, args.runs // 2))
    warm = in_process_reruns(DEFAULT, args.runs)
    report(figures, args.burst, warm, fresh)


if __name__ == "__main__":
    main()
