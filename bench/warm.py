"""The warm engine, side by side in one run: a real program in the playground vs plain Python.

Measures on this machine, in one process:
- the page's default example (sleeps removed):
  - first run of code never seen before (a fresh browser session, a constant changed so its
    functions compile anew; the common operations come from the shared cache);
  - re-runs from the same session (its private compile cache and lowered modules);
  - both again at a person's pace, each 3 s after the last run: a spare left idle that long has run
    the default example silently (sandbox/engine/warmup.py), so its operations are resident;
  - a fresh ``python`` process running the same file (no sandbox);
  - a warm in-process re-exec of the same code (what a notebook user sees on a re-run);
- ``print(1)``, as a person presses Run (0.5 s apart) and back-to-back (each run sent the
  moment the previous one is done: then every run also waits for its slot's previous process
  to tear down and for a fresh spare, the cost of a new process per run);
- 100 distinct small snippets submitted at once (p50, p95, runs/s), and the CPU each costs: every
  process of the server's tree, read from /proc before the burst and after it has settled (its
  runs torn down, the spares that replace them prepared), divided by the snippets (``tree_cpu``),
  beside what the same snippets cost one after another in one warm plain process
  (``plain_python.snippets_cpu_ms``, every thread counted).

Targets (issue 38): re-run p50 within 2.5x of the in-process re-exec; first run p50 within 0.12x of
a fresh python; CPU per snippet (whole tree) within 1.5x of the plain process's; with ``--checkout``
also print(1) no slower than the other checkout and the burst's p95 at most 0.5x of its.

With ``--runtime VERSION`` every run asks for that installed JAX runtime (``jaxplay runtimes add``),
and the plain-Python figures use its interpreter; the report says whether the runtime loads lowered
modules or falls back to lowering every module (an older JAX without what that needs).

With ``--checkout DIR`` (repeatable; each with its own ``.venv``) it compares instead: servers of
this checkout and of each DIR run side by side, and round after round each is measured in turn
for every figure above, printed with the ratio of this checkout's p50 to each other's.
Usage: python bench/warm.py [--runs 10] [--runtime 0.4.38] | python bench/warm.py --checkout ../main [--rounds 3]
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import json
import statistics
import sys
import time
import urllib.request
import uuid
from dataclasses import dataclass, field
from pathlib import Path

import websockets

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench import plain_python, tree_cpu  # noqa: E402
from bench.checkouts import servers  # noqa: E402
from bench.stats import percentile  # noqa: E402
from jaxplay.settings import Settings  # noqa: E402
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
                     backend: str | None = None, field: str = "wall", runtime: str | None = None) -> list[float]:
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
                                      **({"backend": backend} if backend else {}),
                                      **({"runtime": runtime} if runtime else {})}))
            while True:
                event = json.loads(await ws.recv())
                if event.get("id") == run_id and event["type"] == "done":
                    assert event["status"] == "ok", event
                    break
            wall = (time.perf_counter() - start) * 1000
            samples.append(wall if field == "wall" else event["elapsed_ms"])
    return samples


def snippets(count: int) -> list[str]:
    return [SNIPPET.format(n=10 + i, k=i + 1) for i in range(count)]


async def burst(server: LiveServer, count: int, runtime: str | None = None) -> tuple[list[float], float]:
    async def one(code: str) -> float:
        return (await timed_runs(server, [code], None, runtime=runtime))[0]

    start = time.perf_counter()
    samples = await asyncio.gather(*(one(code) for code in snippets(count)))
    return list(samples), count / (time.perf_counter() - start)


def line(name: str, samples: list[float]) -> str:
    return (f"{name:<50} n={len(samples):<3} p50={percentile(samples, 0.5):8.1f} ms  "
            f"p95={percentile(samples, 0.95):8.1f} ms")


def verdict(ok: bool) -> str:
    return "met" if ok else "MISSED"


@dataclass
class Plain:
    """The same programs in plain Python with the runs' JAX: the playground's yardsticks."""
    warm: list[float]  # the default example re-executed in a warm process
    fresh: list[float]  # ... in a fresh process each time
    snippet_cpu_ms: float | None  # CPU per burst snippet in one warm process

    @classmethod
    def measure(cls, runs: int, burst_count: int, interpreter: str) -> Plain:
        cpu = plain_python.snippets_cpu_ms(snippets(burst_count), Settings().cpu_devices, interpreter) \
            if burst_count else None
        return cls(plain_python.in_process_reruns(DEFAULT, runs, interpreter),
                   plain_python.fresh_python(DEFAULT, max(3, runs // 2), interpreter), cpu)


@dataclass
class Figures:
    """One server's samples, gathered over one or more rounds."""
    print1: list[float] = field(default_factory=list)
    print1_back_to_back: list[float] = field(default_factory=list)
    firsts: list[float] = field(default_factory=list)
    reruns: list[float] = field(default_factory=list)
    paced_firsts: list[float] = field(default_factory=list)  # each after a person's pause
    paced_reruns: list[float] = field(default_factory=list)
    burst: list[float] = field(default_factory=list)
    rates: list[float] = field(default_factory=list)
    cpu_ms: list[float] = field(default_factory=list)  # per snippet of a burst: the server's whole tree
    sandbox_cpu_ms: list[float] = field(default_factory=list)  # of which its sandboxes'
    lowering: str = "?"  # whether its runs load lowered modules


