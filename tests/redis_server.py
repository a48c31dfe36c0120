"""A real Redis server for tests: Debian's ``redis-server``, on a free port in a temp dir, no persistence."""

from __future__ import annotations

import shutil
import socket
import subprocess
import tempfile
import time
from pathlib import Path

from tests.live_server import free_port

MISSING = "Broker tests need Debian's 'redis-server' package; `make test` installs it, or run: apt-get install redis-server"


class RedisServer:
    def __init__(self) -> None:
        binary = shutil.which("redis-server")
        if binary is None:
            raise FileNotFoundError(MISSING)
        self.binary = binary
        self.root = Path(tempfile.mkdtemp(prefix="jaxplay-redis-"))
        self.port = free_port()
        self.url = f"redis://127.0.0.1:{self.port}/0"
        self.start()

    def start(self) -> None:
        """Start (again, on the same port: fault tests restart it) and wait until it answers."""
        self.process = subprocess.Popen(
            [self.binary, "--port", str(self.port), "--bind", "127.0.0.1", "--dir", str(self.root), "--save", "",
             "--appendonly", "no", "--protected-mode", "yes"],
            stdout=subprocess.DEVNULL, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            try:
                socket.create_connection(("127.0.0.1", self.port), timeout=0.2).close()
                return
            except OSError:
                time.sleep(0.05)
        self.stop()
        raise TimeoutError("redis-server did not start")

    def kill(self) -> None:
        """SIGKILL: no persistence, so it comes back empty, as a restarted cache pod does."""
        self.process.kill()
        self.process.wait(10)

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.terminate()
            self.process.wait(10)
        shutil.rmtree(self.root, ignore_errors=True)
