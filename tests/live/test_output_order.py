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


def test_a_program_switching_streams_thousands_of_times_is_not_slowed_much_and_is_told(live):
    code = ("import sys, time\nstart = time.perf_counter()\nfor i in range(5000):\n"
            "    print(i)\n    print(i, file=sys.stderr)\nprint(f'loop {time.perf_counter() - start:.2f}')\n")
    events = live.run(code)
    assert done_of(events)["status"] == "ok"
    notices = [e for e in events if e["type"] == "notice"]
    assert len(notices) == 1 and "out of order" in notices[0]["message"]
    # The waits share a budget of about a second; the loop itself takes milliseconds.
    loop_s = next(float(line.split()[1]) for _, line in lines_in_arrival_order(events) if line.startswith("loop "))
    assert loop_s < 3.0
