"""Sandbox cgroups do not pile up on the host: a closed sandbox's groups go, and so do those of dead workers.

Each sandbox start makes a memory, pids and cpu group; a worker killed before it
could remove them (or a group still emptying at close) left them for good, and
a host that ran workers for a while held thousands. Real cgroups, where this
host lets root make them.
"""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from jaxplay.sandbox.isolation import cgroups

MEMORY = cgroups.ROOT / "memory" / "jaxplay"
pytestmark = pytest.mark.skipif(not os.access(cgroups.ROOT / "memory", os.W_OK) or os.geteuid() != 0,
                                reason="needs writable cgroup v1 memory groups (root)")


def dead_pid() -> int:
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    child.wait()
    return child.pid


def test_empty_groups_of_dead_workers_are_removed_and_live_ones_kept(monkeypatch) -> None:
    gone, live = dead_pid(), os.getpid()
    made = [cgroups.SandboxCgroup.create(cgroups.group_name(pid, "cleanup-test", 0), 64 << 20) for pid in (gone, live)]
    assert all(made)
    try:
        cgroups.remove_abandoned_groups()  # just made: its worker may be in another pid namespace, joining it
        assert (MEMORY / cgroups.group_name(gone, "cleanup-test", 0)).exists()
        monkeypatch.setattr(cgroups, "ABANDONED_AFTER_S", 0.0)
        cgroups.remove_abandoned_groups()
        assert not (MEMORY / cgroups.group_name(gone, "cleanup-test", 0)).exists()
        assert (MEMORY / cgroups.group_name(live, "cleanup-test", 0)).exists()  # its worker may still use it
    finally:
        for group in made:
            group.remove()


def test_a_group_holding_a_process_is_never_removed(monkeypatch) -> None:
    monkeypatch.setattr(cgroups, "ABANDONED_AFTER_S", 0.0)
    gone = dead_pid()
    group = cgroups.SandboxCgroup.create(cgroups.group_name(gone, "cleanup-busy", 0), 64 << 20)
    assert group is not None
    sleeper = subprocess.Popen(["sleep", "30"])
    try:
        (group.memory_dir / "cgroup.procs").write_text(str(sleeper.pid))
        cgroups.remove_abandoned_groups()
        assert group.memory_dir.exists() and not group.remove()
    finally:
        sleeper.kill()
        sleeper.wait()
    assert group.remove()  # once empty
