"""A cancel that comes while a run waits for its seat's previous run to be gone is kept: the run never
starts (it was dropped, and the run then ran to its end: a drain's second signal found it still running)."""

from __future__ import annotations

import asyncio
import socket

from jaxplay import worker_protocol as wp
from jaxplay.sandbox.engine.warm_sandbox import WarmSandbox
from jaxplay.settings import Settings


def test_a_run_cancelled_while_the_seats_previous_run_ends_never_takes_a_spare(tmp_path) -> None:
    async def scenario() -> tuple[str, bool]:
        sandbox = WarmSandbox(0, Settings(sandbox="none", compile_cache_dir=tmp_path), "s0")
        zygote_end, worker_end = socket.socketpair()
        sandbox.control, sandbox.alive = worker_end, True  # as if started
        previous_gone = asyncio.Event()
        sandbox._exit_wait = asyncio.create_task(previous_gone.wait())  # the seat's last run, still ending
        taken: list[bool] = []

        async def take_spare(*_: object) -> tuple[int, socket.socket]:
            taken.append(True)
            raise AssertionError("a cancelled run took a spare")

        sandbox._take_spare = take_spare  # type: ignore[method-assign]
        run = asyncio.create_task(sandbox.run("r1", "print(1)", 30.0, wp.JobOptions(), lambda event: None))
        await asyncio.sleep(0.05)
        sandbox.cancel("r1")  # while it waits for the previous run
        previous_gone.set()
        result = await asyncio.wait_for(run, 5)
        zygote_end.close()
        worker_end.close()
        return str(result.status), bool(taken)

    assert asyncio.run(scenario()) == ("cancelled", False)
