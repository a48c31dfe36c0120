"""A real ``jaxplay serve`` on a free port, and helpers to drive runs over /ws.

Used by the test fixtures and by the benchmarks: both measure the real path
(uvicorn, the worker, the bubblewrap sandbox), never a stand-in.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import random
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import websockets

PROJECT_ROOT = Path(__file__).resolve().parent.parent
# Smaller than the default so the memory-cap test is quick; everything else is as shipped.
LIVE_MEMORY_LIMIT_MB = 1024


# Ports handed out by this process: a server may take a while to bind the one it was given.
_HANDED_OUT: set[int] = set()
LISTEN_PORTS_FROM = 20000


def _outgoing_port_range() -> tuple[int, int]:
    """The ports the kernel gives outgoing connections (and ``bind(0)``)."""
    try:
        low, high = map(int, Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split())
        return low, high
    except (OSError, ValueError):
        return 32768, 60999


def _share_of_ports(low: int, high: int) -> tuple[int, int]:
    """This pytest process's share of [low, high): under pytest-xdist each worker (``gw0``, ``gw1``, ...)
    hands out ports from its own slice, so two workers never give one port to two servers."""
    worker = os.environ.get("PYTEST_XDIST_WORKER", "")
    count = int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1") or 1)
    if not worker.startswith("gw") or not worker[2:].isdigit() or count < 2:
        return low, high
    width = (high - low) // count
    start = low + int(worker[2:]) % count * width
    return start, start + width


def free_port() -> int:
    """A port nothing listens on for a server to bind, never handed out twice in this process (nor by
    another pytest-xdist worker of this session).

    Chosen below the kernel's range for outgoing connections: a port from ``bind(0)`` could be taken, in
    the moment before the server binds it, by any client socket of the tests (a websocket, a Redis or
    PostgreSQL connection), and the server then failed with "address already in use".
    """
    low, _ = _outgoing_port_range()
    if low - LISTEN_PORTS_FROM < 1000:  # an unusual host: no room below its range
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            return s.getsockname()[1]
    first, end = _share_of_ports(LISTEN_PORTS_FROM, low)
    for _ in range(1000):
        port = random.randrange(first, end)
        if port in _HANDED_OUT:
            continue
        with socket.socket() as s:
            try:
                s.bind(("127.0.0.1", port))
            except OSError:
                continue
        _HANDED_OUT.add(port)
        return port
    raise RuntimeError(f"no free port between {first} and {end}")


class LiveServer:
    def __init__(self, data_dir: Path, extra_args: list[str] | None = None, env: dict[str, str] | None = None,
                 port: int | None = None, command: list[str] | None = None, cwd: Path = PROJECT_ROOT) -> None:
        # `port`: the one a stopped server had, to bring "the same server" back in outage tests.
        # `command`: the `jaxplay` to start (default: this checkout's, with this interpreter).
        self.port = port or free_port()
        self.http_url = f"http://127.0.0.1:{self.port}"
        self.ws_url = f"ws://127.0.0.1:{self.port}/ws"
        self.worker_port = free_port()
        self.worker_url = f"ws://127.0.0.1:{self.worker_port}/worker"
        jaxplay = command or [sys.executable, "-m", "jaxplay.cli"]
        args = [*jaxplay, "serve", "--port", str(self.port), "--data-dir", str(data_dir),
                "--worker-port", str(self.worker_port),
                "--memory-limit-mb", str(LIVE_MEMORY_LIMIT_MB), *(extra_args or [])]
        self.log_path = data_dir / "server.log"
        data_dir.mkdir(parents=True, exist_ok=True)
        self.log = open(self.log_path, "w")
        self.process = subprocess.Popen(args, cwd=cwd, stdout=self.log, stderr=subprocess.STDOUT,
                                        env={**os.environ, **(env or {})}, start_new_session=True)

    def wait_ready(self, timeout_s: float = 120.0, workers: int = 1) -> None:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"server exited: {self.log_path.read_text()[-3000:]}")
            try:
                health = self.get_json("/healthz")
                if health["workers"] >= workers:
                    return
            except OSError:
                pass
            time.sleep(0.2)
        raise TimeoutError(f"server not ready: {self.log_path.read_text()[-3000:]}")

    def get_json(self, path: str, timeout: float = 10.0) -> Any:
        with urllib.request.urlopen(self.http_url + path, timeout=timeout) as response:
            return json.load(response)

    def session_cookie(self) -> str:
        """A new browser session, as loading a page starts one: ``jaxplay_session=...`` for a Cookie header."""
        try:
            with urllib.request.urlopen(self.http_url + "/", timeout=10) as response:
                headers = response.headers
        except urllib.error.HTTPError as unbuilt:  # 503 "the frontend is not built" is a page too
            headers = unbuilt.headers
        return headers["set-cookie"].split(";")[0]

    def browser_headers(self) -> dict[str, str]:
        """Headers of a new browser's /ws connection: its own session (a socket without one is its address's
        one shared client)."""
        return {"cookie": self.session_cookie()}

    def stop(self) -> None:
        if self.process.poll() is None:
            os.killpg(self.process.pid, signal.SIGTERM)
            try:
                self.process.wait(10)
            except subprocess.TimeoutExpired:
                os.killpg(self.process.pid, signal.SIGKILL)
                self.process.wait()
        self.log.close()

    # --- driving runs --------------------------------------------------------

    async def run_async(self, code: str, timeout: float = 90.0, **fields: Any) -> list[dict[str, Any]]:
        """Send one run over a fresh /ws connection of a new browser session; return all its events through ``done``."""
        run_id = fields.pop("id", None) or uuid.uuid4().hex[:12]
        headers = await asyncio.to_thread(self.browser_headers)
        async with websockets.connect(self.ws_url, max_size=None, additional_headers=headers) as ws:
            await ws.send(json.dumps({"type": "run", "id": run_id, "code": code, **fields}))
            return await collect(ws, run_id, timeout)

    def run(self, code: str, timeout: float = 90.0, **fields: Any) -> list[dict[str, Any]]:
        return asyncio.run(self.run_async(code, timeout, **fields))


async def collect(ws: Any, run_id: str, timeout: float = 90.0) -> list[dict[str, Any]]:
    """Events for ``run_id`` until its ``done``."""
    events: list[dict[str, Any]] = []
    async with asyncio.timeout(timeout):
        while True:
            event = json.loads(await ws.recv())
            if event.get("id") != run_id:
                continue
            events.append(event)
            if event["type"] == "done":
                return events


async def collect_many(ws: Any, run_ids: list[str], timeout: float = 90.0) -> dict[str, list[dict[str, Any]]]:
    """Events of several runs on one connection, each list ending with its ``done``."""
    events: dict[str, list[dict[str, Any]]] = {run_id: [] for run_id in run_ids}
    pending = set(run_ids)
    async with asyncio.timeout(timeout):
        while pending:
            event = json.loads(await ws.recv())
            if event.get("id") in events:
                events[event["id"]].append(event)
                if event["type"] == "done":
                    pending.discard(event["id"])
    return events


async def flood_then_one(server: Any, flood: int) -> tuple[list[dict[str, Any]], dict[str, list[dict[str, Any]]], bool]:
    """One browser sends ``flood`` fresh runs of 0.4 s each, another sends one run once the flood's first
    has ended (so the server has a measured duration to estimate waits from). Returns the other's events,
    the flood's events by run id, and whether the flood was still running when the other's run ended."""
    async with websockets.connect(server.ws_url, additional_headers=server.browser_headers()) as flooding, \
            websockets.connect(server.ws_url, additional_headers=server.browser_headers()) as other:
        ids = [f"f{i}" for i in range(flood)]
        for i, run_id in enumerate(ids):
            await flooding.send(json.dumps({"type": "run", "id": run_id, "fresh": True,
                                            "code": f"import time\ntime.sleep(0.4)\nprint({i})"}))
        first = await collect(flooding, ids[0], 240)
        flood_events = asyncio.create_task(collect_many(flooding, ids[1:], 240))
        await other.send(json.dumps({"type": "run", "id": "mine", "code": "print('mine')", "fresh": True}))
        mine = await collect(other, "mine", 240)
        flood_still_running = not flood_events.done()
        return mine, {ids[0]: first, **await flood_events}, flood_still_running


def output_text(events: list[dict[str, Any]], kind: str = "stdout") -> str:
    return "".join(e["text"] for e in events if e["type"] == kind)


def done_of(events: list[dict[str, Any]]) -> dict[str, Any]:
    assert events and events[-1]["type"] == "done", events[-3:]
    return events[-1]


@contextlib.contextmanager
def running_server(extra_args: list[str] | None = None) -> Iterator[LiveServer]:
    """A ready server with a throw-away data folder, stopped (and the folder removed) on exit."""
    with tempfile.TemporaryDirectory() as data_dir:
        server = LiveServer(Path(data_dir), extra_args)
        try:
            server.wait_ready()
            yield server
        finally:
            server.stop()
