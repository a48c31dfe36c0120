"""A warm sandbox closed and another started in the same worker: the second must hear its own zygote.

A worker stops and starts sandboxes while it serves (an idle JAX runtime's
sandboxes stop, a broken sandbox restarts). The sandbox's socket to its zygote is
watched by the event loop; closing it while the loop still believes it
watched leaves a stale entry under that fd number, and the next socket given
the same number (the next sandbox's) is then never watched: its start waits
forever for "ready". Real sandboxes, one event loop, as in the worker.
"""

from __future__ import annotations

import asyncio
import dataclasses
import gc
import os

import pytest

from jaxplay import worker_protocol as wp
from jaxplay.sandbox.engine.warm_sandbox import WarmSandbox
from jaxplay.sandbox.isolation import cgroups
from jaxplay.settings import Settings
from tests.live_server import LiveServer

pytestmark = pytest.mark.live


async def _start_close_start() -> list[str]:
    settings = dataclasses.replace(Settings.from_env(), cgroups="off")
    printed: list[str] = []
    for round_ in range(3):
        sandbox = WarmSandbox(0, settings, f"lifecycle-{round_}")
        try:
            await asyncio.wait_for(sandbox.start(), 60)  # the old code waited here forever from the second round
            events: list[dict] = []
            result = await sandbox.run(f"r{round_}", f"print({round_})", 60.0, wp.JobOptions(), events.append)
            assert str(result.status) == "ok", (result, events)
            printed += [e["text"] for e in events if e.get("type") == "stdout"]
        finally:
            await sandbox.close()
    return printed


def test_a_sandbox_started_after_another_closed_hears_its_zygote() -> None:
    assert asyncio.run(_start_close_start()) == ["0\n", "1\n", "2\n"]


def test_closing_a_sandbox_leaves_no_task_failing_unheard() -> None:
    unheard: list[dict] = []

    async def scenario() -> None:
        asyncio.get_running_loop().set_exception_handler(lambda _loop, context: unheard.append(context))
        await _start_close_start()
        await asyncio.sleep(0.1)  # a failed task is reported when it is collected

    asyncio.run(scenario())
    gc.collect()
    assert not [c for c in unheard if "exception" in c], unheard


def test_the_cgroups_of_a_closed_sandbox_are_removed() -> None:
    async def scenario() -> tuple[bool, list]:
        sandbox = WarmSandbox(0, Settings.from_env(), "lifecycle-groups")
        await asyncio.wait_for(sandbox.start(), 60)
        group = sandbox.cgroup
        await sandbox.close()
        if group is None:
            pytest.skip("this host gives sandboxes no cgroup")
        for _ in range(40):  # the sandbox's last processes leave within moments; then its groups go
            left = [p.parent for p in group.procs_files() if p.parent.exists()]
            if not left:
                return True, []
            await asyncio.sleep(0.25)
        return False, left

    removed, left = asyncio.run(scenario())
    assert removed, left


def test_a_server_stopped_normally_leaves_no_sandbox_cgroup_behind(tmp_path) -> None:
    """A stop (SIGTERM) closes the worker's sandboxes and waits, briefly, for their groups to empty and go;
    before, the worker exited with the removal still pending, and the groups stayed until a later worker
    start on the host removed them."""
    memory = cgroups.ROOT / "memory" / "jaxplay"
    if not os.access(cgroups.ROOT / "memory", os.W_OK) or os.geteuid() != 0:
        pytest.skip("needs writable cgroup v1 memory groups (root)")
    before = {group.name for group in memory.glob("*")}
    server = LiveServer(tmp_path / "data", ["--slots", "1"])
    try:
        server.wait_ready()
        # This server's own: its local workers' sandboxes are named for its port (other tests run beside it).
        made = {group.name for group in memory.glob(f"*@*:{server.port}-*")} - before
        assert made, "the sandbox made no memory group"
    finally:
        server.stop()
    assert not [name for name in made if (memory / name).exists()]
