"""Does ``playground.timeit`` in the sandbox measure what ``timeit`` measures in a plain process?

One invocation, alternating rounds of:
- playground: a run over /ws to a real server with its real sandboxed worker,
  ``timeit(matmul, x, x, repeat=R)`` on a 1024x1024 float32 matmul; its
  ``timing`` event's median;
- plain: a warm plain Python process (same JAX, same XLA_FLAGS as the
  worker's runs, no capture, no sandbox) that stays up across rounds and
  times ``matmul(x, x).block_until_ready()`` with the standard library's
  ``timeit.Timer`` (``autorange`` then ``repeat``, R runs): the median.

Prints each round and the ratio of the medians over all rounds (target:
0.85 to 1.15). The machine's other load moves both sides alike because
rounds alternate.
Usage: python bench/timing_fidelity.py [--rounds 5] [--repeat 7]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from jaxplay.settings import Settings  # noqa: E402
from tests.live_server import LiveServer, done_of, output_text, running_server  # noqa: E402

SETUP = """
import jax, jax.numpy as jnp
x = jax.random.normal(jax.random.key(0), (1024, 1024), dtype=jnp.float32)
matmul = jax.jit(lambda a, b: a @ b)
"""

PLAYGROUND_CODE = SETUP + """
from playground import timeit
timeit(matmul, x, x, repeat={repeat})
"""

# A plain process that stays warm: one JSON line of per-loop seconds per request on stdin.
PLAIN_SERVER = SETUP + """
import json, sys, timeit
matmul(x, x).block_until_ready()
timer = timeit.Timer(lambda: matmul(x, x).block_until_ready())
for request in sys.stdin:
    repeat = int(request)
    number, _ = timer.autorange()
    runs = timer.repeat(repeat=repeat, number=number)
    print(json.dumps({"loops": number, "samples": [run / number for run in runs]}), flush=True)
"""


def playground_round(server: LiveServer, repeat: int) -> tuple[float, int]:
    events = server.run(PLAYGROUND_CODE.format(repeat=repeat), timeout=180, fresh=True)
    done = done_of(events)
    if done["status"] != "ok":
        raise RuntimeError(f"playground run failed: {done} {output_text(events, 'stderr')[-2000:]}")
    (timing,) = [e for e in events if e["type"] == "timing"]
    return timing["median_ms"], timing["loops"]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--repeat", type=int, default=7)
    args = parser.parse_args()
    devices = Settings().cpu_devices
    env = {**os.environ, "XLA_FLAGS": f"--xla_force_host_platform_device_count={devices}", "JAX_PLATFORMS": "cpu"}
    plain = subprocess.Popen([sys.executable, "-c", PLAIN_SERVER], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                             text=True, env=env)
    playground_medians: list[float] = []
    plain_medians: list[float] = []
    print(f"matmul 1024x1024 float32, {args.repeat} runs per timeit, {args.rounds} alternating rounds, "
          f"{devices} virtual CPU devices")
    try:
        with running_server() as server:
            playground_round(server, 2)  # warm the worker's pool
            for round_number in range(1, args.rounds + 1):
                ours, our_loops = playground_round(server, args.repeat)
                assert plain.stdin is not None and plain.stdout is not None
                plain.stdin.write(f"{args.repeat}\n")
                plain.stdin.flush()
                reply = json.loads(plain.stdout.readline())
                theirs = statistics.median(reply["samples"]) * 1e3
                playground_medians.append(ours)
                plain_medians.append(theirs)
                print(f"round {round_number}: playground timeit {ours:8.3f} ms ({our_loops} loops)   "
                      f"plain timeit {theirs:8.3f} ms ({reply['loops']} loops)   ratio {ours / theirs:.3f}")
    finally:
        plain.kill()
        plain.wait()
    ours, theirs = statistics.median(playground_medians), statistics.median(plain_medians)
    ratio = ours / theirs
    verdict = "met" if 0.85 <= ratio <= 1.15 else "MISSED"
    print(f"median over rounds: playground {ours:.3f} ms, plain {theirs:.3f} ms, "
          f"ratio {ratio:.3f} (target 0.85-1.15: {verdict})")


if __name__ == "__main__":
    main()
