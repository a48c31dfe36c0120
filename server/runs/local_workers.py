"""Worker processes the server starts on its own host and owns.

Each is ``python -m jaxplay.cli worker`` dialing this server over loopback
with a token made for this server's lifetime, named ``local-N@HOST:PORT``
(this host and the server's port): unique among replicas sharing a broker
and a database, so cached results name the replica that recorded them
(``jaxplay purge-results``), and the same again when that replica restarts. The supervisor restarts one
that dies (with backoff) and, at shutdown, terminates them all, then kills
any that linger. Their sandboxes die with them (bwrap's --die-with-parent).
"""

from __future__ import annotations

import asyncio
import ctypes
import logging
import os
import signal
import socket
import sys
from dataclasses import asdict

from jaxplay.settings import ENV_PREFIX, Settings

log = logging.getLogger("jaxplay.server")

PR_SET_PDEATHSIG = 1
RESTART_DELAYS_S = (1, 2, 5, 10, 30)
STOP_GRACE_S = 5.0


def _die_with_server() -> None:
    """In the worker's process before exec: SIGTERM when this server dies, even by SIGKILL,
    so a local worker never redials a dead server forever."""
    ctypes.CDLL(None).prctl(PR_SET_PDEATHSIG, signal.SIGTERM, 0, 0, 0)


class LocalWorkers:
    def __init__(self, settings: Settings, token: str) -> None:
        self.settings = settings
        self.token = token
        self.processes: list[asyncio.subprocess.Process | None] = []
        self.tasks: list[asyncio.Task[None]] = []
        self.stopping = False

    def environment(self) -> dict[str, str]:
        env = dict(os.environ)
        for name, value in asdict(self.settings).items():
            env[ENV_PREFIX + name.upper()] = str(value)
        env[ENV_PREFIX + "WORKER_TOKEN"] = self.token
        return env

    def name(self, index: int) -> str:
        return f"local-{index}@{socket.gethostname()}:{self.settings.port}"

    def start(self) -> None:
        for index in range(self.settings.local_workers):
            self.processes.append(None)
            self.tasks.append(asyncio.create_task(self._supervise(index)))

    async def _supervise(self, index: int) -> None:
        host = "127.0.0.1" if self.settings.worker_host in ("0.0.0.0", "::", "") else self.settings.worker_host
        url = f"ws://{host}:{self.settings.worker_listen_port}/worker"
        failures = 0
        while not self.stopping:
            process = await asyncio.create_subprocess_exec(
                sys.executable, "-m", "jaxplay.cli", "worker", "--server", url, "--name", self.name(index),
                env=self.environment(), stdin=asyncio.subprocess.DEVNULL, preexec_fn=_die_with_server,
            )
            self.processes[index] = process
            code = await process.wait()
            if self.stopping:
                return
            delay = RESTART_DELAYS_S[min(failures, len(RESTART_DELAYS_S) - 1)]
            failures += 1
            log.error("local worker %d exited with code %s; restarting in %s s", index, code, delay)
            await asyncio.sleep(delay)

    async def stop(self) -> None:
        self.stopping = True
        live = [p for p in self.processes if p is not None and p.returncode is None]
        for process in live:
            process.terminate()
        try:
            await asyncio.wait_for(asyncio.gather(*(p.wait() for p in live)), STOP_GRACE_S)
        except TimeoutError:
            for process in live:
                if process.returncode is None:
                    process.kill()
            await asyncio.gather(*(p.wait() for p in live))
        for task in self.tasks:
            task.cancel()
