"""Worker processes the server starts on its own host and owns.

Each is ``python -m jaxplay.cli worker`` dialing this server over loopback
with a token made for this server's lifetime, named ``local-N@HOST:PORT``
(this host and the server's port: unique among replicas sharing a broker and
a database, so cached results name the replica that recorded them for
``jaxplay purge-results``, and the same again when that replica restarts),
in a process session of its own (a Ctrl+C or a signal to the server's process group reaches the server,
which then stops its workers in order). The supervisor restarts one that
dies (with backoff) and, at shutdown, terminates them all, then kills any
that linger. Their sandboxes die with them (bwrap's --die-with-parent).

A worker that cannot start as configured (exit status ``EXIT_CANNOT_START``:
GPUs JAX cannot use, no bubblewrap, ...) is not restarted: the same cause
would stop it again. Its last word on stderr (``jaxplay worker: <cause>``) is
kept in ``refusals`` and shown by /readyz and /api/backends, so the server
stays up, unready, saying why, instead of looping in silence.

Tasks::

    LocalWorkers
      └─ one supervise task per worker: start it, forward its stderr lines to
         the server's, wait for its exit, then restart it or record its refusal
"""

from __future__ import annotations

import asyncio
import ctypes
import logging
import os
import signal
import socket
import sys
from collections.abc import Callable
from dataclasses import asdict

from jaxplay.settings import ENV_PREFIX, Settings

log = logging.getLogger("jaxplay.server")

PR_SET_PDEATHSIG = 1
RESTART_DELAYS_S = (1, 2, 5, 10, 30)
STOP_GRACE_S = 5.0
EXIT_CANNOT_START = 3  # the worker's own status for a host it must not serve from (sandbox/agent.py)
REFUSAL_PREFIX = "jaxplay worker: "
# Settings that may hold a password or token (the Redis and database URLs, the metrics token): server-only.
SERVER_SECRETS = ("broker", "database_url", "metrics_token")


def _die_with_server() -> None:
    """In the worker's process before exec: a session of its own, and SIGTERM when this server
    dies, even by SIGKILL, so a local worker never redials a dead server forever."""
    os.setsid()
    ctypes.CDLL(None).prctl(PR_SET_PDEATHSIG, signal.SIGTERM, 0, 0, 0)


class LocalWorkers:
    def __init__(self, settings: Settings, token: str, on_refusal: Callable[[], None] = lambda: None) -> None:
        self.settings = settings
        self.token = token
        self.on_refusal = on_refusal
        self.processes: list[asyncio.subprocess.Process | None] = []
        self.tasks: list[asyncio.Task[None]] = []
        self.stopping = False
        # Worker name -> why it cannot start, for the workers that refused (never restarted).
        self.refusals: dict[str, str] = {}

    def environment(self) -> dict[str, str]:
        """The server's environment and settings, less the secrets a worker never needs (its sandboxes start
        from an empty environment anyway, but a worker's own environment is one step closer to them)."""
        env = dict(os.environ)
        for name, value in asdict(self.settings).items():
            env[ENV_PREFIX + name.upper()] = str(value)
        for name in SERVER_SECRETS:
            env.pop(ENV_PREFIX + name.upper(), None)
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
        name = self.name(index)
        failures = 0
        while not self.stopping:
            process = await asyncio.create_subprocess_exec(
                sys.executable, "-m", "jaxplay.cli", "worker", "--server", url, "--name", name,
                env=self.environment(), stdin=asyncio.subprocess.DEVNULL, stderr=asyncio.subprocess.PIPE,
                preexec_fn=_die_with_server,
            )
            self.processes[index] = process
            assert process.stderr is not None
            last_word = await _forward_stderr(process.stderr)
            code = await process.wait()
            if self.stopping:
                return
            if code == EXIT_CANNOT_START:
                self.refusals[name] = last_word or f"the worker exited with status {code}"
                log.error("local worker %s cannot start, and is not restarted: %s (fix the cause, then restart "
                          "the server)", name, self.refusals[name])
                self.on_refusal()
                return
            delay = RESTART_DELAYS_S[min(failures, len(RESTART_DELAYS_S) - 1)]
            failures += 1
            log.error("local worker %s exited with code %s; restarting in %s s", name, code, delay)
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


async def _forward_stderr(stream: asyncio.StreamReader) -> str:
    """Copy the worker's stderr to the server's, line by line, until it closes; return the worker's
    last own word (a line starting ``jaxplay worker: ``), without the prefix."""
    last_word = ""
    while line := await stream.readline():
        sys.stderr.buffer.write(line)
        sys.stderr.flush()
        text = line.decode(errors="replace").strip()
        if text.startswith(REFUSAL_PREFIX):
            last_word = text.removeprefix(REFUSAL_PREFIX)
    return last_word
