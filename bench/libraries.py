"""Import time of each worker library inside a sandboxed run, and what preloading costs the zygote.

For two real warm sandboxes, one whose zygote preloads nothing beyond JAX and
one with the shipped preload list (sandbox/engine/library_preload.py), it prints:

- each library's import time measured inside a run (a fresh run each time,
  median of --runs), with and without the preload;
- what ``import optax, flax.nnx as nnx, equinox`` adds to a run: the
  statement's own time inside the run (target: <= 100 ms), and beside it the
  whole run's time minus an empty run's. A warm sandbox prepares the next run's
  process (backend started and warmed) while a run executes, so before each
  of these runs the bench waits --settle-s for that to finish: the figure is
  then the run, not the wait for its process;
- the zygote's resident memory (VmRSS, and PSS: the part not shared with its
  parent) read from /proc on the host, with and without the preload.

Usage: python bench/libraries.py [--runs 5]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from jaxplay import worker_protocol as wp  # noqa: E402
from jaxplay.sandbox.engine import library_preload  # noqa: E402
from jaxplay.sandbox.engine.warm_sandbox import WarmSandbox  # noqa: E402
from jaxplay.sandbox.isolation import bwrap  # noqa: E402
from jaxplay.settings import Settings  # noqa: E402

LIBRARIES = ("optax", "flax.nnx", "equinox", "chex", "einops", "jaxtyping", "orbax.checkpoint", "scipy",
             "pandas", "diffrax", "lineax", "optimistix", "numpyro", "sklearn")
TARGET_IMPORT = "import optax, flax.nnx as nnx, equinox"
TIMED_TARGET = (
    "import json, time\n"
    "t = time.perf_counter()\n"
    f"{TARGET_IMPORT}\n"
    "print(json.dumps({'ms': (time.perf_counter() - t) * 1e3}))\n"
)
TARGET_MS = 100.0
TIMED_IMPORT = (
    "import importlib, json, time\n"
    "t = time.perf_counter()\n"
    "importlib.import_module({name!r})\n"
    "print(json.dumps({{'ms': (time.perf_counter() - t) * 1e3}}))\n"
)


def with_preload_override(value: str | None) -> None:
    """Slots started after this call get ``JAXPLAY_PRELOAD_LIBRARIES=value`` in their sandbox (None: the default)."""
    original = getattr(bwrap, "_bench_original_sandbox_command", bwrap.sandbox_command)
    bwrap._bench_original_sandbox_command = original  # type: ignore[attr-defined]

    def command(inner: list[str], env: dict[str, str], *args: Any, **kwargs: Any) -> list[str]:
        if value is not None:
            env = {**env, library_preload.OVERRIDE_VARIABLE: value}
        return original(inner, env, *args, **kwargs)

    bwrap.sandbox_command = command  # type: ignore[assignment]


def zygote_host_pid(root_pid: int) -> int:
    """The zygote among the sandbox's processes: the ``jaxplay.sandbox.engine.zygote`` process whose parent is not one."""
    def children(pid: int) -> list[int]:
        found = []
        for task in Path(f"/proc/{pid}/task").iterdir():
            text = (task / "children").read_text().split()
            found += [int(p) for p in text]
        return found

    def is_zygote(pid: int) -> bool:
        argv = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
        # python [-s -P] -m jaxplay.sandbox.engine.zygote FD; bwrap's own command line names it too, after its options
        return b"-m" in argv[:4] and argv[argv.index(b"-m") + 1] == b"jaxplay.sandbox.engine.zygote"

    stack = [root_pid]
    while stack:
        pid = stack.pop()
        for child in children(pid):
            if is_zygote(child) and not is_zygote(pid):
                return child
            stack.append(child)
    raise RuntimeError("no zygote found under the sandbox's process")


def memory_mb(pid: int) -> tuple[float, float]:
    """(VmRSS, Pss) in MiB."""
    rss = next(line for line in Path(f"/proc/{pid}/status").read_text().splitlines() if line.startswith("VmRSS"))
    pss = next(line for line in Path(f"/proc/{pid}/smaps_rollup").read_text().splitlines() if line.startswith("Pss:"))
    return int(rss.split()[1]) / 1024, int(pss.split()[1]) / 1024


