"""CPU time a process tree has used, from /proc: for the benchmarks' "CPU per run".

A process's ``utime + stime`` counts its own threads; its ``cutime + cstime`` counts every child
it has reaped (and, through theirs, every descendant reaped before them). Summed over the live
processes of a tree, that is every CPU second the tree has spent since its root started: the
processes of runs that have ended included, once their parents have reaped them (a sandbox's
init, keeper and zygote reap at once). Processes of another tree are never counted.
"""

from __future__ import annotations

import os
import time
from pathlib import Path

TICKS_PER_S = os.sysconf("SC_CLK_TCK")


def _stat(pid: int) -> tuple[str, int, float] | None:
    """The name, parent pid and CPU seconds of ``pid`` and its reaped children, or None if gone."""
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    name, fields = text[text.index("(") + 1:text.rindex(")")], text[text.rindex(")") + 1:].split()
    # After the name: state ppid ... utime(14) stime(15) cutime(16) cstime(17), counted from 1.
    return name, int(fields[1]), sum(int(f) for f in fields[11:15]) / TICKS_PER_S


def tree_cpu_s(root: int, sandbox_name: str = "bwrap") -> tuple[float, float]:
    """(CPU seconds of the whole tree under ``root``, of which those of its sandboxes: the subtrees
    of processes named ``sandbox_name``), read in one pass over /proc."""
    found = {int(e.name): s for e in Path("/proc").iterdir() if e.name.isdigit() and (s := _stat(int(e.name)))}
    place: dict[int, str] = {root: "host"}  # host, sandbox, or outside

    def where(pid: int) -> str:
        if pid in place:
            return place[pid]
        if pid not in found or pid <= 1:
            return "outside"
        name, parent, _ = found[pid]
        above = where(parent)
        place[pid] = "sandbox" if above == "host" and name == sandbox_name else above
        return place[pid]

    total = sandboxes = 0.0
    for pid, (_, _, seconds) in found.items():
        kind = where(pid)
        total += seconds if kind != "outside" else 0.0
        sandboxes += seconds if kind == "sandbox" else 0.0
    return total, sandboxes


def settle(root: int, quiet_share: float = 0.05, window_s: float = 0.5, limit_s: float = 20.0) -> float:
    """Wait until the tree uses under ``quiet_share`` of one core (its spares prepared, its runs torn
    down); returns its CPU seconds then."""
    deadline = time.monotonic() + limit_s
    before = tree_cpu_s(root)[0]
    while True:
        time.sleep(window_s)
        now = tree_cpu_s(root)[0]
        if now - before < quiet_share * window_s or time.monotonic() > deadline:
            return now
        before = now
