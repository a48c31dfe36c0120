"""A sandbox, its zygote or a prepared spare killed from outside (kill -9 by an operator, the host's OOM
killer) between runs: the worker starts again what died, and no later run is lost or blamed on its program.

Before: a sandbox that died while idle stayed ``alive`` until a run landed on it; the run was lost
("The sandbox ended unexpectedly") and, when the death was found before the handover, the sandbox was
never started again, so every later run on that seat was lost too (after two kills, a worker with no
sandbox at all). A run handed to a spare whose keeper had just been killed was reported as its
program's crash ("The Python process ended abruptly (signal 9)"), and so was a running run whose init
the host killed. A sandbox that died while a run waited for its seat's last run to end was started
again twice, in place and by its pool: a third sandbox, owned by no pool, stayed until the worker's end.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import time
import uuid
from pathlib import Path

import pytest
import websockets

from tests.live.faults import output_of, wait_until
from tests.live_server import LiveServer, running_server

pytestmark = pytest.mark.live

KILLED_FROM_OUTSIDE = "killed from outside it (by the host, not by your program)"


def _children() -> dict[int, list[int]]:
    tree: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                parent = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                continue
            tree.setdefault(parent, []).append(int(entry.name))
    return tree


def _command(pid: int) -> list[bytes]:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
    except OSError:
        return []


def _zygote(command: list[bytes]) -> bool:
    # Any Python (``python``, ``python3``, a runtime's ``python3.13``), not bwrap, whose arguments name it too.
    return bool(command) and os.path.basename(command[0]).startswith(b"python") \
        and b"jaxplay.sandbox.engine.zygote" in command


def sandbox_processes(server: LiveServer) -> list[tuple[int, int, list[int]]]:
    """Each sandbox of the server's worker: its outermost process, its zygote and the zygote's keepers."""
    tree = _children()
    [worker] = [p for p in tree.get(server.process.pid, []) if b"worker" in _command(p)]
    found = []
    for outer in tree.get(worker, []):
        below, zygote = [outer], None
        while below and zygote is None:
            below = [c for p in below for c in tree.get(p, [])]
            zygote = next((p for p in below if _zygote(_command(p))), None)
        if zygote is not None:
            found.append((outer, zygote, tree.get(zygote, [])))
    return found


def _both(sandboxes: list[tuple[int, int, list[int]]]) -> list[tuple[int, int, list[int]]] | None:
    """Both seats' sandboxes, once each is ready (its zygote has forked a spare)."""
    return sandboxes if len(sandboxes) == 2 and all(keepers for _, _, keepers in sandboxes) else None


def _kill(pid: int) -> None:
    try:
        os.kill(pid, signal.SIGKILL)
    except ProcessLookupError:
        pass


def _printed_what_it_should(server: LiveServer, tag: str) -> None:
    events = server.run(f"print({tag!r})  # {uuid.uuid4().hex}", timeout=150)
    assert events[-1].get("status") == "ok" and output_of(events).strip() == tag, events[-3:]


def test_a_sandbox_killed_between_runs_is_started_again_and_no_later_run_is_lost() -> None:
    with running_server() as server:
        _printed_what_it_should(server, "before")
        for round_, which in enumerate(("outer", "zygote", "both")):
            sandboxes = wait_until(lambda: _both(sandbox_processes(server)), 60, "a sandbox on each seat")
            victims = {"outer": [sandboxes[0][0]], "zygote": [sandboxes[1][1]],
                       "both": [s[0] for s in sandboxes]}[which]
            for victim in victims:
                _kill(victim)
            time.sleep(0.1)  # its runs come just after, before the worker has started it again
            for i in range(3):  # before: each lost ("The sandbox ended unexpectedly"), then every one after
                _printed_what_it_should(server, f"after {which} {round_}.{i}")
        # Every seat has a sandbox again, started by the worker without waiting for a run to need it.
        wait_until(lambda: _both(sandbox_processes(server)), 60, "both sandboxes running again")


def test_a_spare_killed_as_a_run_comes_is_never_blamed_on_the_program() -> None:
    """A keeper killed just as a run is handed to its spare: the run goes again when its program had not
    reached the spare, and where it had, says that the host killed it; later runs are unharmed."""
    with running_server() as server:
        _printed_what_it_should(server, "before")
        endings = []
        for round_ in range(6):
            time.sleep(0.3)
            for _, _, keepers in sandbox_processes(server):
                for keeper in keepers:
                    _kill(keeper)
            events = server.run(f"print('raced {round_}')  # {uuid.uuid4().hex}", timeout=150)
            done = events[-1]
            endings.append(done)
            assert done.get("status") == "ok" or KILLED_FROM_OUTSIDE in done.get("message", ""), done
            _printed_what_it_should(server, f"after {round_}")
        assert not any("ended abruptly" in (d.get("message") or "") for d in endings), endings