_first_runs = itertools.count(1)
PERSON_PAUSE_S = 3.0  # between runs at a person's pace: reading the output, editing, pressing Run

LOWERING_PROBE = """
from jaxplay.sandbox.caches import lowered_modules
why = lowered_modules.unavailable()
print("loads lowered modules" if why is None else f"lowers every module: {why}")
"""


def lowering_status(server: LiveServer, runtime: str | None) -> str:
    """What the runs of ``runtime`` do about lowering: load earlier runs' modules, or today's path."""
    try:
        events = server.run(LOWERING_PROBE, timeout=120, fresh=True, **({"runtime": runtime} if runtime else {}))
    except Exception as exc:  # noqa: BLE001 - an old checkout has no such module: its runs lower every module
        return f"unknown ({exc})"
    text = "".join(e.get("text", "") for e in events if e["type"] == "stdout").strip()
    return text or "lowers every module (this checkout has no lowered-module cache)"


def measure_round(server: LiveServer, cookie: str, runs: int, burst_count: int, figures: Figures,
                  runtime: str | None = None) -> None:
    """Each figure once more, in the order a person meets them; ``cookie``'s session has run DEFAULT."""
    figures.print1 += asyncio.run(timed_runs(server, ["print(1)"] * runs, None, gap_s=0.5, runtime=runtime))
    figures.print1_back_to_back += asyncio.run(timed_runs(server, ["print(1)"] * runs, None, runtime=runtime))
    for _ in range(max(1, runs // 3)):  # each in a new session, with code never seen before
        code = DEFAULT.replace("0.3 *", f"0.3{next(_first_runs)}{uuid.uuid4().int % 10**6} *")
        figures.firsts += asyncio.run(timed_runs(server, [code], session_cookie(server), runtime=runtime))
    figures.reruns += asyncio.run(timed_runs(server, [DEFAULT] * runs, cookie, runtime=runtime))
    for _ in range(max(1, runs // 6)):  # as a person runs it: after reading the last output, editing
        time.sleep(PERSON_PAUSE_S)
        code = DEFAULT.replace("0.3 *", f"0.3{next(_first_runs)}{uuid.uuid4().int % 10**6} *")
        figures.paced_firsts += asyncio.run(timed_runs(server, [code], session_cookie(server), runtime=runtime))
        time.sleep(PERSON_PAUSE_S)
        figures.paced_reruns += asyncio.run(timed_runs(server, [DEFAULT], cookie, runtime=runtime))
    if burst_count:
        tree_cpu.settle(server.process.pid)
        total_before, sandboxes_before = tree_cpu.tree_cpu_s(server.process.pid)
        samples, rate = asyncio.run(burst(server, burst_count, runtime))
        tree_cpu.settle(server.process.pid)  # the spares made after the burst, the runs torn down
        total_after, sandboxes_after = tree_cpu.tree_cpu_s(server.process.pid)
        figures.burst += samples
        figures.rates.append(rate)
        figures.cpu_ms.append((total_after - total_before) * 1000 / burst_count)
        figures.sandbox_cpu_ms.append((sandboxes_after - sandboxes_before) * 1000 / burst_count)


def report(figures: Figures, burst_count: int, plain: Plain) -> None:
    print(f"runs: {figures.lowering}")
    print(line("print(1), playground, runs 0.5 s apart", figures.print1))
    print(line("print(1), playground, back-to-back", figures.print1_back_to_back))
    print(line("default example, first run (new session, new code)", figures.firsts))
    print(line("default example, re-run in the same session", figures.reruns))
    if figures.paced_firsts:
        print(line(f"default example, first run, {PERSON_PAUSE_S:.0f} s after the last run", figures.paced_firsts))
        print(line(f"default example, re-run, {PERSON_PAUSE_S:.0f} s after the last run", figures.paced_reruns))
    print(line("default example, fresh python process", plain.fresh))
    print(line("default example, warm in-process re-exec", plain.warm))
    rerun, first = percentile(figures.reruns, 0.5), percentile(figures.firsts, 0.5)
    warm, fresh = percentile(plain.warm, 0.5), percentile(plain.fresh, 0.5)
    targets = [f"re-run <= 2.5x in-process [{verdict(rerun <= 2.5 * warm)}]",
               f"first run <= 0.12x fresh python [{verdict(first <= 0.12 * fresh)}]"]
    if figures.burst:
        cpu = statistics.median(figures.cpu_ms)
        print(line(f"{burst_count} distinct small snippets at once", figures.burst)
              + f"  {sum(figures.rates) / len(figures.rates):.1f} runs/s")
        print(f"CPU per distinct small snippet (burst, spares and teardown included): "
              f"{statistics.median(figures.sandbox_cpu_ms):.0f} ms in the sandboxes, "
              f"{cpu:.0f} ms with the server and worker (median of {len(figures.cpu_ms)} bursts); "
              f"{plain.snippet_cpu_ms:.0f} ms in one warm plain process")
        ratio = cpu / plain.snippet_cpu_ms if plain.snippet_cpu_ms else float("inf")
        print(f"CPU per snippet, whole tree / plain process: {ratio:.2f}x")
        targets.append(f"CPU per snippet <= 1.5x plain [{verdict(ratio <= 1.5)}]")
    print(f"re-run / in-process re-exec (p50): {rerun / warm:.2f}x   first run / fresh python (p50): "
          f"{first / fresh:.2f}x")
    print("targets: " + ", ".join(targets))


def compare(checkouts: list[Path], rounds: int, runs: int, burst_count: int, runtime: str | None) -> None:
    """Every figure for each checkout in turn, round after round, on servers running side by side."""
    with servers(checkouts, [*BURST_LIMITS, *runtime_arguments(runtime)]) as started:
        cookies = {checkout: session_cookie(server) for checkout, server in started.items()}
        figures = {checkout: Figures() for checkout in started}
        for checkout, server in started.items():
            wait_for_shared_cache(server)
            asyncio.run(timed_runs(server, ["print(0)"] * 3 + [DEFAULT] * 2, cookies[checkout], runtime=runtime))
            figures[checkout].lowering = lowering_status(server, runtime)
        for round_number in range(rounds):  # in turn, each round in the other order
            for checkout, server in list(started.items())[::-1 if round_number % 2 else 1]:
                measure_round(server, cookies[checkout], runs, burst_count, figures[checkout], runtime)
    plain = Plain.measure(runs * 2, burst_count, interpreter_of(runtime))
    first = figures[next(iter(started))]
    for checkout, measured in figures.items():
        print(f"--- {checkout}")
        report(measured, burst_count, plain)
    print("--- ratios to this checkout's p50 (this / other)")
    for checkout, measured in list(figures.items())[1:]:
        ratios = [f"{name} {percentile(getattr(first, name), 0.5) / percentile(getattr(measured, name), 0.5):.2f}x"
                  for name in ("print1", "print1_back_to_back", "firsts", "reruns", "paced_firsts", "paced_reruns",
                               "burst")
                  if getattr(measured, name)]
        if first.burst and measured.burst:
            ratios.append(f"burst p95 {percentile(first.burst, 0.95) / percentile(measured.burst, 0.95):.2f}x")
        print(f"{checkout}: " + ", ".join(ratios))


def runtime_arguments(runtime: str | None) -> list[str]:
    return ["--runtimes", runtime, "--runtimes-dir", str(Settings.from_env().runtimes_dir.expanduser())] if runtime else []


def interpreter_of(runtime: str | None) -> str:
    if runtime is None:
        return sys.executable
    from jaxplay.sandbox.runtimes import store

    return str(store.folder_for(Settings.from_env().runtimes_dir.expanduser(), runtime) / "bin" / "python")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=10)
    parser.add_argument("--burst", type=int, default=100)
    parser.add_argument("--checkout", action="append", default=[], type=Path)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--runtime", default=None, help="an installed JAX runtime to run on (default: the venv's)")
    args = parser.parse_args()
    if args.checkout:
        compare(args.checkout, args.rounds, args.runs, args.burst, args.runtime)
        return
    figures = Figures()
    with running_server([*BURST_LIMITS, *runtime_arguments(args.runtime)]) as server:
        fill_s = wait_for_shared_cache(server)
        print(f"(waited {fill_s:.0f} s for the worker's one-time fill of the shared compile cache, if it ran)")
        time.sleep(3)  # the slots' first spares are prepared
        cookie = session_cookie(server)
        asyncio.run(timed_runs(server, ["print(0)"] * 3 + [DEFAULT], cookie, runtime=args.runtime))
        figures.lowering = lowering_status(server, args.runtime)
        measure_round(server, cookie, args.runs * 3, args.burst, figures, args.runtime)
    report(figures, args.burst, Plain.measure(args.runs, args.burst, interpreter_of(args.runtime)))


if __name__ == "__main__":
    main()
