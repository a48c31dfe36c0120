"""A program's error reaches the page whatever the size of the line it names.

A 256 KiB line of control characters made a SyntaxError whose traceback (the line, escaped six times over
in JSON) passed the run's budget for errors: the error was dropped and the run was reported as crashed.
"""

from __future__ import annotations

import json

from jaxplay.sandbox.engine import runner
from jaxplay.sandbox.output.event_channel import RUN_EVENT_BUDGETS


def syntax_error(code: str) -> SyntaxError:
    try:
        compile(code, runner.USER_FILENAME, "exec")
    except SyntaxError as exc:
        return exc
    raise AssertionError("compiled")


def test_an_error_on_an_enormous_line_fits_the_runs_budget_and_still_names_the_line():
    event = runner.error_event(syntax_error("x = 1\n" + "\u0001" * 262_000), "4 GiB")
    assert len(json.dumps(event)) < RUN_EVENT_BUDGETS["error"] // 4
    assert event["line"] == 2 and event["ename"] == "SyntaxError"
    assert "U+0001" in event["message"] and "characters cut" in event["traceback"]


def test_an_ordinary_error_is_untouched():
    event = runner.error_event(syntax_error("x = (1,\n"), "4 GiB")
    assert "characters cut" not in event["traceback"] and event["traceback"].endswith("\n")
