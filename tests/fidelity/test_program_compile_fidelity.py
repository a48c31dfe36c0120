"""A program compiles in the playground exactly as plain Python compiles it.

The runner's own module has ``from __future__ import annotations``; ``compile()`` would pass that
flag on to the program unless told not to, turning annotations into strings. Each program below runs
through the real runner (tests/runner_harness.py) and in a plain ``python``; both must end alike.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from tests.runner_harness import run_programs

REPO = Path(__file__).resolve().parents[2]

PROGRAMS = {
    "annotations_are_objects": "def f(x: int) -> float:\n    return x\n"
                               "assert f.__annotations__ == {'x': int, 'return': float}, f.__annotations__\n",
    "namedtuple_fields": "from typing import NamedTuple\nclass Point(NamedTuple):\n    x: int\n    y: float = 0.0\n"
                         "assert Point.__annotations__ == {'x': int, 'y': float}, Point.__annotations__\n"
                         "assert Point._field_defaults == {'y': 0.0}\n",
    "undefined_annotation_raises": "def g(x: numpy_never_imported.ndarray):\n    return x\n",
    "last_expression_too": "import typing\nclass A:\n    x: int\ntyping.get_type_hints(A)['x'] is int or 1 / 0\n",
}
# What plain Python does with each: None for a clean run, else the exception's name.
EXPECTED = {"annotations_are_objects": None, "namedtuple_fields": None,
            "undefined_annotation_raises": "NameError", "last_expression_too": None}


def plain_python_outcome(code: str) -> str | None:
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    if result.returncode == 0:
        return None
    return result.stderr.strip().splitlines()[-1].partition(":")[0]


def test_programs_compile_as_plain_python_compiles_them() -> None:
    outcomes = run_programs(list(PROGRAMS.values()), cwd=str(REPO))
    for (name, code), events in zip(PROGRAMS.items(), outcomes, strict=True):
        errors = [e for e in events if e["type"] == "error"]
        in_playground = errors[0]["ename"] if errors else None
        assert plain_python_outcome(code) == EXPECTED[name], f"{name}: the expectation is plain Python's"
        assert in_playground == EXPECTED[name], f"{name}: {errors[0]['message'] if errors else 'ran cleanly'}"
