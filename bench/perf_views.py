"""What do the performance views cost? The page's default example plain, profiled, and its passes; the memory
view against the compiles it describes; three IR panes drawn in Chromium.

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

Then the memory view (each ``compiled`` event's ``memory_view``): three
functions (an MLP's training step, a scanned stack of layers trained for four
steps, a module of 2,000 HLO lines) are compiled, and their memory views
built, one after the other in one process, best of three each: XLA's compile
beside the time the view takes (decoding XLA's buffer assignment and module,
following the buffers, building the event; the ``memory_analysis()`` it
reads and the HLO text it links to are what Inspect makes anyway). Target:
at most 10% of the compile.

Last, in Debian's Chromium on the real server: a function whose optimized HLO
is about 2,000 lines, shown as source, jaxpr and optimized HLO side by side;
the time from the click on "Side by side" until the frame after the panes are
drawn (two animation frames), beside the time the single HLO text view takes.
Target: under 200 ms.
Usage: python bench/perf_views.py [--rounds 5] [--only runs|memory|panes]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import subprocess
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


REPO = Path(__file__).resolve().parent.parent
# About 90 lines of optimized HLO per step: 22 steps make a module of about 2,000 lines.
SORTS = """import jax, jax.numpy as jnp

@jax.jit
def sorts(x):
    for i in range({steps}):
        x = jnp.sort(x * (i + 1.0)) + jnp.cumsum(x)[::-1]
    return x

print(sorts(jnp.ones(64))[:3])
"""

# Compiles each function afresh and builds its memory view, one after the other in one process, the best of
# three of each: no other thread competes, so the two times compare. Inspect asks memory_analysis() anyway
# and renders the HLO text and its line map anyway: those are done first, untimed.
MEMORY_COST = r"""
import json, sys, time
import jax, jax.numpy as jnp
from jax import lax
from jaxplay.sandbox.capture import buffer_proto, jit_source_map, memory_view

def sorts(x):
    for i in range(22):
        x = jnp.sort(x * (i + 1.0)) + jnp.cumsum(x)[::-1]
    return x

def mlp_step(params, x, y):
    def loss(params):
        h = x
        for w, b in params:
            h = jnp.tanh(h @ w + b)
        return jnp.mean((h - y) ** 2)
    grads = jax.grad(loss)(params)
    return [(w - 0.1 * gw, b - 0.1 * gb) for (w, b), (gw, gb) in zip(params, grads)]

def scanned(ws, x):
    def loss(ws):
        h, _ = lax.scan(lambda h, w: (jnp.tanh(h @ w), None), x, ws)
        return jnp.mean(h ** 2)
    for _ in range(4):
        ws = ws - 0.01 * jax.grad(loss)(ws)
    return ws

CASES = {
    "MLP training step": (mlp_step, ([(jnp.ones((64, 128)), jnp.zeros(128)), (jnp.ones((128, 10)), jnp.zeros(10))],
                                     jnp.ones((32, 64)), jnp.zeros((32, 10)))),
    "6 scanned layers x 4 steps": (scanned, (jnp.ones((6, 256, 256)) * 0.01, jnp.ones((64, 256)))),
    "2,000-line HLO (22 sorts)": (sorts, (jnp.ones(64),)),
}
for label, (fn, args) in CASES.items():
    compile_s, view_s = [], []
    for _ in range(3):
        jax.clear_caches()  # else JAX hands back the executable it compiled on the first pass
        lowered = jax.jit(fn).lower(*args)
        start = time.perf_counter()
        compiled = lowered.compile()
        compile_s.append(time.perf_counter() - start)
        buffer_proto.memory_stats(compiled)
        hlo = compiled.as_text()
        event = {"key": "1.1", "hlo": hlo, "source_lines": {"hlo": jit_source_map.hlo_line_ranges(hlo)}}
        start = time.perf_counter()
        memory_view.add_memory_view(event, compiled)
        view_s.append(time.perf_counter() - start)
    print(json.dumps({"label": label, "compile_ms": min(compile_s) * 1e3, "view_ms": min(view_s) * 1e3,
                      "hlo_lines": hlo.count(chr(10)), "positions": event["memory_view"]["positions"]}), flush=True)
