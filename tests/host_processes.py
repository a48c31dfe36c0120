"""The host's processes as tests see them through /proc.

Run processes end at any moment (a run is reported done before its process has
torn down), so every read here treats a process that vanished mid-read as gone
rather than failing the test that looked.
"""

from __future__ import annotations

import os
import signal
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class HostProcess:
    pid: int
    cmdline: str
    parent: int
    real_uid: int


def cmdline(pid: int) -> str:
    try:
        raw = Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return ""
    return raw.replace(b"\0", b" ").decode(errors="replace").strip()


def read(pid: int) -> HostProcess | None:
    """One process's facts, or None when it is gone (or became a zombie with no cmdline)."""
    try:
        status = Path(f"/proc/{pid}/status").read_text()
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    command = cmdline(pid)
    if not command:
        return None
    try:
        parent = int(stat.rsplit(")", 1)[1].split()[1])
        real_uid = int(status.split("Uid:")[1].split()[0])
    except (IndexError, ValueError):
        return None
    return HostProcess(pid, command, parent, real_uid)


def all_processes() -> list[HostProcess]:
    found = (read(int(entry.name)) for entry in Path("/proc").iterdir() if entry.name.isdigit())
    return [proc for proc in found if proc is not None]


def matching(text: str) -> list[HostProcess]:
    return [proc for proc in all_processes() if text in proc.cmdline]


def is_alive(pid: int) -> bool:
    return read(pid) is not None


def is_descendant(pid: int, ancestor: int) -> bool:
    while pid > 1:
        if pid == ancestor:
            return True
        proc = read(pid)
        if proc is None:
            return False
        pid = proc.parent
    return False


def kill(pid: int) -> bool:
    """SIGKILL one process; False when it had already ended."""
    try:
        os.kill(pid, signal.SIGKILL)
    except ProcessLookupError:
        return False
    return True
