"""The fault suite, readiness: /readyz says whether this replica can serve a run now, nothing less.

With ``--broker`` any replica's worker runs any replica's runs, so a replica
whose own local worker died stays ready (its runs go to the others) while
``/readyz`` names the missing worker as degraded.
"""

from __future__ import annotations

import asyncio
import os
import signal
from pathlib import Path

import pytest

from tests.live.faults import Client, check_run_contract, http_status, readiness, replica, wait_until

pytestmark = pytest.mark.live


def local_worker_pids(server_pid: int) -> list[int]:
    """The ``jaxplay worker`` processes a server started (its children)."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            parent = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
            command = (entry / "cmdline").read_bytes().split(b"\0")
        except (OSError, IndexError, ValueError):
            continue
        if parent == server_pid and b"worker" in command:
            found.append(int(entry.name))
    return found


def test_a_replica_whose_local_worker_died_stays_ready_while_another_serves(redis_server, tmp_path):
    a = replica(tmp_path, "a", redis_server.url)
    a.wait_ready()
    b = replica(tmp_path, "b", redis_server.url, key_from=tmp_path / "a")
    b.wait_ready()
    try:
        for server in (a, b):
            wait_until(lambda s=server: readiness(s)[0] == 200 and sum(
                e["workers"] for e in http_status(s, "/api/backends")[1]["backends"]) == 2, 60, "both workers known")
        [worker] = local_worker_pids(b.process.pid)
        os.kill(worker, signal.SIGKILL)  # B restarts it after a second, and its start takes several more
        wait_until(lambda: b.get_json("/healthz")["workers"] == 0, 10, "B's worker gone")
        status, ready = readiness(b)
        assert status == 200, ready  # A's worker serves B's runs
        assert ready["checks"]["local_workers"]["joined"] == 0 and ready["degraded"] == ["local_workers"], ready
        assert ready["checks"]["workers"] == {"cpu": 1} and ready["serving"]["runs"] is True, ready

        async def one_run() -> dict:
            async with Client(b) as client:
                run_id = await client.run("print('served by another replica')")
                await client.all_done([run_id], 60)
                return check_run_contract(client.events[run_id])

        assert asyncio.run(one_run())["status"] == "ok"
        wait_until(lambda: "degraded" not in readiness(b)[1], 120, "B's worker back")  # restarted, rejoined
    finally:
        a.stop()
        b.stop()