async def run_once(sandbox: WarmSandbox, code: str) -> tuple[float, list[str], str]:
    """(the run's elapsed ms, stdout lines, status) of one run."""
    out: list[str] = []
    errors: list[str] = []

    def keep(event: dict[str, Any]) -> None:
        if event.get("type") == "stdout":
            out.extend(event.get("text", "").splitlines())
        elif event.get("type") in ("stderr", "error"):
            errors.append(json.dumps(event)[:300])

    result = await sandbox.run("bench", code, 120.0, wp.JobOptions(inspect=False), keep)
    if str(result.status) != "ok":
        raise RuntimeError(f"run failed ({result.status}): {result.message} {errors}")
    return result.elapsed_ms, out, str(result.status)


async def measure(preload: str | None, runs: int, settle_s: float) -> dict[str, Any]:
    with_preload_override(preload)
    sandbox = WarmSandbox(0, Settings.from_env(), "bench")
    await sandbox.start()
    try:
        assert sandbox.process is not None
        rss, pss = memory_mb(zygote_host_pid(sandbox.process.pid))
        await run_once(sandbox, "pass")  # warm-up
        imports: dict[str, float] = {}
        for name in LIBRARIES:
            samples = []
            for _ in range(runs):
                _, out, _ = await run_once(sandbox, TIMED_IMPORT.format(name=name))
                samples.append(json.loads(out[-1])["ms"])
            imports[name] = statistics.median(samples)
        empty, target, statement = [], [], []
        for _ in range(runs):  # alternated, so that a burst of load on the machine hits both alike
            await asyncio.sleep(settle_s)
            empty.append((await run_once(sandbox, "pass"))[0])
            await asyncio.sleep(settle_s)
            elapsed, out, _ = await run_once(sandbox, TIMED_TARGET)
            target.append(elapsed)
            statement.append(json.loads(out[-1])["ms"])
        return {"rss": rss, "pss": pss, "imports": imports, "empty_ms": statistics.median(empty),
                "target_ms": statistics.median(target), "statement_ms": statistics.median(statement)}
    finally:
        await sandbox.close()


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--settle-s", type=float, default=3.0,
                        help="pause before each whole-run measurement, for the sandbox to prepare the next run")
    args = parser.parse_args()
    settings = Settings.from_env()
    print(f"sandbox: {settings.sandbox}; each figure is the median of {args.runs} fresh runs")
    without = await measure("none", args.runs, args.settle_s)
    shipped = await measure(None, args.runs, args.settle_s)
    preloaded = set(library_preload.PRELOADED)
    print(f"\n{'library':<18}{'import in a run, no preload':>30}{'with preload':>16}  preloaded?")
    for name in LIBRARIES:
        print(f"{name:<18}{without['imports'][name]:>27.1f} ms{shipped['imports'][name]:>13.1f} ms  "
              f"{'yes' if name in preloaded else 'no'}")
    print(f"\n`{TARGET_IMPORT}` in a run:")
    print(f"{'':<14}{'the statement':>14}{'whole run':>12}{'empty run':>12}{'difference':>12}")
    for label, figures in (("no preload", without), ("with preload", shipped)):
        print(f"  {label:<12}{figures['statement_ms']:>11.1f} ms{figures['target_ms']:>9.1f} ms"
              f"{figures['empty_ms']:>9.1f} ms{figures['target_ms'] - figures['empty_ms']:>9.1f} ms")
    met = shipped["statement_ms"] <= TARGET_MS
    print(f"  target: the statement adds <= {TARGET_MS:.0f} ms: {'met' if met else 'NOT met'} "
          f"({shipped['statement_ms']:.1f} ms, against {without['statement_ms']:.0f} ms without the preload); "
          "whole-run times move by the machine's load")
    print("\nzygote resident memory (host /proc, after start):")
    print(f"  no preload:   RSS {without['rss']:6.1f} MiB   PSS {without['pss']:6.1f} MiB")
    print(f"  with preload: RSS {shipped['rss']:6.1f} MiB   PSS {shipped['pss']:6.1f} MiB   "
          f"(+{shipped['rss'] - without['rss']:.1f} MiB RSS, shared by every run forked from it)")


if __name__ == "__main__":
    asyncio.run(main())
