"""Worker <-> zygote messages: one JSON packet each on a SOCK_SEQPACKET socketpair.

The worker created the socketpair before starting the sandbox, so it works
across the sandbox's namespaces (no network is involved). Messages, named by
who sends them::

    zygote -> worker  ready    {pid, jax_version, jaxlib_version}   imported jax, first spare forked
    worker -> zygote  start    {run_id, code, options, unstarted_backend, probe}
                               + fds [stdout, stderr, events]; the zygote hands them to a spare
    zygote -> worker  started  {run_id, pid}                         pid: the run's keeper
    worker -> zygote  kill     {run_id}                              ends the run's pid namespace
    zygote -> worker  exited   {run_id, returncode, signal, max_rss_kb}

and inside the sandbox, on the socket the start went over::

    run's init -> zygote  gone  {status, max_rss_kb}   every process of the run reaped; the
                                                        zygote then sends ``exited``

Kept to the standard library: the zygote imports this before jax.
"""

from __future__ import annotations

import json
import os
import socket
from typing import Any

MAX_PACKET = 1 << 20  # code is at most 256 KiB; options are small
FDS_PER_START = 3


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
    data, fds, _flags, _addr = socket.recv_fds(sock, MAX_PACKET, FDS_PER_START)
    if not data:
        for fd in fds:
            _close(fd)
        return None, []
    return json.loads(data), list(fds)


def decode(data: bytes) -> dict[str, Any] | None:
    return json.loads(data) if data else None


def _close(fd: int) -> None:
    try:
        os.close(fd)
    except OSError:
        pass
