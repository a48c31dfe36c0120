"""A real Redis server for tests: Debian's ``redis-server``, on a free port in a temp dir, no persistence.

Optionally as production runs it: an ACL user with a password (the replicas' ``url``; the default user
keeps an admin password of its own for the test's inspections, ``admin_url``), and TLS only (``rediss://``,
with a throwaway CA and server certificate made by ``openssl`` in the temp dir).
"""

from __future__ import annotations

import secrets
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from pathlib import Path

from tests.live_server import free_port

MISSING = "Broker tests need Debian's 'redis-server' package; `make test` installs it, or run: apt-get install redis-server"
# What a replica needs: its own keys and channels, every command but the dangerous ones, and INFO for the memory
# gauges: the bundled Redis's user (docs/operations.md).
REPLICA_ACL = "~jaxplay:* &jaxplay:* +@all -@dangerous +info"


class RedisServer:
    def __init__(self, user: str | None = None, password: str | None = None, tls: bool = False) -> None:
        binary = shutil.which("redis-server")
        if binary is None:
            raise FileNotFoundError(MISSING)
        self.binary = binary
        self.root = Path(tempfile.mkdtemp(prefix="jaxplay-redis-"))
        self.port = free_port()
        self.user, self.password, self.tls = user, password, tls
        self.admin_password = secrets.token_hex(12) if user else None
        scheme, query = ("rediss", f"?ssl_ca_certs={self.root / 'ca.crt'}") if tls else ("redis", "")
        self.url = f"{scheme}://{self._credentials(user, password)}127.0.0.1:{self.port}/0{query}"
        self.admin_url = f"{scheme}://{self._credentials('default', self.admin_password)}127.0.0.1:{self.port}/0{query}"
        if tls:
            self._make_certificates()
        self.start()

    @staticmethod
    def _credentials(user: str | None, password: str | None) -> str:
        return f"{user}:{password}@" if user and password else ""

    def _make_certificates(self) -> None:
        """A CA of this server's own, and a certificate it signed for 127.0.0.1."""
        def openssl(*args: str) -> None:
            subprocess.run(["openssl", *args], cwd=self.root, check=True, capture_output=True)

        openssl("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", "ca.key", "-out", "ca.crt", "-days", "2",
                "-subj", "/CN=jaxplay test CA")
        openssl("req", "-newkey", "rsa:2048", "-nodes", "-keyout", "server.key", "-out", "server.csr",
                "-subj", "/CN=127.0.0.1")
        (self.root / "san.cnf").write_text("subjectAltName=IP:127.0.0.1,DNS:localhost\n")
        openssl("x509", "-req", "-in", "server.csr", "-CA", "ca.crt", "-CAkey", "ca.key", "-CAcreateserial",
                "-out", "server.crt", "-days", "2", "-extfile", "san.cnf")

    def arguments(self) -> list[str]:
        args = ["--bind", "127.0.0.1", "--dir", str(self.root), "--save", "", "--appendonly", "no",
                "--protected-mode", "yes"]
        if self.tls:
            args += ["--port", "0", "--tls-port", str(self.port), "--tls-cert-file", "server.crt",
                     "--tls-key-file", "server.key", "--tls-ca-cert-file", "ca.crt", "--tls-auth-clients", "no"]
        else:
            args += ["--port", str(self.port)]
        if self.user:
            args += ["--requirepass", str(self.admin_password),
                     "--user", self.user, "on", f">{self.password}", *REPLICA_ACL.split()]
        return args

    def start(self) -> None:
        """Start (again, on the same port: fault tests restart it) and wait until it answers."""
        self.process = subprocess.Popen([self.binary, *self.arguments()], cwd=self.root,
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

    def pause(self) -> None:
        """SIGSTOP: Redis stalls (a frozen node, a long fork): connections stay open, nothing answers."""
        self.process.send_signal(signal.SIGSTOP)

    def resume(self) -> None:
        self.process.send_signal(signal.SIGCONT)

    def stop(self) -> None:
        if self.process.poll() is None:
            self.resume()
            self.process.terminate()
            self.process.wait(10)
        shutil.rmtree(self.root, ignore_errors=True)
