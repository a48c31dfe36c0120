"""A memory + pids cgroup per sandbox slot, where the host lets us make one.

Hosts differ: some offer cgroup v1 controllers writable by root, some a
delegated v2 subtree, some nothing. ``SlotCgroup.create`` detects what is
there and returns None when it cannot make a group; the caller then falls
back to rlimits (``sandbox/isolation/limits.py``). The kernel's OOM killer, told by
``oom_score_adj`` to prefer the run, kills the run and not the zygote; the
group's oom-kill counter tells the worker that this is what happened.
"""

from __future__ import annotations

import logging
import os
from dataclasses import dataclass
from pathlib import Path

log = logging.getLogger("jaxplay.sandbox")

ROOT = Path("/sys/fs/cgroup")
# Room for the zygote (~150 MB) and the spare prepared beside the run (~250 MB) on top of the run's limit.
ZYGOTE_HEADROOM_BYTES = 512 << 20
# The zygote, a run and its prepared spare, each with JAX's per-core threads.
MAX_PIDS = max(1024, 192 * (os.cpu_count() or 1))


@dataclass
class SlotCgroup:
    memory_dir: Path | None
    pids_dir: Path | None
    version: int

    @classmethod
    def create(cls, name: str, memory_limit_bytes: int, mode: str = "auto") -> SlotCgroup | None:
        if mode == "off":
            log.info("cgroups turned off for %s: memory is capped by rlimit instead", name)
            return None
        try:
            if (ROOT / "cgroup.controllers").exists():
                return cls._create_v2(name, memory_limit_bytes)
            return cls._create_v1(name, memory_limit_bytes)
        except OSError as exc:
            log.info("no cgroup for %s (%s): memory is capped by rlimit instead", name, exc)
            return None

    @classmethod
    def _create_v1(cls, name: str, memory_limit_bytes: int) -> SlotCgroup | None:
        memory_root, pids_root = ROOT / "memory", ROOT / "pids"
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
        return cls(memory_dir, pids_dir, 1)

    @classmethod
    def _create_v2(cls, name: str, memory_limit_bytes: int) -> SlotCgroup | None:
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
        return cls(group, group if "pids" in controllers else None, 2)

    def procs_files(self) -> list[Path]:
        dirs = {d for d in (self.memory_dir, self.pids_dir) if d is not None}
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

    def remove(self) -> None:
        for d in {d for d in (self.memory_dir, self.pids_dir) if d is not None}:
            try:
                d.rmdir()
            except OSError:
                pass  # still has processes for a moment; removed on the next start
