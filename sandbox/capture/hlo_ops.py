"""Which line of the user's code each instruction of an optimized HLO module came from.

A profile names XLA's operations by their instruction names in the optimized
module (``dot.1``, ``multiply_subtract_fusion``; on a GPU the kernels carry
the same name as ``hlo_op``). The module's text says where each came from
(``jit_source_map.hlo_line_ranges``); an instruction without its own
stack frame that calls a computation (a fusion) takes the first line found
among that computation's instructions. Instructions XLA made up without
metadata (some dots after layout assignment) have no line.
"""

from __future__ import annotations

import re

from jaxplay.sandbox.capture import jit_source_map

_MODULE_NAME = re.compile(r"^HloModule\s+([^\s,]+)")
_COMPUTATION = re.compile(r"^(?:ENTRY\s+)?%?([^\s(]+)\s+\(.*\{\s*$")
_INSTRUCTION = re.compile(r"^\s+(?:ROOT\s+)?%?([^\s=]+)\s+=\s")
_CALLS = re.compile(r"\bcalls=%?([^\s,}]+)")


def module_name(hlo_text: str) -> str | None:
    """``jit_update`` from ``HloModule jit_update, entry_computation_layout=...``."""
    match = _MODULE_NAME.match(hlo_text)
    return match.group(1) if match else None


def instruction_lines(hlo_text: str) -> dict[str, int]:
    """Instruction name -> the 1-based line of the text that defines it."""
    found: dict[str, int] = {}
    for number, text in enumerate(hlo_text.splitlines(), start=1):
        if (instruction := _INSTRUCTION.match(text)) is not None:
            found.setdefault(instruction.group(1), number)
    return found


def op_source_lines(hlo_text: str, ranges: jit_source_map.LineRanges | None = None) -> dict[str, int]:
    """Instruction name -> user source line, for every instruction a line can be found for.

    ``ranges``: the text's ``jit_source_map.hlo_line_ranges``, when the caller has them already."""
    lines = hlo_text.splitlines()
    source_of_line: dict[int, int] = {}
    for first, last, source in ranges if ranges is not None else jit_source_map.hlo_line_ranges(hlo_text):
        for number in range(first, last + 1):
            source_of_line[number] = source
    found: dict[str, int] = {}
    calls: dict[str, str] = {}
    first_line_of: dict[str, int] = {}  # computation -> first source line among its instructions
    computation: str | None = None
    for number, text in enumerate(lines, start=1):
        if (header := _COMPUTATION.match(text)) is not None:
            computation = header.group(1)
            continue
        instruction = _INSTRUCTION.match(text)
        if instruction is None:
            continue
        name = instruction.group(1)
        source = source_of_line.get(number)
        if source is not None:
            found[name] = source
            if computation is not None:
                first_line_of.setdefault(computation, source)
        elif (called := _CALLS.search(text)) is not None:
            calls[name] = called.group(1)
    for name, called in calls.items():
        if called in first_line_of:
            found[name] = first_line_of[called]
    return found
