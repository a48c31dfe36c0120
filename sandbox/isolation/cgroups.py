"""Memory, pids and CPU cgroups per warm sandbox, where the host lets us make them.

Hosts differ: some offer cgroup v1 controllers writable by root, some a
delegated v2 subtree, some nothing. ``SandboxCgroup.create`` detects what is
there and returns None when it cannot make a group; the caller then falls
back to rlimits (``sandbox/isolation/limits.py``). The kernel's OOM killer, told by
``oom_score_adj`` to prefer the run, kills the run and not the zygote; the
group's oom-kill counter tells the worker that this is what happened.

CPU: each sandbox's group gets the same weight while it runs a program (v1
``cpu.shares``, v2 ``cpu.weight``), so sandboxes that are busy at once share
the cores equally, however many processes each runs: a run that spins 16
processes takes one sandbox's share, not 16/17 of the host. The weight is
that of as many ordinary processes as the host has cores, so against the
host's other work a sandbox fares like a run with a thread per core, and an
idle neighbour's share is the busy sandbox's to use (weights never cap).
Between runs a sandbox only prepares its next spare, and its group weighs an
eighth of one ordinary process (``set_running``): a spare's nice 19 counts
only within its own group, so at full weight a neighbour warming its spare
took as much CPU from a run as a neighbour running a program. Without a cpu
controller the kernel's autogroup is the fallback where it is on
(``/proc/sys/kernel/sched_autogroup_enabled``): every run leads a session of
its own (``sandbox/engine/run_process.py``), and the scheduler shares the CPU
between sessions first; a run that starts new sessions itself escapes it.
``cpu_fairness()`` names which of these a sandbox has.

Groups are named for their worker's pid (``group_name``), so a worker at its
start removes the empty groups of workers that are gone
(``remove_abandoned_groups``): a killed worker cannot remove its own.
"""

from __future__ import annotations

import logging
import os
import time
from dataclasses import dataclass
from pathlib import Path

log = logging.getLogger("jaxplay.sandbox")

ROOT = Path("/sys/fs/cgroup")
AUTOGROUP = Path("/proc/sys/kernel/sched_autogroup_enabled")
# Room for the zygote (~200 MB, its MLIR contexts made ahead included) and the spare prepared beside the run
# (~250 MB) on top of the run's limit.
ZYGOTE_HEADROOM_BYTES = 512 << 20
# The zygote, a run and its prepared spare, each with JAX's per-core threads.
MAX_PIDS = max(1024, 192 * (os.cpu_count() or 1))
CORES = os.cpu_count() or 1
ABANDONED_AFTER_S = 60.0  # a dead worker's group is removed only once this old
CPU_SHARES_V1 = min(1024 * CORES, 262144)  # an ordinary process weighs 1024
CPU_WEIGHT_V2 = min(100 * CORES, 10000)  # an ordinary process weighs 100
# A slot between runs (its zygote and the spare it prepares): an eighth of an ordinary process.
IDLE_CPU_SHARES_V1 = 128
IDLE_CPU_WEIGHT_V2 = 12


