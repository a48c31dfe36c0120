"""stdout and stderr arrive in the order the program wrote them, as in a terminal."""

from __future__ import annotations

from tests.conftest import done_of

ALTERNATING = """
import sys
for i in range(200):
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
    expected = [pair for i in range(200) for pair in (("stdout", f"out {i}"), ("stderr", f"err {i}"))]
    expected += [("stdout", "partial line"), ("stderr", "last err")]
    assert lines_in_arrival_order(events) == expected


def test_one_stream_only_is_unchanged(live):
    events = live.run("import sys\nfor i in range(3):\n    print(i, file=sys.stderr)\nprint('done')")
    assert lines_in_arrival_order(events) == [("stderr", "0"), ("stderr", "1"), ("stderr", "2"), ("stdout", "done")]