def _running_on(server: LiveServer, keepers_of_a_run: int = 2) -> tuple[int, int, list[int]]:
    """The sandbox whose zygote holds a run's keeper beside its next spare's."""
    return wait_until(lambda: next((s for s in sandbox_processes(server) if len(s[2]) == keepers_of_a_run), None),
                      30, "a sandbox with a run in it")


async def _run_then(server: LiveServer, code: str, fault, ws_headers: dict[str, str]) -> list[dict]:
    """Run ``code``; once it has printed, call ``fault()``; the run's events to its ``done``."""
    events: list[dict] = []
    async with websockets.connect(server.ws_url, max_size=None, additional_headers=ws_headers) as ws:
        await ws.send(json.dumps({"type": "run", "id": "r", "code": code, "fresh": True}))
        async with asyncio.timeout(120):
            while not events or events[-1]["type"] != "done":
                events.append(json.loads(await ws.recv()))
                if events[-1]["type"] == "stdout" and len([e for e in events if e["type"] == "stdout"]) == 1:
                    await asyncio.to_thread(fault)
    return events


def _children_of(pid: int) -> list[int]:
    return _children().get(pid, [])


def test_a_running_runs_init_killed_by_the_host_is_not_blamed_on_the_program() -> None:
    with running_server() as server:
        _printed_what_it_should(server, "before")
        wait_until(lambda: _both(sandbox_processes(server)), 60, "a sandbox on each seat")

        def kill_the_init() -> None:
            time.sleep(0.3)
            _, _, keepers = _running_on(server)
            inits = [init for keeper in sorted(keepers)[:1] for init in _children_of(keeper)]
            assert inits, keepers
            _kill(inits[0])

        code = f"import time\nprint('started', flush=True)\ntime.sleep(5)\nprint('finished')  # {uuid.uuid4().hex}"
        events = asyncio.run(_run_then(server, code, kill_the_init, server.browser_headers()))
        done = events[-1]
        # Before: "The Python process ended abruptly (signal 9)."
        assert done["status"] == "crashed" and KILLED_FROM_OUTSIDE in done["message"], done
        assert "finished" not in output_of(events)
        _printed_what_it_should(server, "after")


def test_a_sandbox_killed_while_a_run_waits_for_its_seat_is_started_again_once() -> None:
    """Seat B's zygote stopped (SIGSTOP) while seat A is busy: run 1 ends on B (its init says so), run 2 waits
    on B for run 1's processes to be gone, and B's zygote is then killed. Run 2 goes again on a new sandbox,
    and the worker has one sandbox per seat (before: three, one of them owned by no pool until its end)."""
    with running_server() as server:
        _printed_what_it_should(server, "before")
        wait_until(lambda: _both(sandbox_processes(server)), 60, "a sandbox on each seat")
        headers = server.browser_headers()

        async def scenario() -> list[dict]:
            async with websockets.connect(server.ws_url, max_size=None, additional_headers=headers) as ws:
                busy = "import time\nprint('busy', flush=True)\ntime.sleep(8)"
                await ws.send(json.dumps({"type": "run", "id": "busy", "code": busy, "fresh": True}))
                while json.loads(await ws.recv()).get("type") != "stdout":
                    pass
                await asyncio.sleep(0.5)
                [(_, idle_zygote, _)] = [s for s in sandbox_processes(server) if len(s[2]) == 1]
                os.kill(idle_zygote, signal.SIGSTOP)
                try:
                    await ws.send(json.dumps({"type": "run", "id": "one", "code": "print('one')", "fresh": True}))
                    await ws.send(json.dumps({"type": "run", "id": "two", "code": "print('two')", "fresh": True}))
                    events: list[dict] = []
                    async with asyncio.timeout(90):
                        while not any(e["type"] == "done" and e.get("id") == "one" for e in events):
                            events.append(json.loads(await ws.recv()))
                        await asyncio.sleep(1.0)  # run two now waits for run one's processes to be gone
                finally:
                    _kill(idle_zygote)
                async with asyncio.timeout(90):
                    while not all(any(e["type"] == "done" and e.get("id") == i for e in events) for i in ("busy", "two")):
                        events.append(json.loads(await ws.recv()))
                return events

        events = asyncio.run(scenario())
        dones = {e["id"]: e for e in events if e["type"] == "done"}
        assert dones["two"]["status"] == "ok", dones
        assert output_of([e for e in events if e.get("id") == "two"]).strip() == "two"
        time.sleep(8)  # the restarts settle
        wait_until(lambda: _both(sandbox_processes(server)), 60, "a sandbox on each seat")
        assert len(sandbox_processes(server)) == 2, sandbox_processes(server)
        _printed_what_it_should(server, "after")
