"""stderr framed inside the stdout pipe, and the worker's split of it, byte by byte."""

from __future__ import annotations

import os
import random

from jaxplay.sandbox.output.ordering import (
    FRAME_MAGIC,
    MAX_FRAME_PAYLOAD,
    PIPE_BUF,
    StdoutDemux,
    frames,
    ordered_text_streams,
)


def split_all(data: bytes, cuts: list[int]) -> list[tuple[str, bytes]]:
    """Feed ``data`` to one demux in reads cut at ``cuts``; the parts merged as a reader would see them."""
    demux = StdoutDemux()
    parts: list[tuple[str, bytes]] = []
    bounds = [0, *cuts, len(data)]
    for start, end in zip(bounds, bounds[1:], strict=False):
        parts += demux.split(data[start:end])
    return merge_adjacent(parts + demux.split(b"", final=True))


def merge_adjacent(parts: list[tuple[str, bytes]]) -> list[tuple[str, bytes]]:
    """Neighbouring parts of one stream as one, as a reader shows them."""
    merged: list[tuple[str, bytes]] = []
    for kind, piece in parts:
        if merged and merged[-1][0] == kind:
            merged[-1] = (kind, merged[-1][1] + piece)
        else:
            merged.append((kind, piece))
    return merged


def test_frames_fit_one_atomic_pipe_write():
    big = bytes(range(256)) * 100
    pieces = frames(big)
    assert all(len(frame) <= PIPE_BUF for frame in pieces)
    assert b"".join(frame[len(FRAME_MAGIC) + 2:] for frame in pieces) == big
    assert len(pieces) == -(-len(big) // MAX_FRAME_PAYLOAD)


def test_interleaved_streams_come_back_in_written_order_whatever_the_read_boundaries():
    rng = random.Random(7)
    written: list[tuple[str, bytes]] = []
    pipe = b""
    for i in range(300):
        kind = rng.choice(["stdout", "stderr"])
        text = f"{kind} {i} {'é' * rng.randint(0, 3)}\n".encode() * rng.randint(1, 40)
        written.append((kind, text))
        pipe += text if kind == "stdout" else b"".join(frames(text))
    expected = merge_adjacent(written)
    for _ in range(30):
        cuts = sorted(rng.sample(range(1, len(pipe)), rng.randint(1, 200)))
        assert split_all(pipe, cuts) == expected
    assert split_all(pipe, list(range(1, len(pipe)))) == expected  # one byte per read


def test_forged_or_partial_headers_read_as_plain_stdout():
    too_long = FRAME_MAGIC + (MAX_FRAME_PAYLOAD + 1).to_bytes(2, "big") + b"x"
    assert split_all(too_long, []) == [("stdout", too_long)]
    assert split_all(FRAME_MAGIC + b"\x00\x00tail", []) == [("stdout", FRAME_MAGIC + b"\x00\x00tail")]
    assert split_all(b"ends with " + FRAME_MAGIC[:4], [3]) == [("stdout", b"ends with " + FRAME_MAGIC[:4])]
    assert split_all(b"a\x00b", [2]) == [("stdout", b"a\x00b")]  # a lone NUL is only held, then sent


def test_the_programs_streams_write_frames_and_fall_back_when_fd1_is_redirected(tmp_path):
    read_out, write_out = os.pipe()
    stdout_fd = os.dup(write_out)
    os.close(write_out)
    err_file = tmp_path / "stderr"
    err_fd = os.open(err_file, os.O_WRONLY | os.O_CREAT)
    stdout, stderr = ordered_text_streams(stdout_fd, err_fd)
    assert stderr.fileno() == err_fd  # faulthandler and friends still see fd 2
    assert (stdout.name, stderr.name, stderr.buffer.mode) == (stdout_fd, err_fd, "wb")  # as io.FileIO says
    stdout.write("one\n")
    stderr.write("two\n")
    stdout.write("three\n")
    # The program silences stdout as a terminal user would: stderr keeps its own fd rather than vanish too.
    null = os.open(os.devnull, os.O_WRONLY)
    os.dup2(null, stdout_fd)  # the pipe's last write end is gone: the reader sees EOF
    os.close(null)
    stderr.write("four\n")
    stdout.write("hidden\n")
    stdout.close()
    stderr.close()
    with os.fdopen(read_out, "rb") as pipe:
        assert split_all(pipe.read(), []) == [("stdout", b"one\n"), ("stderr", b"two\n"), ("stdout", b"three\n")]
    assert err_file.read_bytes() == b"four\n"
