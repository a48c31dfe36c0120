"""Worker <-> zygote <-> spare messages: one JSON packet each on SOCK_SEQPACKET sockets.

The worker created the control socketpair before starting the sandbox, so it
works across the sandbox's namespaces (no network is involved). Messages,
named by who sends them::

    zygote -> worker  ready    {pid, jax_version, jaxlib_version}   imported jax, first spare forked
    worker -> zygote  start    {run_id, unstarted_backend}          which spare; never the code
    zygote -> worker  started  {run_id, pid}                         pid: the run's keeper
                               + fd [door]: the worker's end of a socket to that spare's init
    worker -> door    run      {options, probe}
                               + fds [stdout, stderr, events, code]; the init mounts the
                               session's compile cache and hands it on to the run's process,
                               which alone reads the code (a memfd: no size limit of a packet)
    worker -> zygote  kill     {run_id}                              ends the run's pid namespace
    zygote -> worker  ended    {run_id, returncode, signal, max_rss_kb}   the run's process exited
    zygote -> worker  exited   {run_id, returncode, signal, max_rss_kb}   every process of the run gone

and inside the sandbox, on the socket between the zygote and each spare::

    run's init -> zygote  ended {status, max_rss_kb}   the run's process reaped: its status, from
                                                        the kernel (not sent when the init must
                                                        save cache entries first)
    run's init -> zygote  gone  {status, max_rss_kb}   every process of the run reaped; the
                                                        zygote then sends ``exited``

A status is never the program's word about itself: only the init's (the
kernel's exit status of the run's process) or the keeper's.

The invariant this shape keeps: the program and its options (anything a user
typed, keys pasted into code included) go from the worker through the door
straight to the run's init and process, and never through the zygote. Every
spare is a fork of the zygote and inherits its whole heap, freed memory too,
so a process that forks spares must never have held user input. The code
itself travels as a file the run's process reads: the init passes it on
unread.

Kept to the standard library: the zygote imports this before jax.
"""

from __future__ import annotations

import json
import os
import socket
from typing import Any

MAX_PACKET = 64 << 10  # messages are small: the code travels as a file
MAX_FDS = 4  # a run's three pipes and its code; a ``started`` carries one door


def send(sock: socket.socket, message: dict[str, Any], fds: list[int] | None = None) -> None:
    data = json.dumps(message, separators=(",", ":")).encode()
    if len(data) > MAX_PACKET:
        raise ValueError(f"zygote message of {len(data)} bytes exceeds {MAX_PACKET}")
    if fds:
        socket.send_fds(sock, [data], fds)
    else:
        sock.sendall(data)


def receive(sock: socket.socket) -> tuple[dict[str, Any] | None, list[int]]:
    """One message and the fds sent with it; (None, []) when the peer has gone."""
    data, fds, _flags, _addr = socket.recv_fds(sock, MAX_PACKET, MAX_FDS)
    if not data:
        close_all(fds)
        return None, []
    return json.loads(data), list(fds)


def close_all(fds: list[int]) -> None:
    for fd in fds:
        try:
            os.close(fd)
        except OSError:
            pass


def code_file(code: str) -> int:
    """The program as a memory file for the run's process to read (``read_code``); the caller closes it."""
    fd = os.memfd_create("playground-code", os.MFD_CLOEXEC)
    data = code.encode("utf-8", "surrogatepass")  # the browser's JSON may carry lone surrogates
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view):]
    return fd


def read_code(fd: int) -> str:
    chunks = []
    offset = 0
    while chunk := os.pread(fd, 1 << 20, offset):
        chunks.append(chunk)
        offset += len(chunk)
    os.close(fd)
    return b"".join(chunks).decode("utf-8", "surrogatepass")
