"""What does capturing compilations cost? The gallery with inspection on and off.

Runs every example of the gallery (frontend/src/examples/gallery/*.py)
through a real server with its real sandboxed worker, alternating
``"inspect": true`` and ``"inspect": false`` (``fresh`` so nothing comes
from the result cache), for several rounds. A run's time is its ``done``
``elapsed_ms`` (execution on the worker, queueing excluded).

Prints each example's best (minimum) and median time with and without, and
the gallery's wall time with inspection over without (target: at most
1.15), from the summed best times: on a shared machine other processes only
ever add time, so the minimum of several runs is the estimate of what the
capture itself costs; the ratio of summed medians is printed beside it.
Usage: python bench/inspect_overhead.py [--rounds 5]
"""

from __future__ import annotations

import argparse
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from tests.live_server import LiveServer, done_of, output_text, running_server  # noqa: E402

GALLERY = Path(__file__).resolve().parent.parent / "frontend" / "src" / "examples" / "gallery"


def elapsed_ms(server: LiveServer, code: str, inspect: bool) -> float:
    events = server.run(code, timeout=180, fresh=True, inspect=inspect)
    done = done_of(events)
    if done["status"] != "ok":
        raise RuntimeError(f"run failed ({done['status']}): {output_text(events, 'stderr')[-2000:]}")
    compiled = sum(1 for e in events if e["type"] == "compiled")
    if inspect != (compiled > 0) and "jax.jit" in code:
        raise RuntimeError(f"inspect={inspect} but {compiled} compiled events")
    return done["elapsed_ms"]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    examples = sorted(GALLERY.glob("*.py"))
    on: dict[str, list[float]] = {p.stem: [] for p in examples}
    off: dict[str, list[float]] = {p.stem: [] for p in examples}
    with running_server() as server:
        elapsed_ms(server, "import jax; jax.jit(lambda x: x)(1.0)", True)  # warm the worker's pool
        for round_number in range(args.rounds):
            for path in examples:
                code = path.read_text()
                # Alternate which goes first so drift in the machine's load favours neither.
                order = (True, False) if round_number % 2 == 0 else (False, True)
                for inspect in order:
                    (on if inspect else off)[path.stem].append(elapsed_ms(server, code, inspect))
    print(f"{len(examples)} gallery examples, {args.rounds} runs each way; execution time per run, best and median")
    print(f"{'example':<36} {'on best':>9} {'off best':>9} {'ratio':>6}   {'on med':>8} {'off med':>8} {'ratio':>6}")
    totals = {"on_best": 0.0, "off_best": 0.0, "on_median": 0.0, "off_median": 0.0}
    for path in examples:
        row = {
            "on_best": min(on[path.stem]), "off_best": min(off[path.stem]),
            "on_median": statistics.median(on[path.stem]), "off_median": statistics.median(off[path.stem]),
        }
        for key, value in row.items():
            totals[key] += value
        print(f"{path.stem:<36} {row['on_best']:6.0f} ms {row['off_best']:6.0f} ms {row['on_best'] / row['off_best']:6.3f}"
              f"   {row['on_median']:5.0f} ms {row['off_median']:5.0f} ms {row['on_median'] / row['off_median']:6.3f}")
    best_ratio = totals["on_best"] / totals["off_best"]
    median_ratio = totals["on_median"] / totals["off_median"]
    print(f"{'gallery total':<36} {totals['on_best']:6.0f} ms {totals['off_best']:6.0f} ms {best_ratio:6.3f}"
          f"   {totals['on_median']:5.0f} ms {totals['off_median']:5.0f} ms {median_ratio:6.3f}")
    print(f"inspection overhead on the gallery: {best_ratio:.3f}x wall time (best of {args.rounds}; "
          f"median {median_ratio:.3f}x); target <= 1.15: {'met' if best_ratio <= 1.15 else 'MISSED'}")

if __name__ == "__main__":
    main()
