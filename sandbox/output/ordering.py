"""stdout and stderr that reach the page in the order they were written.

Two pipes read by the worker cannot tell which of two writes came first. So
in the sandbox, Python's ``sys.stderr`` does not write to its own pipe: it
writes framed records into the stdout pipe, where the kernel keeps them in
order with ``sys.stdout``'s text. The worker splits the stdout pipe back into
the two streams (``StdoutDemux``). Order holds for any number of switches,
with no waiting.

A frame is ``FRAME_MAGIC``, a 2-byte big-endian length, then at most
``MAX_FRAME_PAYLOAD`` bytes: with the header it fits in ``PIPE_BUF`` (4096), so
the kernel writes each frame whole, even beside a C library's or a thread's
write to fd 1. A forged or corrupt header only restyles the forger's own
output; an impossible length reads as plain stdout.

Raw writes to fd 2 (C and XLA logs, a subprocess's stderr, ``os.write(2, ...)``)
still use the stderr pipe; their order against stdout is as the worker reads
them. If the program points fd 1 elsewhere (``os.dup2(devnull, 1)``),
``sys.stderr`` goes back to fd 2 so stderr is not silenced with stdout.
"""

from __future__ import annotations

import io
import os

FRAME_MAGIC = b"\x00\x1e\x1fstderr"
HEADER_BYTES = len(FRAME_MAGIC) + 2
PIPE_BUF = 4096
MAX_FRAME_PAYLOAD = PIPE_BUF - HEADER_BYTES


def frames(data: bytes) -> list[bytes]:
    """``data`` as stderr frames, each small enough for one atomic pipe write."""
    return [FRAME_MAGIC + len(piece).to_bytes(2, "big") + piece
            for piece in (data[i:i + MAX_FRAME_PAYLOAD] for i in range(0, len(data), MAX_FRAME_PAYLOAD))]


def _identity(fd: int) -> tuple[int, int] | None:
    try:
        stat = os.fstat(fd)
    except OSError:
        return None
    return stat.st_dev, stat.st_ino


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view):]


class _StderrIntoStdout(io.RawIOBase):
    """fd 2 to the program (``fileno()``), written as frames into the stdout pipe."""

    def __init__(self, stdout_fd: int, stderr_fd: int) -> None:
        super().__init__()
        self._stdout_fd, self._stderr_fd = stdout_fd, stderr_fd
        self._stdout_pipe = _identity(stdout_fd)

    def fileno(self) -> int:
        return self._stderr_fd

    @property
    def name(self) -> int:  # as io.FileIO names a stream opened from an fd
        return self._stderr_fd

    @property
    def mode(self) -> str:
        return "wb"

    def writable(self) -> bool:
        return True

    def write(self, data: bytes) -> int:  # type: ignore[override]
        data = bytes(data)
        if _identity(self._stdout_fd) != self._stdout_pipe:
            _write_all(self._stderr_fd, data)  # fd 1 redirected by the program: stderr keeps its own pipe
            return len(data)
        for frame in frames(data):
            _write_all(self._stdout_fd, frame)
        return len(data)


def _text(raw: io.RawIOBase) -> io.TextIOWrapper:
    return io.TextIOWrapper(io.BufferedWriter(raw), encoding="utf-8", errors="backslashreplace",
                            line_buffering=True)


def ordered_text_streams(stdout_fd: int = 1, stderr_fd: int = 2) -> tuple[io.TextIOWrapper, io.TextIOWrapper]:
    """Line-buffered text streams for fds 1 and 2, stderr's framed into stdout's pipe."""
    stdout = _text(io.FileIO(stdout_fd, "wb", closefd=True))
    return stdout, _text(_StderrIntoStdout(stdout_fd, stderr_fd))


class StdoutDemux:
    """The worker's side: the stdout pipe's bytes split back into (stream, bytes) in written order."""

    def __init__(self) -> None:
        self._pending = b""  # a header cut by the read boundary, or a possible start of one
        self._frame_left = 0  # payload bytes of the current frame still to come

    def split(self, chunk: bytes, final: bool = False) -> list[tuple[str, bytes]]:
        data, self._pending = (self._pending + chunk if self._pending else chunk), b""
        parts: list[tuple[str, bytes]] = []
        at = 0
        while at < len(data):
            if self._frame_left:
                piece = data[at:at + self._frame_left]
                parts.append(("stderr", piece))
                self._frame_left -= len(piece)
                at += len(piece)
                continue
            start = data.find(FRAME_MAGIC, at)
            if start < 0:
                keep = 0 if final else _magic_prefix_at_end(data, at)
                parts.append(("stdout", data[at:len(data) - keep]))
                self._pending = data[len(data) - keep:]
                break
            parts.append(("stdout", data[at:start]))
            if start + HEADER_BYTES > len(data):
                if final:
                    parts.append(("stdout", data[start:]))
                else:
                    self._pending = data[start:]
                break
            size = int.from_bytes(data[start + len(FRAME_MAGIC):start + HEADER_BYTES], "big")
            if not 0 < size <= MAX_FRAME_PAYLOAD:
                parts.append(("stdout", FRAME_MAGIC))  # not a frame the sandbox writes: plain text
                at = start + len(FRAME_MAGIC)
                continue
            self._frame_left = size
            at = start + HEADER_BYTES
        return _merged(parts)


def _magic_prefix_at_end(data: bytes, start: int) -> int:
    """How many trailing bytes of ``data[start:]`` could begin a frame header."""
    for size in range(min(len(FRAME_MAGIC) - 1, len(data) - start), 0, -1):
        if data.endswith(FRAME_MAGIC[:size]):
            return size
    return 0


def _merged(parts: list[tuple[str, bytes]]) -> list[tuple[str, bytes]]:
    """Neighbours of one stream joined once (a read may hold thousands of one-byte frames)."""
    runs: list[tuple[str, list[bytes]]] = []
    for kind, data in parts:
        if not data:
            continue
        if runs and runs[-1][0] == kind:
            runs[-1][1].append(data)
        else:
            runs.append((kind, [data]))
    return [(kind, b"".join(pieces)) for kind, pieces in runs]
