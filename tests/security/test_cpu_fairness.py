"""CPU between slots: each slot's processes, whatever sessions they make, share one weight equal to the others'.

The speed itself is measured by ``bench/cpu_fairness.py`` (a compute-bound run beside a neighbour that
spins 16 processes, side by side, target at most 2x slower); here the mechanism is checked from the host:
where each process of a run is accounted, and with what weight.
"""

from __future__ import annotations

import os
import threading
import time
from pathlib import Path

import pytest

from jaxplay.sandbox.isolation import cgroups
from tests import host_processes
from tests.conftest import done_of


def cpu_group(pid: int) -> str | None:
    """The cgroup a host process's CPU time is accounted to (v1 'cpu' hierarchy, or v2's single one)."""
    try:
        lines = Path(f"/proc/{pid}/cgroup").read_text().splitlines()
    except OSError:
        return None
    for line in lines:
        _, controllers, path = line.split(":", 2)
        if "cpu" in controllers.split(",") or (controllers == "" and (cgroups.ROOT / "cgroup.controllers").exists()):
            return path
    return None


def weight(group: str) -> int:
    base = cgroups.ROOT / "cpu" if (cgroups.ROOT / "cpu" / "cpu.shares").exists() else cgroups.ROOT
    folder = base / group.lstrip("/")
    name = "cpu.shares" if (folder / "cpu.shares").exists() else "cpu.weight"
    return int((folder / name).read_text())


def has_cpu_controller() -> bool:
    if (cgroups.ROOT / "cgroup.controllers").exists():
        return "cpu" in (cgroups.ROOT / "cgroup.controllers").read_text().split()
    return (cgroups.ROOT / "cpu" / "cpu.shares").exists() and os.access(cgroups.ROOT / "cpu", os.W_OK)


def slot_groups(live) -> dict[int, str | None]:
    """Each of the live server's zygotes (not their forks, which share their command line) and its cpu group."""
    forks = {proc.pid: proc.parent for proc in host_processes.all_processes()
             if "-m jaxplay.sandbox.engine.zygote" in proc.cmdline}
    return {pid: cpu_group(pid) for pid, parent in forks.items()
            if parent not in forks and host_processes.is_descendant(pid, live.process.pid)}


SPIN_IN_NEW_SESSIONS = """
import subprocess, sys, time
children = [subprocess.Popen([sys.executable, "-c", "while True: pass", "{marker}"], start_new_session=True)
            for _ in range(4)]
time.sleep(3)
print("spinning")
"""


def weights_now(groups: dict[int, str | None]) -> list[int]:
    return sorted(weight(group) for group in groups.values() if group is not None)


@pytest.mark.attack("resource exhaustion")
def test_each_slot_has_a_cpu_group_of_its_own_full_weight_while_it_runs_and_little_between_runs(live):
    """Equal weights for slots that run programs; a slot between runs (preparing its next spare, whose nice
    19 counts only inside its group) weighs an eighth of a process, so it takes little from a run beside it."""
    if not has_cpu_controller():
        pytest.skip("this host has no cpu controller: the kernel's autogroup is the fallback (docs/security.md)")
    groups = slot_groups(live)
    assert len(groups) == 2 and len(set(groups.values())) == 2, groups  # one per slot
    assert all(group not in (None, "/") for group in groups.values()), groups
    v1 = (cgroups.ROOT / "cpu" / "cpu.shares").exists()
    running, idle = (cgroups.CPU_SHARES_V1, cgroups.IDLE_CPU_SHARES_V1) if v1 else \
        (cgroups.CPU_WEIGHT_V2, cgroups.IDLE_CPU_WEIGHT_V2)
    assert weights_now(groups) == [idle, idle]
    seen: list[list[int]] = []
    sleeper = threading.Thread(target=lambda: live.run("import time\ntime.sleep(3)\nprint('slept')"))
    sleeper.start()
    deadline = time.monotonic() + 20
    while sleeper.is_alive() and time.monotonic() < deadline:
        seen.append(weights_now(groups))
        time.sleep(0.1)
    sleeper.join()
    assert [idle, running] in seen, seen  # the slot running the program, beside the one between runs
    assert weights_now(groups) == [idle, idle]


@pytest.mark.attack("resource exhaustion")
def test_processes_in_sessions_of_their_own_stay_in_their_slots_cpu_group(live):
    """A run that spreads its work over new sessions (out of reach of a per-session grouping) still
    spends its slot's share alone."""
    if not has_cpu_controller():
        pytest.skip("this host has no cpu controller: the kernel's autogroup is the fallback (docs/security.md)")
    marker = f"jaxplay-spin-{time.time_ns()}"
    seen: list[str | None] = []

    def look() -> None:
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline and not seen:
            seen.extend(cpu_group(proc.pid) for proc in host_processes.matching(marker))
            time.sleep(0.1)

    watcher = threading.Thread(target=look)
    watcher.start()
    events = live.run(SPIN_IN_NEW_SESSIONS.format(marker=marker))
    watcher.join()
    assert done_of(events)["status"] == "ok"
    assert seen and set(seen) <= set(slot_groups(live).values()) - {None, "/"}, seen
