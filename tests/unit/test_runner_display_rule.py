"""The notebook rule for a program's last line: a bare expression is shown unless its last token is ';'."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from jaxplay.sandbox.engine.runner import ends_with_semicolon, split_last_expression
from tests.runner_harness import run_programs

REPO = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize(("code", "hidden"), [
    ("x = 1\nx", False),
    ("x = 1\nx;", True),
    ("x = 1\nx;  # note", True),
    ("x = 1\nx; # note; more\n\n", True),
    ("x = 1\nx  # a note ending in ;", False),
    ("x = 1\nx  # ;", False),
    ("s = 'a;'\ns", False),
    ("print(1);\n# trailing comment only\n", True),
    ("x = 1\n(x,\n ';')", False),
])
def test_ipython_rule_for_the_trailing_semicolon(code: str, hidden: bool) -> None:
    assert ends_with_semicolon(code) is hidden
    _, last = split_last_expression(ast.parse(code), code)
    assert (last is None) is hidden


def test_the_runner_shows_or_hides_the_last_value() -> None:
    shown, hidden = run_programs(["x = 41\nx + 1  # the answer;", "x = 41\nx + 1;  # the answer"], cwd=str(REPO))
    assert [e["data"] for e in shown if e["type"] == "display" and e["mime"] == "text/plain"] == ["42"]
    assert not [e for e in hidden if e["type"] == "display"]