"""


def memory_cost() -> None:
    print("memory view beside the compile it describes (one process, best of 3 each):")
    result = subprocess.run([sys.executable, "-c", MEMORY_COST], cwd=REPO, capture_output=True, text=True, timeout=900,
                            env={**os.environ, "JAX_PLATFORMS": "cpu", "PYTHONPATH": str(REPO)})
    if result.returncode != 0:
        raise RuntimeError(result.stderr[-2000:])
    compile_total = view_total = 0.0
    for line in result.stdout.splitlines():
        row = json.loads(line)
        compile_total += row["compile_ms"]
        view_total += row["view_ms"]
        print(f"  {row['label']:28s} compile {row['compile_ms']:8.1f} ms   memory view {row['view_ms']:6.1f} ms   "
              f"{100 * row['view_ms'] / row['compile_ms']:5.1f}%   ({row['hlo_lines']} HLO lines, "
              f"{row['positions']} positions)")
    print(f"  all: compile {compile_total:.0f} ms, memory view {view_total:.0f} ms: "
          f"{100 * view_total / compile_total:.1f}% of the compile (target: at most 10%)")


PANES_TIMING = """async () => {
  const frames = () => new Promise((done) => requestAnimationFrame(() => requestAnimationFrame(done)));
  const time = async (selector) => {
    const start = performance.now();
    document.querySelector(selector).click();
    await frames();
    return performance.now() - start;
  };
  const panes = [];
  const text = [];
  for (let i = 0; i < 7; i++) {
    await time("[data-testid=inspect-view-memory]");
    panes.push(await time("[data-testid=inspect-view-panes]"));
    await time("[data-testid=inspect-view-memory]");
    text.push(await time(".inspect-artifact-tab[data-artifact=hlo]"));
  }
  await time("[data-testid=inspect-view-panes]");
  return { panes, text, bands: document.querySelectorAll("[data-testid=panes] .cm-band").length };
}"""


def panes_render(server: LiveServer) -> None:
    from playwright.sync_api import sync_playwright

    from tests.browser.conftest import CHROMIUM, CHROMIUM_ARGS, ensure_frontend_built
    from tests.browser.helpers import replace_code, wait_for_status

    ensure_frontend_built()
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
        page = browser.new_page(viewport={"width": 1440, "height": 900})
        page.goto(server.http_url + "/")
        page.wait_for_selector(".conn[data-state=open]")
        replace_code(page, SORTS.format(steps=22))
        page.click("[data-testid=run]")
        if wait_for_status(page, "ok", "error", timeout_ms=300_000) != "ok":
            raise RuntimeError("the 2,000-line program failed")
        page.click("[data-testid=results-enlarge]")
        page.click("#tab-inspect")
        page.wait_for_selector(".inspect-compile")
        page.click(".inspect-artifact-tab[data-artifact=hlo]")
        result = page.evaluate(PANES_TIMING)
        browser.close()
    panes, text = sorted(result["panes"]), sorted(result["text"])
    print(f"three panes (source, jaxpr, optimized HLO of the 22-sort module, about 2,000 lines), click to drawn, "
          f"Chromium at 1440 px: best {panes[0]:.0f} ms, median {statistics.median(panes):.0f} ms "
          f"(target: under 200 ms); the HLO text alone: best {text[0]:.0f} ms, median {statistics.median(text):.0f} ms; "
          f"{result['bands']} coloured lines on screen")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--only", choices=("runs", "memory", "panes"), default=None)
    args = parser.parse_args()
    if args.only in (None, "memory"):
        memory_cost()
    if args.only in (None, "panes"):
        with running_server() as server:
            panes_render(server)
    if args.only not in (None, "runs"):
        return
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
