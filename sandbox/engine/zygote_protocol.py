"""Worker <-> zygote <-> spare messages: one JSON packet each on SOCK_SEQPACKET sockets.

The worker created the control socketpair before starting the sandbox, so it
works across the sandbox's namespaces (no network is involved). Messages,
named by who sends them::

    zygote -> worker  ready    {pid, jax_version, jaxlib_version}   imported jax, first spare forked
    zygote -> worker  spare    {pid} + fd [door]   a warm spare; its door is the worker's end of a
                               socket to that spare's init. It replaces any spare offered before.
    worker -> zygote  start    {run_id, spare}     the run goes to that spare (sent before the run
                                                   goes through its door)
    worker -> zygote  start    {run_id, unstarted_backend: true}   a spare whose backend is not
                                                   started, made now for a program that configures JAX
    zygote -> worker  started  {run_id, pid} + fd [door]   (unstarted_backend only)
    worker -> zygote  kill     {run_id}            ends the run's pid namespace
    zygote -> worker  exited   {run_id, returncode, signal, max_rss_kb, unsaved_entries[, killed_from_outside]}
                               every process of the run gone; unsaved_entries: new compile-cache
                               entries the session's budget left out; killed_from_outside: the
                               run's keeper or init was killed by a signal from outside the run

on a spare's door, between the worker and the spare's init::

    worker -> init    run      {run} + fds [stdout, stderr, events, code]; ``run`` is a
                               ``SandboxRun`` (jaxplay/worker_protocol.py: the job's options and
                               what the worker adds). The init mounts the session's compile cache
                               and hands the message on to the run's process, which alone reads
                               the code (a memfd: no packet's size limit)
    init -> worker    watching {paths: {wd: path} or null, error?} + fd [inotify]   before the run's
                               process gets the code: the kernel's watch on the host files the run
                               may open (sandbox/capture/host_state_reads.py); null: none could be made
    init -> worker    ended    {status, max_rss_kb}   the run's process has exited: its status from
                               the kernel (not sent when the init must save cache entries first)

and between the zygote and each spare's init::

    init -> zygote    gone     {status, max_rss_kb, unsaved_entries}   every process of the run
                               reaped, its entries saved; the zygote then sends ``exited``

A status is never the program's word about itself: the init's ``ended`` and
``gone`` carry the kernel's exit status of the run's process (a signal as
128+N), or the keeper's exit tells.

The invariant this shape keeps: the program and its options (anything a user
typed, keys pasted into code included) go from the worker through the door
straight to the run's init and process, and never through the zygote. Every
spare is a fork of the zygote and inherits its whole heap, freed memory too,
so a process that forks spares must never have held user input. The zygote
keeps no copy of a door it has offered; the code travels as a file that the
run's process alone reads (the init passes it on unread).

Kept to the standard library and jaxplay's wire types: the zygote imports this before jax.
"""

from __future__ import annotations

import json
import os
import socket
from typing import Any

from jaxplay import worker_protocol as wp

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


def run_message(run: wp.SandboxRun) -> dict[str, Any]:
    """The ``run`` message a spare's door carries."""
    return {"type": "run", "run": wp.to_wire(run)}


def run_of(message: dict[str, Any]) -> wp.SandboxRun:
    """The ``SandboxRun`` of a ``run`` message, its fields checked; ValueError names what is wrong."""
    return wp.from_wire(wp.SandboxRun, message.get("run"), "the door's run")


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
