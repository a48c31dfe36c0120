"""Helpers of the fault suite: replicas on a real Redis, load on them, and what every run must end with."""

from __future__ import annotations

import asyncio
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import websockets

from tests.live_server import PROJECT_ROOT, LiveServer

# Sleeps long enough to be in flight when the fault strikes, short enough to keep the suite quick.
SLEEPER = "import time\nprint('started', flush=True)\ntime.sleep({seconds})\nprint('finished')"


def sleeper(seconds: float) -> str:
    return SLEEPER.format(seconds=seconds) + f"  # {uuid.uuid4().hex}"  # unique: never a cache answer


def replica(root: Path, name: str, broker: str, *args: str, key_from: Path | None = None,
            env: dict[str, str] | None = None) -> LiveServer:
    """A replica, not yet ready; it signs sessions with the key of ``key_from`` (one load balancer's replicas)."""
    if key_from is not None:
        (root / name).mkdir(parents=True, exist_ok=True)
        shutil.copy(key_from / "session.key", root / name / "session.key")
    return LiveServer(root / name, [*args, "--broker", broker], env=env)


@contextmanager
def origin_and_executor(root: Path, broker: str) -> Iterator[tuple[LiveServer, LiveServer]]:
    """Replicas A, with no worker, and B, with one slot, ready: each run of A's browser crosses Redis to B.
    Stopped at the end, paused ones too."""
    a = replica(root, "a", broker, "--no-local-worker", "--expected-backends", "cpu")
    servers = [a]
    try:
        a.wait_ready(workers=0)
        b = replica(root, "b", broker, "--slots", "1", key_from=root / "a")
        servers.append(b)
        b.wait_ready()
        wait_until(lambda: readiness(a)[0] == 200, 30, "A ready")
        yield a, b
    finally:
        for server in servers:
            if server.process.poll() is None:
                server.process.send_signal(signal.SIGCONT)
            server.stop()


def remote_worker(server: LiveServer, token: str, name: str, log_dir: Path, *args: str,
                  env: dict[str, str] | None = None) -> subprocess.Popen:
    """A ``jaxplay worker`` dialing ``server`` as another host's would (a worker pod), logging to a file;
    ``env``: its ``JAXPLAY_*`` settings (the test's own are not passed on)."""
    env = {**{k: v for k, v in os.environ.items() if not k.startswith("JAXPLAY_")}, **(env or {})}
    log = open(log_dir / f"worker-{name}.log", "w")
    return subprocess.Popen([sys.executable, "-m", "jaxplay.cli", "worker", "--server", server.worker_url,
                             "--token", token, "--name", name, *args],
                            cwd=PROJECT_ROOT, env=env, stdout=log, stderr=subprocess.STDOUT)


def stop_process(process: subprocess.Popen) -> None:
    if process.poll() is None:
        process.kill()
        process.wait(10)


def wait_until(condition: Any, timeout_s: float, what: str, every_s: float = 0.1) -> Any:
    deadline = time.monotonic() + timeout_s
    while True:
        value = condition()
        if value:
            return value
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(every_s)


def http_status(server: LiveServer, path: str, method: str = "GET", body: dict | None = None) -> tuple[int, Any]:
    """Status and body (JSON when it is JSON, else text) of one request; never raises on an HTTP error."""
    data = json.dumps(body).encode() if body is not None else None
    request = urllib.request.Request(server.http_url + path, data=data, method=method,
                                     headers={"content-type": "application/json"})
    try:
        with urllib.request.urlopen(request, timeout=15) as response:
            status, raw, kind = response.status, response.read(), response.headers.get("content-type", "")
    except urllib.error.HTTPError as error:
        status, raw, kind = error.code, error.read(), error.headers.get("content-type", "")
    return status, (json.loads(raw) if "json" in kind else raw.decode())


def readiness(server: LiveServer) -> tuple[int, dict]:
    return http_status(server, "/readyz")


def metric(server: LiveServer, name: str, **labels: str) -> float | None:
    """One sample of ``/metrics`` (loopback may read it), or None if absent."""
    status, text = http_status(server, "/metrics")
    assert status == 200, text
    wanted = ",".join(f'{k}="{v}"' for k, v in labels.items())
    match = re.search(rf"^{name}{{{wanted}}} (\S+)$" if labels else rf"^{name} (\S+)$", text, flags=re.M)
    return float(match.group(1)) if match else None


def cache_entries(server: LiveServer) -> float:
    return metric(server, "jaxplay_result_cache_entries") or 0


def run_until_stored(server: LiveServer, code: str) -> list[dict]:
    """``code`` run by a new browser session, once the server has written what the run made of the result
    cache: it writes after the run's ``done``, and a next run that starts sooner is judged against nothing."""
    before = cache_entries(server)
    events = server.run(code)
    wait_until(lambda: cache_entries(server) > before, 30, "the run's cache entry written")
    return events


