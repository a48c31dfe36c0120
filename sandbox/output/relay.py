"""A run's three pipes (stdout, stderr, events) turned into events, in the order they were written.

Ordering of stdout and stderr: Python's stderr arrives framed inside the
stdout pipe (``jaxplay.sandbox.output.ordering``), split back here in written order.

Ordering across the pipes: ``jaxplay.sandbox.output.events.emit`` in the child waits until
this relay has read the output pipes before it writes an event. So whatever
sits in an output pipe was written after every event already in the events
pipe: before reading output, the relay reads the pending events first.

All reading happens in event-loop reader callbacks (non-blocking fds); the
relay owns the read ends and closes them at EOF or in ``close()``. It also
caps output (with one notice) and holds ``error`` events until the output
has been drained, so an error is shown after what led to it.
"""

from __future__ import annotations

import asyncio
import codecs
import logging
import os
from collections.abc import Callable
from typing import Any

from jaxplay.sandbox.isolation.limits import format_bytes
from jaxplay.sandbox.output import event_channel
from jaxplay.sandbox.output.ordering import StdoutDemux

log = logging.getLogger("jaxplay.sandbox")

SendEvent = Callable[[dict[str, Any]], None]
READ_CHUNK = 64 * 1024


class OutputRelay:
    def __init__(self, send: SendEvent, output_limit: int, allow_probe: bool = False) -> None:
        self.send = send
        self.output_limit = output_limit
        self.output_bytes = 0
        self.truncated = False
        self.error_sent = False
        self._held: list[dict[str, Any]] = []
        self._fds: dict[str, int] = {}
        # Framed stderr (inside the stdout pipe) and the stderr pipe's raw bytes decode apart.
        self._decoders = {source: codecs.getincrementaldecoder("utf-8")(errors="replace")
                          for source in ("stdout", "stderr", "stderr in stdout")}
        self._stdout_demux = StdoutDemux()
        self._event_buffer = bytearray()
        self._skipping_line = False
        self._refusals: set[str] = set()
        self.gate = event_channel.EventGate(allow_probe)
        self._all_closed = asyncio.Event()

    def start(self, stdout_fd: int, stderr_fd: int, events_fd: int) -> None:
        loop = asyncio.get_running_loop()
        self._fds = {"stdout": stdout_fd, "stderr": stderr_fd, "events": events_fd}
        for kind, fd in self._fds.items():
            os.set_blocking(fd, False)
            loop.add_reader(fd, self._on_readable, kind)

    async def closed(self) -> None:
        """Every pipe at EOF: no process holds a write end any more."""
        await self._all_closed.wait()

    async def drained(self, timeout: float) -> None:
        """Wait until every pipe reached EOF (all writers gone), then send held errors."""
        try:
            await asyncio.wait_for(self._all_closed.wait(), timeout)
        except TimeoutError:
            log.debug("run pipes still open after %.1f s; closing them", timeout)
        self.close()
        for event in self._held:
            self.send(event)
        self._held.clear()

    def close(self) -> None:
        for kind in list(self._fds):
            self._close(kind)

    # --- reading -------------------------------------------------------------

    def _on_readable(self, kind: str) -> None:
        # Events pending now were written before this output: send them first. Output is
        # read once per wake-up: as soon as that read returns, the child may write an
        # event and more output, and a second read would let that output overtake it.
        while "events" in self._fds and self._read_once("events"):
            pass
        if kind != "events" and kind in self._fds:
            self._read_once(kind)

    def _read_once(self, kind: str) -> bool:
        """One read; False when the pipe is empty for now or at EOF."""
        try:
            chunk = os.read(self._fds[kind], READ_CHUNK)
        except BlockingIOError:
            return False
        except OSError:
            chunk = b""
        if not chunk:
            self._close(kind)
            return False
        if kind == "events":
            self._event_bytes(chunk)
        elif kind == "stdout":
            self._stdout_bytes(chunk, final=False)
        else:
            self._output(kind, self._decoders[kind].decode(chunk), len(chunk))
        return True

    def _close(self, kind: str) -> None:
        fd = self._fds.pop(kind, None)
        if fd is None:
            return
        asyncio.get_running_loop().remove_reader(fd)
        os.close(fd)
        if kind == "events":
            if self._event_buffer:
                self._structured(bytes(self._event_buffer))
                self._event_buffer.clear()
        elif kind == "stdout":
            self._stdout_bytes(b"", final=True)
        else:
            self._output(kind, self._decoders[kind].decode(b"", final=True), 0)
        if not self._fds:
            self._all_closed.set()

    # --- turning bytes into events --------------------------------------------

    def _stdout_bytes(self, chunk: bytes, final: bool) -> None:
        for kind, data in self._stdout_demux.split(chunk, final):
            source = "stdout" if kind == "stdout" else "stderr in stdout"
            self._output(kind, self._decoders[source].decode(data), len(data))
        if final:
            self._output("stdout", self._decoders["stdout"].decode(b"", final=True), 0)
            self._output("stderr", self._decoders["stderr in stdout"].decode(b"", final=True), 0)

    def _output(self, kind: str, text: str, size: int) -> None:
        if not text or self.truncated:
            return
        room = self.output_limit - self.output_bytes
        self.output_bytes += size
        if size <= room:
            self.send({"type": kind, "text": text})
            return
        self.truncated = True
        head = text.encode()[:max(room, 0)].decode(errors="ignore")
        if head:
            self.send({"type": kind, "text": head})
        self.send({"type": "notice", "level": "warning",
                   "message": f"Output truncated: the run wrote more than {format_bytes(self.output_limit)}; "
                              "the rest was dropped. Print less, or print summaries."})

    def _event_bytes(self, chunk: bytes) -> None:
        # Scan only the new bytes for a newline: a huge line costs its length once, not once per read.
        start = len(self._event_buffer)
        self._event_buffer += chunk
        begin = 0
        while (newline := self._event_buffer.find(b"\n", max(start, begin))) >= 0:
            self._structured(bytes(self._event_buffer[begin:newline]))
            begin = start = newline + 1
        if begin:
            del self._event_buffer[:begin]
        if len(self._event_buffer) > event_channel.MAX_EVENT_BYTES:
            self._skipping_line = True  # the rest of this line is dropped as it arrives
            self._refuse(event_channel.EventRefused("an event over the size limit"))
            self._event_buffer.clear()

    def _structured(self, line: bytes) -> None:
        if self._skipping_line:
            self._skipping_line = False  # this was the tail of an oversized line
            return
        try:
            event = self.gate.admit(line)
        except event_channel.EventRefused as refused:
            self._refuse(refused)
            return
        if event["type"] == "error":
            if self.error_sent:
                return  # one error per run
            self.error_sent = True
            self._held.append(event)  # shown after the output that led to it
            return
        self.send(event)

    def _refuse(self, refused: event_channel.EventRefused) -> None:
        """One notice per reason, the first refusal's detail in it: a notice is no output (the output cap
        does not hold it, and a room relays it to every follower), so a run must not make them by the thousand."""
        if refused.reason in self._refusals:
            return
        self._refusals.add(refused.reason)
        log.debug("run event refused: %s", refused)
        detail = f" ({refused.detail})" if refused.detail else ""
        self.send({"type": "notice", "level": "warning",
                   "message": f"The run sent {refused.reason}{detail}; it was dropped, and any more like it."})
