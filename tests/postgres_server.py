"""A real PostgreSQL server for tests: Debian's ``postgresql`` package, started in a temp dir.

``initdb`` and ``pg_ctl`` from /usr/lib/postgresql/*/bin, a free port on
127.0.0.1, trust authentication for the test user, fsync off (the tests
check behaviour, not durability against power loss). PostgreSQL refuses to
run as root, so as root the server runs as the unprivileged ``nobody``.
Each test gets a fresh database (``new_database``).
"""

from __future__ import annotations

import glob
import os
import shutil
import subprocess
import tempfile
import uuid
from pathlib import Path

from tests.live_server import free_port

USER = "jaxplay"
MISSING = ("PostgreSQL tests need Debian's 'postgresql' package (initdb and pg_ctl under /usr/lib/postgresql/*/bin); "
           "`make test` installs it, or run: apt-get install postgresql")


def postgres_bin() -> Path | None:
    found = sorted(glob.glob("/usr/lib/postgresql/*/bin/pg_ctl"))
    return Path(found[-1]).parent if found else None


class PostgresServer:
    def __init__(self) -> None:
        bin_dir = postgres_bin()
        if bin_dir is None:
            raise FileNotFoundError(MISSING)
        self.bin_dir = bin_dir
        self.root = Path(tempfile.mkdtemp(prefix="jaxplay-pg-"))
        self.data_dir = self.root / "data"
        self.port = free_port()
        self.as_nobody = os.geteuid() == 0
        if self.as_nobody:
            os.chmod(self.root, 0o755)
            shutil.chown(self.root, 65534, 65534)

    def _run(self, *args: str) -> None:
        extra = {"user": 65534, "group": 65534, "extra_groups": []} if self.as_nobody else {}
        subprocess.run(args, check=True, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, cwd=self.root,
                       env={"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "LC_ALL": "C.UTF-8"}, **extra)

    def start(self) -> None:
        self._run(str(self.bin_dir / "initdb"), "-D", str(self.data_dir), "-U", USER, "--auth=trust",
                  "--encoding=UTF8", "--no-sync")
        self.resume()

    def pause(self) -> None:
        """Stop the server, keeping its data (fault tests): every connection is cut, as in a restart."""
        self._run(str(self.bin_dir / "pg_ctl"), "-D", str(self.data_dir), "-m", "fast", "-w", "stop")

    def resume(self, *settings: str) -> None:
        """Start (again); ``settings`` are server settings for this start, e.g. ``max_connections=6``."""
        options = f"-p {self.port} -k {self.root} -c listen_addresses=127.0.0.1 -c fsync=off"
        options += "".join(f" -c {setting}" for setting in settings)
        self._run(str(self.bin_dir / "pg_ctl"), "-D", str(self.data_dir), "-l", str(self.root / "server.log"),
                  "-o", options, "-w", "-t", "60", "start")

    def url(self, database: str = "postgres") -> str:
        return f"postgresql://{USER}@127.0.0.1:{self.port}/{database}"

    def new_database(self) -> str:
        """A fresh, empty database; returns its URL."""
        import psycopg

        name = "t_" + uuid.uuid4().hex[:12]
        with psycopg.connect(self.url(), autocommit=True) as connection:
            connection.execute(f'CREATE DATABASE "{name}"')
        return self.url(name)

    def stop(self) -> None:
        try:
            self._run(str(self.bin_dir / "pg_ctl"), "-D", str(self.data_dir), "-m", "immediate", "-w", "stop")
        except subprocess.CalledProcessError:
            pass
        shutil.rmtree(self.root, ignore_errors=True)