def metric_total(server: LiveServer, name: str, **labels: str) -> float:
    """The sum of every sample of ``name`` whose labels include ``labels`` (0 when there is none)."""
    from prometheus_client.parser import text_string_to_metric_families

    status, text = http_status(server, "/metrics")
    assert status == 200, text
    return sum(sample.value for family in text_string_to_metric_families(text) for sample in family.samples
               if sample.name == name and labels.items() <= sample.labels.items())


class Client:
    """One browser tab: a websocket with runs in flight, collecting every event per run id. Without a
    ``cookie`` it starts a browser session of its own."""

    def __init__(self, server: LiveServer, cookie: str | None = None, expect: tuple[str, ...] | list[str] = ()) -> None:
        self.server = server
        self.cookie = cookie
        # Runs of an earlier connection this one may be told about (a browser back from a dead replica).
        self.events: dict[str, list[dict[str, Any]]] = {run_id: [] for run_id in expect}
        self.code_of: dict[str, str] = {}  # run id -> the program it ran
        self.closed = False

    async def __aenter__(self) -> Client:
        if self.cookie is None:  # a browser of its own, as a tab that loaded the page has
            self.cookie = await asyncio.to_thread(self.server.session_cookie)
        self.ws = await websockets.connect(self.server.ws_url, additional_headers={"cookie": self.cookie},
                                           max_size=None)
        self.reader = asyncio.create_task(self._read())
        return self

    async def __aexit__(self, *exc: object) -> None:
        self.reader.cancel()
        await self.ws.close()

    async def _read(self) -> None:
        try:
            async for frame in self.ws:
                event = json.loads(frame)
                if event.get("id") in self.events:
                    self.events[event["id"]].append(event)
        except websockets.ConnectionClosed:
            pass
        self.closed = True

    async def run(self, code: str, **fields: Any) -> str:
        run_id = uuid.uuid4().hex[:10]
        self.events[run_id] = []
        self.code_of[run_id] = code
        await self.ws.send(json.dumps({"type": "run", "id": run_id, "code": code, "fresh": True, **fields}))
        return run_id

    def done(self, run_id: str) -> dict[str, Any] | None:
        return next((e for e in self.events[run_id] if e["type"] == "done"), None)

    async def all_done(self, run_ids: list[str], timeout_s: float) -> dict[str, dict[str, Any]]:
        async with asyncio.timeout(timeout_s):
            while not all(self.done(r) for r in run_ids):
                await asyncio.sleep(0.05)
        return {r: self.done(r) for r in run_ids}

    async def started(self, run_id: str, timeout_s: float = 60) -> dict[str, Any]:
        async with asyncio.timeout(timeout_s):
            while True:
                event = next((e for e in self.events[run_id] if e["type"] in ("started", "done")), None)
                if event is not None:
                    return event
                await asyncio.sleep(0.05)


def check_run_contract(events: list[dict[str, Any]]) -> dict[str, Any]:
    """What every accepted run owes its browser: ``queued`` first, exactly one ``done``, last."""
    kinds = [e["type"] for e in events]
    assert kinds.count("done") == 1 and kinds[-1] == "done", kinds
    done = events[-1]
    if done["status"] != "rejected":
        assert kinds[0] == "queued", kinds  # sent on acceptance, also when the run starts at once
    return done


def printer(tag: str, lines: int, pause_s: float = 0.0) -> str:
    """A program whose output is many events (a line each, flushed): what a resent or reordered batch would
    duplicate, drop or shuffle. ``tag`` makes it unique (never a cache answer)."""
    pause = f"\n    time.sleep({pause_s})" if pause_s else ""
    return (f"import time\nfor i in range({lines}):\n    print({tag!r}, i, '.' * 60, flush=True){pause}\n"
            f"print({tag!r}, 'end')")


async def idle_outputs(server: LiveServer, programs: list[str]) -> dict[str, str]:
    """Each program's output on an idle server (one run at a time, nothing failing): what a run under a
    fault must print too, if it ends ``ok``."""
    outputs = {}
    async with Client(server) as client:
        for code in programs:
            run_id = await client.run(code)
            [done] = (await client.all_done([run_id], 90)).values()
            assert done["status"] == "ok", done
            outputs[code] = output_of(client.events[run_id])
    return outputs


def output_of(events: list[dict[str, Any]]) -> str:
    return "".join(e.get("text", "") for e in events if e["type"] == "stdout")


def rejected_counted(server: LiveServer) -> float:
    """Every rejection a replica's /metrics counts: runs that ended ``rejected`` and runs refused before
    they were queued."""
    status, text = http_status(server, "/metrics")
    assert status == 200, text
    ended = re.findall(r'^jaxplay_runs_total\{[^}]*status="rejected"[^}]*\} (\S+)$', text, flags=re.M)
    refused = re.findall(r"^jaxplay_runs_rejected_total\{[^}]*\} (\S+)$", text, flags=re.M)
    return sum(float(value) for value in ended + refused)


def rejected_told(clients: list[Client]) -> int:
    return sum(1 for client in clients for events in client.events.values()
               if any(e["type"] == "done" and e["status"] == "rejected" for e in events))
