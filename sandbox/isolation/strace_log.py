"""Reading strace's logs of a sandbox: what its filtered processes called, with the arguments the filter checks.

strace runs as ``strace -f -ff --pidns-translation -X raw -o DIR/trace``: one file per thread,
named by its pid on the host, every constant as a number, and every pid a call returns also as
the host's pid (``= 3 /* 26702 in strace's PID NS */``). A process is *filtered* from its
successful ``prctl(PR_SET_SECCOMP, ...)`` (or ``seccomp(SECCOMP_SET_MODE_FILTER, ...)``) on, and
so is every thread and process it makes afterwards: only those calls are what the allow-list
must allow. The zygote, the run's keeper and init are trusted code outside the filter.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

from jaxplay.sandbox.isolation.syscall_numbers import NUMBERS

CALL = re.compile(r"^(\w+)\((.*)$")
RESULT = re.compile(r"\)\s+= (-?\d+|0x[0-9a-f]+|\?)(?: (E[A-Z0-9]+))?(?: \(.*\))?( /\* .* \*/)?\s*$")
HOST_PID = re.compile(r"/\* (\d+) in strace's PID NS \*/")
CLONE_FLAGS = re.compile(r"flags=((?:0x[0-9a-f]+|\d+)(?:\|(?:0x[0-9a-f]+|\d+))*)")
MAKES_A_TASK = ("clone", "clone3", "fork", "vfork")
PR_SET_SECCOMP, SECCOMP_MODE_FILTER, SECCOMP_SET_MODE_FILTER = 0x16, 0x2, 0x1


@dataclass
class Seen:
    """Calls made under the filter; ``refused``: the calls the recording filter itself refused."""
    calls: set[str] = field(default_factory=set)
    refused: set[str] = field(default_factory=set)
    socket: set[tuple[int, int]] = field(default_factory=set)  # (family, protocol)
    socketpair: set[int] = field(default_factory=set)
    ioctl: set[int] = field(default_factory=set)
    prctl: set[int] = field(default_factory=set)
    personality: set[int] = field(default_factory=set)
    clone: set[int] = field(default_factory=set)
    filtered_tasks: int = 0

    def update(self, other: Seen) -> None:
        for name in ("calls", "refused", "socket", "socketpair", "ioctl", "prctl", "personality", "clone"):
            getattr(self, name).update(getattr(other, name))
        self.filtered_tasks += other.filtered_tasks


@dataclass(frozen=True)
class Line:
    call: str
    args: str  # as printed, without the closing parenthesis and what follows
    result: str | None  # the return value as printed, None for a call that never returned
    errno: str | None
    host_pid: int | None = None  # a returned pid as the host sees it, when strace translated it

    @property
    def succeeded(self) -> bool:
        return self.result is not None and self.errno is None


def read_folder(folder: Path, refused_by_name: set[str]) -> Seen:
    """Every filtered task's calls in the logs ``folder/trace.<pid>``. ``refused_by_name``: calls the
    recording filter refuses (their attempts go to ``refused``, not ``calls``)."""
    logs = {int(path.suffix[1:]): path for path in folder.glob("trace.*") if path.suffix[1:].isdigit()}
    lines = {pid: list(_lines(path)) for pid, path in logs.items()}
    seen = Seen()
    pending = [(pid, start) for pid, log in lines.items() if (start := _filter_installed_at(log)) is not None]
    done: set[int] = set()
    while pending:
        pid, start = pending.pop()
        if pid in done:
            continue
        done.add(pid)
        for line in lines.get(pid, [])[start:]:
            _note(seen, line, refused_by_name)
            if line.call in MAKES_A_TASK and line.succeeded and line.result is not None:
                # A pid from the same namespace as strace's is printed untranslated.
                pending.append((line.host_pid or int(line.result, 0), 0))
    seen.filtered_tasks = len(done)
    return seen


def _lines(path: Path) -> Iterator[Line]:
    with path.open(errors="replace") as log:
        for raw in log:
            match = CALL.match(raw)
            if match is None:
                continue  # signals, exits, "<... resumed>" parts
            result = RESULT.search(match[2])
            if result is None:  # it never returned (killed in it), or strace printed its end apart
                yield Line(_name(match[1]), match[2], None, None)
                continue
            translated = HOST_PID.search(result[3] or "")
            yield Line(_name(match[1]), match[2][:result.start()], None if result[1] == "?" else result[1],
                       result[2], int(translated[1]) if translated else None)


_BY_NUMBER = {numbers[0]: name for name, numbers in NUMBERS.items() if numbers[0] is not None}


def _name(call: str) -> str:
    """strace's name for the call; a number it has no name for (``syscall_0x1c3``) by our table."""
    if call.startswith("syscall_0x"):
        return _BY_NUMBER.get(int(call[len("syscall_"):], 16), call)
    return call


def _filter_installed_at(log: list[Line]) -> int | None:
    """The index just after this task's own successful filter installation, if it made one."""
    for i, line in enumerate(log):
        args = _numbers(line.args, 2)
        if not line.succeeded or len(args) < 2:
            continue
        if (line.call == "prctl" and args[:2] == [PR_SET_SECCOMP, SECCOMP_MODE_FILTER]) or \
                (line.call == "seccomp" and args[0] == SECCOMP_SET_MODE_FILTER):
            return i + 1
    return None


def _note(seen: Seen, line: Line, refused_by_name: set[str]) -> None:
    if line.call in refused_by_name and line.errno in ("EPERM", "ENOSYS"):
        seen.refused.add(line.call)
        return
    seen.calls.add(line.call)
    args = _numbers(line.args, 3)
    if line.call == "socket" and len(args) >= 3:
        seen.socket.add((args[0], args[2]))
    elif line.call == "socketpair" and args:
        seen.socketpair.add(args[0])
    elif line.call == "ioctl" and len(args) >= 2:
        seen.ioctl.add(args[1] & 0xFFFFFFFF)
    elif line.call == "prctl" and args:
        seen.prctl.add(args[0])
    elif line.call == "personality" and args:
        seen.personality.add(args[0] & 0xFFFFFFFF)
    elif line.call == "clone" and (flags := CLONE_FLAGS.search(line.args)):
        seen.clone.add(sum(int(part, 0) for part in flags[1].split("|")) & 0xFFFFFFFF)


def _numbers(args: str, count: int) -> list[int]:
    """The first ``count`` arguments as numbers, as far as they are plain numbers (flags OR-ed)."""
    values: list[int] = []
    for text in args.split(", ")[:count]:
        parts = text.strip().split("|")
        try:
            values.append(sum(int(part, 0) for part in parts))
        except ValueError:
            break
    return values
