"""The result cache's second-run rule when the operator's machine fails under it.

A first run of a program is kept as a candidate (server/runs/result_verification.py); only a later run
that agrees shares it. These tests pull plugs between or during the two runs: the server killed with
SIGKILL after the first run, the database's disk full while the second run is judged. The invariant:
whatever answers another browser session from the cache was reproduced by a second run that began
after the first ended, and no request is answered with a server error.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import shutil
import signal
import subprocess
import tempfile
import urllib.error
import urllib.request
import uuid
from collections.abc import Iterator
from pathlib import Path

import psutil
import pytest
import websockets

from tests.conftest import done_of, output_text
from tests.live.faults import cache_entries, run_until_stored, wait_until
from tests.live_server import LiveServer, collect

DETERMINISTIC = "import jax.numpy as jnp\nprint(jnp.arange(4.0) * 3)\n"


def statuses(live: LiveServer, paths: tuple[str, ...] = ("/healthz", "/metrics", "/")) -> dict[str, int]:
    answers = {}
    for path in paths:
        try:
            with urllib.request.urlopen(live.http_url + path, timeout=10) as response:
                answers[path] = response.status
        except urllib.error.HTTPError as refused:
            answers[path] = refused.code
    return answers


def cached(events: list[dict]) -> bool:
    assert done_of(events)["status"] == "ok", events[-3:]
    return done_of(events).get("cached") is True


@pytest.mark.attack("result cache")
def test_a_server_killed_between_the_two_runs_shares_nothing_until_a_later_run_agrees(tmp_path):
    code = f"# {uuid.uuid4().hex}\n{DETERMINISTIC}"
    first = LiveServer(tmp_path)
    try:
        first.wait_ready()
        assert not cached(run_until_stored(first, code))  # the candidate, its browser session's own
    finally:
        os.killpg(first.process.pid, signal.SIGKILL)
        first.process.wait()
        first.log.close()
    again = LiveServer(tmp_path)
    try:
        again.wait_ready()
        second = run_until_stored(again, code)  # its verdict is written after its done
        third = again.run(code)
        assert not cached(second), output_text(second)  # a candidate alone answers no other session
        assert cached(third)  # the second run began after the first ended, across the restart, and agreed
        assert output_text(third) == output_text(second)
        assert all(status < 500 for status in statuses(again).values())
    finally:
        again.stop()


@contextlib.contextmanager
def small_disk(size_kb: int) -> Iterator[Path]:
    """A tmpfs of ``size_kb`` (mounting needs root: skipped without it)."""
    if os.geteuid() != 0 or shutil.which("mount") is None:
        pytest.skip("mounting a small tmpfs needs root")
    folder = Path(tempfile.mkdtemp(prefix="jaxplay-full-disk-"))
    subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size_kb}k", "tmpfs", str(folder)], check=True)
    try:
        yield folder
    finally:
        subprocess.run(["umount", "-l", str(folder)], check=False)
        folder.rmdir()


def fill(disk: Path) -> None:
    with contextlib.suppress(OSError), open(disk / "filler", "wb") as filler:
        while True:
            filler.write(b"\0" * 4096)
            filler.flush()


@pytest.mark.attack("result cache")
def test_a_full_database_disk_during_verification_shares_nothing_unverified_and_answers_no_500(tmp_path):
    with small_disk(65536) as disk:
        live = LiveServer(tmp_path, ["--database-url", f"sqlite:///{disk}/jaxplay.sqlite3"])
        try:
            live.wait_ready()
            verified_before = f"# {uuid.uuid4().hex}\n{DETERMINISTIC}"
            shared = [cached(run_until_stored(live, verified_before)) for _ in range(2)]
            assert shared + [cached(live.run(verified_before))] == [False, False, True]
            judged_on_a_full_disk = f"# {uuid.uuid4().hex}\n{DETERMINISTIC}"
            assert not cached(run_until_stored(live, judged_on_a_full_disk))  # its candidate, before the disk fills
            fill(disk)
            assert shutil.disk_usage(disk).free < 8192
            runs = [live.run(judged_on_a_full_disk) for _ in range(3)]
            # Every run ends ok: a cache that cannot write never costs the run. Whether the second run's
            # verdict could be written or not, the first to be shared is one that came after a second run.
            assert not cached(runs[0]), output_text(runs[0])
            assert "result cache write failed" in live.log_path.read_text()  # the disk was full for it
            assert cached(live.run(verified_before))  # reading still answers
            assert all(status < 500 for status in statuses(live).values()), statuses(live)
            (disk / "filler").unlink()
            after = live.run(judged_on_a_full_disk)
            assert done_of(after)["status"] == "ok"
            assert live.process.poll() is None  # still serving
        finally:
            live.stop()


def worker_processes(live: LiveServer) -> list[psutil.Process]:
    def is_worker(process: psutil.Process) -> bool:
        try:
            command = process.cmdline()
        except psutil.Error:  # gone, or a zombie not yet reaped (a run's process just ended)
            return False
        return "worker" in command and "jaxplay.cli" in command

    return [child for child in psutil.Process(live.process.pid).children(recursive=True) if is_worker(child)]


@pytest.mark.attack("result cache")
def test_a_worker_stopped_during_the_second_run_shares_only_what_that_run_showed(live):
    """SIGSTOP the worker while the verifying run is in flight, then SIGCONT: the run ends as it ends, and
    a third session is answered from the cache only with what two runs showed, never with half a run."""
    code = f"# {uuid.uuid4().hex}\nprint(sum(i * i for i in range(20_000_000)))\n"
    first = run_until_stored(live, code)
    assert not cached(first)
    workers = worker_processes(live)
    assert workers

    async def stopped_during(run_id: str) -> list[dict]:
        async with websockets.connect(live.ws_url, additional_headers=live.browser_headers()) as ws:
            await ws.send(json.dumps({"type": "run", "id": run_id, "code": code}))
            while json.loads(await ws.recv()).get("type") != "started":
                pass
            for worker in workers:
                worker.send_signal(signal.SIGSTOP)
            await asyncio.sleep(5)
            for worker in workers:
                worker.send_signal(signal.SIGCONT)
            return await collect(ws, run_id, 120)

    before = cache_entries(live)
    second = asyncio.run(stopped_during("stopped"))
    if done_of(second)["status"] == "ok":  # its verdict is written after its done
        wait_until(lambda: cache_entries(live) > before, 30, "the second run's verdict written")
    third = live.run(code)
    assert done_of(third)["status"] == "ok"
    if done_of(second)["status"] == "ok":
        assert output_text(second) == output_text(first)
        assert cached(third) and output_text(third) == output_text(first)
    else:  # a second run that did not end ok verifies nothing: the third ran
        assert not cached(third)
    assert all(status < 500 for status in statuses(live).values())
