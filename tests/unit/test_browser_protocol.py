"""Client message parsing: every bad input has a message naming what to change."""

from __future__ import annotations

import json

import pytest

from jaxplay import browser_protocol as bp

LIMIT = 256 * 1024


def parse(obj) -> bp.ClientMessage:
    return bp.parse_client_message(obj if isinstance(obj, str | bytes) else json.dumps(obj), max_code_bytes=LIMIT)


def test_run_with_all_fields():
    message = parse({"type": "run", "id": "a", "code": "print(1)", "backend": "cpu", "timeout_s": 5,
                     "inspect": False, "fresh": True})
    assert message == bp.ClientRun(id="a", code="print(1)", backend="cpu", timeout_s=5, inspect=False, fresh=True)


def test_defaults():
    assert parse({"type": "run", "id": "a", "code": ""}) == bp.ClientRun(id="a", code="")
    assert parse({"type": "cancel", "id": "a"}) == bp.ClientCancel(id="a")


@pytest.mark.parametrize(("raw", "fragment", "run_id"), [
    (b"\x00", "Binary frames", None),
    ("{", "Malformed JSON", None),
    ("[1]", "JSON object", None),
    ({"type": "nope", "id": "x"}, "'run', 'cancel' or 'passes'", "x"),
    ({"type": "run", "code": "1"}, "'id' is required", None),
    ({"type": "run", "id": 3, "code": "1"}, "'id' is required", None),
    ({"type": "run", "id": "x" * 129, "code": "1"}, "1 to 128", "x" * 129),  # readable, so answered
    ({"type": "run", "id": "a"}, "'code' is required", "a"),
    ('{"type": "run", "id": "h\\ud800", "code": "1"}', "surrogate", "h\ud800"),  # no text, but answered by it
    ({"type": "run", "id": "a", "code": "#" * (LIMIT + 1)}, "256 KiB", "a"),
    ({"type": "run", "id": "a", "code": "1", "backend": 7}, "'backend'", "a"),
    ({"type": "run", "id": "a", "code": "1", "timeout_s": -1}, "positive", "a"),
    ({"type": "run", "id": "a", "code": "1", "timeout_s": True}, "positive", "a"),
    ({"type": "run", "id": "a", "code": "1", "inspect": "yes"}, "'inspect'", "a"),
    ({"type": "cancel"}, "'id' is required", None),
    # Not JSON, yet a run's id can be read: the reply ends that run (``done``, ``rejected``).
    ('{"type":"run","id":"n","code":"print(1)","timeout_s":NaN}', "NaN is not a JSON number", "n"),
    ('{"id":"i","type":"run","code":"1","timeout_s":-Infinity}', "Infinity", "i"),
    ('{"type":"run","id":"d","code":"1","x":' + "[" * 100000 + "]" * 100000 + "}", "nested deeper", "d"),
    ('{"type":"run","x":["]\\"",{"id":"inner"}],"id":"s","y":NaN}', "NaN", "s"),
    ('{"type":"run","id":"t","code":"print(', "Malformed JSON", "t"),
    ('{"type":"cancel","id":"c","x":NaN}', "NaN", None),  # not a run: a notice names it
    ('{"type":"run","id":"' + "x" * 129 + '","x":NaN}', "NaN", "x" * 129),
    (b'{"type":"run","id":"b","code":"1"}', "Binary frames", "b"),  # a script's binary frame: its run ends too
    ('{"type":"run","id":"","x":NaN}', "NaN", None),  # no id to answer
])
def test_bad_input_names_the_problem(raw, fragment, run_id):
    with pytest.raises(bp.ProtocolError) as info:
        parse(raw)
    assert fragment in str(info.value)
    assert info.value.run_id == run_id


def test_code_size_counts_utf8_bytes():
    with pytest.raises(bp.ProtocolError):
        parse({"type": "run", "id": "a", "code": "é" * (LIMIT // 2 + 1)})


def test_done_event_shape():
    event = bp.done_event("a", bp.RunStatus.TIMEOUT, 12.345, "too slow")
    assert event == {"type": "done", "id": "a", "status": "timeout", "elapsed_ms": 12.3, "message": "too slow"}
    assert bp.rejected("b", "why")["status"] == "rejected"


def test_a_deck_set_may_name_the_slide_to_stay_on():
    message = parse({"type": "room_deck", "action": "set", "snippets": ["a", "b"], "position": 1})
    assert message == bp.RoomDeck(action="set", position=1, snippets=("a", "b"))
    assert parse({"type": "room_deck", "action": "set", "snippets": []}).position is None
    for position in (-1, True, "1"):
        with pytest.raises(bp.ProtocolError, match="'position' must be a slide index"):
            parse({"type": "room_deck", "action": "set", "snippets": ["a"], "position": position})