@dataclass
class SandboxCgroup:
    memory_dir: Path | None
    pids_dir: Path | None
    version: int
    cpu_dir: Path | None = None

    @classmethod
    def create(cls, name: str, memory_limit_bytes: int, mode: str = "auto") -> SandboxCgroup | None:
        if mode == "off":
            log.info("cgroups turned off for %s: memory is capped by rlimit instead", name)
            return None
        try:
            if (ROOT / "cgroup.controllers").exists():
                group = cls._create_v2(name, memory_limit_bytes)
            else:
                group = cls._create_v1(name, memory_limit_bytes)
        except OSError as exc:
            log.info("no cgroup for %s (%s): memory is capped by rlimit instead", name, exc)
            return None
        if group is not None:
            log.info("sandbox %s: CPU shared between sandboxes by %s", name, group.cpu_fairness())
        return group

    @classmethod
    def _create_v1(cls, name: str, memory_limit_bytes: int) -> SandboxCgroup | None:
        memory_root, pids_root, cpu_root = ROOT / "memory", ROOT / "pids", ROOT / "cpu"
        if not os.access(memory_root, os.W_OK):
            return None
        memory_dir = memory_root / "jaxplay" / name
        memory_dir.mkdir(parents=True, exist_ok=True)
        (memory_dir / "memory.limit_in_bytes").write_text(str(memory_limit_bytes + ZYGOTE_HEADROOM_BYTES))
        pids_dir = None
        if os.access(pids_root, os.W_OK):
            pids_dir = pids_root / "jaxplay" / name
            pids_dir.mkdir(parents=True, exist_ok=True)
            (pids_dir / "pids.max").write_text(str(MAX_PIDS))
        return cls(memory_dir, pids_dir, 1, _cpu_group_v1(cpu_root, name))

    @classmethod
    def _create_v2(cls, name: str, memory_limit_bytes: int) -> SandboxCgroup | None:
        own = Path("/proc/self/cgroup").read_text().strip().split("::", 1)[-1]
        parent = ROOT / own.lstrip("/")
        controllers = (parent / "cgroup.controllers").read_text().split()
        if "memory" not in controllers or not os.access(parent, os.W_OK):
            return None
        group = parent / f"jaxplay-{name}"
        group.mkdir(exist_ok=True)
        (group / "memory.max").write_text(str(memory_limit_bytes + ZYGOTE_HEADROOM_BYTES))
        (group / "memory.swap.max").write_text("0") if (group / "memory.swap.max").exists() else None
        if "pids" in controllers:
            (group / "pids.max").write_text(str(MAX_PIDS))
        cpu_dir = None
        if "cpu" in controllers and (group / "cpu.weight").exists():
            (group / "cpu.weight").write_text(str(CPU_WEIGHT_V2))
            cpu_dir = group
        return cls(group, group if "pids" in controllers else None, 2, cpu_dir)

    def set_running(self, running: bool) -> None:
        """The group's CPU weight: a sandbox's full weight while a run executes, an eighth of a process between
        runs. A host that refuses the write keeps the weight it has (fairness, not containment)."""
        if self.cpu_dir is None:
            return
        name, value = (("cpu.shares", CPU_SHARES_V1 if running else IDLE_CPU_SHARES_V1) if self.version == 1
                       else ("cpu.weight", CPU_WEIGHT_V2 if running else IDLE_CPU_WEIGHT_V2))
        try:
            (self.cpu_dir / name).write_text(str(value))
        except OSError as exc:
            log.debug("cpu weight of %s not set: %s", self.cpu_dir, exc)

    def cpu_fairness(self) -> str:
        if self.cpu_dir is not None:
            return "cgroup v1 cpu.shares" if self.version == 1 else "cgroup v2 cpu.weight"
        return no_cgroup_cpu_fairness()

    def procs_files(self) -> list[Path]:
        dirs = {d for d in (self.memory_dir, self.pids_dir, self.cpu_dir) if d is not None}
        return sorted(d / "cgroup.procs" for d in dirs)

    def oom_kills(self) -> int:
        if self.memory_dir is None:
            return 0
        source = "memory.oom_control" if self.version == 1 else "memory.events"
        try:
            for line in (self.memory_dir / source).read_text().splitlines():
                key, _, value = line.partition(" ")
                if key == "oom_kill":
                    return int(value)
        except OSError:
            pass
        return 0

    def remove(self) -> bool:
        """Remove the groups; False while one still holds a process (the sandbox's last ones exiting)."""
        gone = True
        for d in {d for d in (self.memory_dir, self.pids_dir, self.cpu_dir) if d is not None}:
            try:
                d.rmdir()
            except FileNotFoundError:
                pass
            except OSError:
                gone = False
        return gone


def group_name(worker_pid: int, sandbox: str, number: int) -> str:
    """A sandbox group's name: it starts with its worker's pid, so a later worker knows whose it was."""
    return f"{worker_pid}-{sandbox}-{number}"


def remove_abandoned_groups() -> int:
    """Remove the empty groups of workers that are gone (killed before they could): each worker made
    a few per sandbox start, and a host that restarts workers would otherwise gather them by thousands.
    A group of a live worker, or one still holding a process, is left. Returns how many were removed."""
    candidates = [*_children(ROOT / "memory" / "jaxplay"), *_children(ROOT / "pids" / "jaxplay"),
                  *_children(ROOT / "cpu", "jaxplay-")]
    try:
        own = Path("/proc/self/cgroup").read_text().strip().split("::", 1)[-1]
        candidates += _children(ROOT / own.lstrip("/"), "jaxplay-") if (ROOT / "cgroup.controllers").exists() else []
    except OSError:
        pass
    removed = 0
    for group in candidates:
        owner = group.name.removeprefix("jaxplay-").split("-", 1)[0]
        if not owner.isdigit() or _alive(int(owner)) or _younger_than(group, ABANDONED_AFTER_S):
            continue  # a worker in another pid namespace may be between making a group and joining it
        try:
            group.rmdir()  # refused while it holds a process
            removed += 1
        except OSError:
            pass
    return removed


def _children(folder: Path, prefix: str = "") -> list[Path]:
    try:
        return [d for d in folder.iterdir() if d.is_dir() and d.name.startswith(prefix)]
    except OSError:
        return []


def _younger_than(path: Path, seconds: float) -> bool:
    try:
        return time.time() - path.stat().st_mtime < seconds
    except OSError:
        return True


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _cpu_group_v1(cpu_root: Path, name: str) -> Path | None:
    """A cpu group of the sandbox's own directly under the hierarchy's root: there it weighs against the
    host's processes with its own shares (under a common parent, all sandboxes together would weigh one)."""
    if not os.access(cpu_root, os.W_OK) or not (cpu_root / "cpu.shares").exists():
        return None
    cpu_dir = cpu_root / f"jaxplay-{name}"
    try:
        cpu_dir.mkdir(exist_ok=True)
        (cpu_dir / "cpu.shares").write_text(str(CPU_SHARES_V1))
    except OSError as exc:
        log.info("no cpu cgroup for %s (%s)", name, exc)
        return None
    return cpu_dir


def no_cgroup_cpu_fairness() -> str:
    """The fallback without a cpu controller: what shares the CPU between sandboxes, in words."""
    try:
        enabled = AUTOGROUP.read_text().strip() == "1"
    except OSError:
        enabled = False
    return "the kernel's autogroup (a session per run)" if enabled else "nothing (every process for itself)"
