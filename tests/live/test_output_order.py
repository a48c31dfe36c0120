"""stdout and stderr arrive in the order the program wrote them, as in a terminal."""

from __future__ import annotations

from tests.conftest import done_of

ALTERNATING = """
import sys
for i in range(100):
    print(f"out {i}")
    print(f"err {i}", file=sys.stderr)
sys.stdout.write("partial ")
sys.stdout.write("line\\n")
print("last err", file=sys.stderr)
"""


def lines_in_arrival_order(events: list[dict]) -> list[tuple[str, str]]:
    """(stream, line) for each complete line, in the order the events came."""
    lines: list[tuple[str, str]] = []
    open_text = {"stdout": "", "stderr": ""}
    for ev in events:
        if ev["type"] not in open_text:
            continue
        text = open_text[ev["type"]] + ev["text"]
        *complete, open_text[ev["type"]] = text.split("\n")
        lines += [(ev["type"], line) for line in complete]
    return lines


def test_alternating_stdout_and_stderr_keep_their_written_order(live):
    events = live.run(ALTERNATING)
    assert done_of(events)["status"] == "ok"
    expected = [pair for i in range(100) for pair in (("stdout", f"out {i}"), ("stderr", f"err {i}"))]
    expected += [("stdout", "partial line"), ("stderr", "last err")]
    assert lines_in_arrival_order(events) == expected


def test_one_stream_only_is_unchanged(live):
    events = live.run("import sys\nfor i in range(3):\n    print(i, file=sys.stderr)\nprint('done')")
    assert lines_in_arrival_order(events) == [("stderr", "0"), ("stderr", "1"), ("stderr", "2"), ("stdout", "done")]


def test_a_program_switching_streams_thousands_of_times_keeps_exact_order_without_waiting(live):
    code = ("import sys, time\nstart = time.perf_counter()\nfor i in range(5000):\n"
            "    print(f'o{i}')\n    print(f'e{i}', file=sys.stderr)\n"
            "print(f'loop {time.perf_counter() - start:.2f}')\n")
    events = live.run(code)
    assert done_of(events)["status"] == "ok"
    assert not [e for e in events if e["type"] == "notice"]
    lines = lines_in_arrival_order(events)
    expected = [pair for i in range(5000) for pair in (("stdout", f"o{i}"), ("stderr", f"e{i}"))]
    assert lines[:-1] == expected
    # Nothing waits on the worker: the loop costs what 10,000 line-buffered writes cost.
    assert float(lines[-1][1].split()[1]) < 3.0


def test_raw_fd_writes_threads_and_a_silenced_stdout_lose_nothing(live):
    events = live.run("""
import os, sys, threading
os.write(2, b"raw err\\n")
def chatter(name):
    for i in range(200):
        print(f"{name} {i}", file=sys.stderr if i % 2 else sys.stdout)
threads = [threading.Thread(target=chatter, args=(n,)) for n in "ab"]
[t.start() for t in threads]; [t.join() for t in threads]
sys.stdout.flush()
os.dup2(os.open(os.devnull, os.O_WRONLY), 1)
print("gone")
print("still shown", file=sys.stderr)
""")
    assert done_of(events)["status"] == "ok"
    lines = lines_in_arrival_order(events)
    for name in "ab":
        mine = [pair for pair in lines if pair[1].startswith(f"{name} ")]
        assert mine == [("stderr" if i % 2 else "stdout", f"{name} {i}") for i in range(200)]
    assert ("stderr", "raw err") in lines and ("stderr", "still shown") in lines
    assert ("stdout", "gone") not in lines
