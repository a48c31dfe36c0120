"""What the run's seccomp filter costs a system call, side by side with another checkout's filter.

Inside real runs, the time per call of a plain allowed call (``getppid``: since Linux 5.11 the
kernel answers it from the filter's cache without running the program), a call whose arguments the
filter checks (``ioctl(TCGETS)`` on a pipe, what every ``open()`` in text mode makes), a ``futex``
wake (JAX's threads make thousands), and opening and closing a file. Each checkout is measured in
turn, round after round, and the ratio of this checkout's median to the other's is printed.

Usage: python bench/syscall_cost.py --checkout ../main [--rounds 5]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.checkouts import servers  # noqa: E402
from tests.live_server import done_of, output_text  # noqa: E402

PROGRAM = r"""
import ctypes, json, os, time
libc = ctypes.CDLL(None, use_errno=True)
read_end, _ = os.pipe()
buffer = ctypes.create_string_buffer(64)
word = ctypes.c_int(0)
FUTEX_WAKE_PRIVATE = 129
calls = {
    "getppid (cached allow)": lambda: libc.getppid(),
    "ioctl TCGETS (argument checked)": lambda: libc.ioctl(read_end, 0x5401, buffer),
    "futex wake": lambda: libc.syscall(202 if os.uname().machine == "x86_64" else 98, ctypes.byref(word),
                                       FUTEX_WAKE_PRIVATE, 1, 0, 0, 0),
    "open and close /dev/null": lambda: os.close(os.open("/dev/null", os.O_RDONLY)),
}
result = {}
for name, call in calls.items():
    best = float("inf")
    for _ in range(5):
        began = time.perf_counter_ns()
        for _ in range(20000):
            call()
        best = min(best, (time.perf_counter_ns() - began) / 20000)
    result[name] = best
print(json.dumps(result))
"""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--checkout", type=Path, required=True, help="another checkout, with its own .venv")
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    with servers([args.checkout]) as started:
        samples: dict[Path, dict[str, list[float]]] = {checkout: {} for checkout in started}
        for round_number in range(args.rounds):
            for checkout, server in list(started.items())[::-1 if round_number % 2 else 1]:
                events = server.run(PROGRAM, timeout=120)
                assert done_of(events)["status"] == "ok", events[-3:]
                for name, ns in json.loads(output_text(events).strip().splitlines()[-1]).items():
                    samples[checkout].setdefault(name, []).append(ns)
    this, other = list(samples)
    print(f"ns per call, median of {args.rounds} runs (each the best of 5 x 20000 calls)")
    print(f"{'call':<34}{str(this)[-28:]:>30}{str(other)[-28:]:>30}  ratio")
    for name in samples[this]:
        mine, theirs = statistics.median(samples[this][name]), statistics.median(samples[other][name])
        print(f"{name:<34}{mine:>30.0f}{theirs:>30.0f}  {mine / theirs:.2f}x")


if __name__ == "__main__":
    main()
