"""Which user source line each line of a jaxpr, StableHLO or HLO text came from.

JAX records source locations at every stage; each artifact prints them its
own way: jaxpr equations end in ``# <playground>:L:C (fn)``, StableHLO ops end
in ``loc(#locN)`` resolved through a table of ``#locN = loc(...)`` lines
(printed only with ``debug_info=True``), and optimized HLO instructions carry
``stack_frame_id=N`` into FileNames/FileLocations/StackFrames tables. Each
function here returns run-length ranges ``[first_text_line, last_text_line,
source_line]`` (1-based, inclusive) so a page can highlight the source line
under the pointer without a per-line list for megabyte-sized texts.
"""

from __future__ import annotations

import re

USER_FILENAME = "<playground>"

LineRanges = list[list[int]]

_JAXPR_ANNOTATION = re.compile(r"#\s+" + re.escape(USER_FILENAME) + r":(\d+):\d+ \(.*\)\s*$")
_ANY_JAXPR_ANNOTATION = re.compile(r"#\s+\S.*:\d+(:\d+)? \(.*\)\s*$")
_TRAILING_LOC = re.compile(r"\sloc\((#loc\d*|unknown)\)\s*$")
_LOC_DEFINITION = re.compile(r"^(#loc\d*) = loc\((.*)\)\s*$")
_FILE_LOC = re.compile(r'^"((?:[^"\\]|\\.)*)":(\d+)(?::\d+)?')
_NAME_LOC = re.compile(r'^"(?:[^"\\]|\\.)*"\((#loc\d*)\)$')
_CALLSITE_LOC = re.compile(r"^callsite\((#loc\d*) at (#loc\d*)\)$")
_FUSED_LOC = re.compile(r"^fused(?:<[^>]*>)?\[(#loc\d*)")
_HLO_FRAME_ID = re.compile(r"stack_frame_id=(\d+)")


def _add(ranges: LineRanges, text_line: int, source_line: int | None) -> None:
    if source_line is None:
        return
    if ranges and ranges[-1][2] == source_line and ranges[-1][1] == text_line - 1:
        ranges[-1][1] = text_line
    else:
        ranges.append([text_line, text_line, source_line])


def _indent(line: str) -> int:
    return len(line) - len(line.lstrip(" "))


def jaxpr_line_ranges(text: str) -> LineRanges:
    """An equation's annotation is on its first line; its continuation lines
    (deeper-indented parameters, nested jaxprs, the closing ``] args`` line)
    belong to it. A stack of open equations handles nesting (scan, cond)."""
    ranges: LineRanges = []
    open_equations: list[tuple[int, int | None]] = []  # (indent, source line)
    for number, line in enumerate(text.splitlines(), start=1):
        stripped = line.strip()
        if not stripped:
            continue
        indent = _indent(line)
        match = _JAXPR_ANNOTATION.search(line)
        if match or _ANY_JAXPR_ANNOTATION.search(line):
            while open_equations and open_equations[-1][0] >= indent:
                open_equations.pop()
            open_equations.append((indent, int(match.group(1)) if match else None))
        else:
            while open_equations and not (
                indent > open_equations[-1][0] or (indent == open_equations[-1][0] and stripped[0] in "])")
            ):
                open_equations.pop()
        _add(ranges, number, open_equations[-1][1] if open_equations else None)
    return ranges


def _parse_loc_table(lines: list[str]) -> dict[str, str]:
    table: dict[str, str] = {}
    for line in lines:
        if line.startswith("#loc"):
            match = _LOC_DEFINITION.match(line)
            if match:
                table[match.group(1)] = match.group(2)
    return table


def _resolve_loc(ref: str, table: dict[str, str], memo: dict[str, int | None], depth: int = 0) -> int | None:
    """The innermost user source line of a location: callee before caller."""
    if ref in memo:
        return memo[ref]
    body = table.get(ref)
    result: int | None = None
    if body is not None and depth < 200:
        if (match := _FILE_LOC.match(body)) is not None:
            result = int(match.group(2)) if match.group(1) == USER_FILENAME else None
        elif (match := _NAME_LOC.match(body)) is not None:
            result = _resolve_loc(match.group(1), table, memo, depth + 1)
        elif (match := _CALLSITE_LOC.match(body)) is not None:
            result = _resolve_loc(match.group(1), table, memo, depth + 1)
            if result is None:
                result = _resolve_loc(match.group(2), table, memo, depth + 1)
        elif (match := _FUSED_LOC.match(body)) is not None:
            result = _resolve_loc(match.group(1), table, memo, depth + 1)
    memo[ref] = result
    return result


def _module_start(lines: list[str]) -> int:
    for index, line in enumerate(lines):
        if line.startswith("module"):
            return index
    return 0


def stablehlo_line_ranges(plain_text: str, debug_text: str) -> LineRanges:
    """Map lines of the plain text (what is shown) through the debug text.

    The two prints hold the same operations line for line from the ``module``
    line on; the debug print only adds ``loc(...)`` suffixes and a table.
    """
    plain = plain_text.splitlines()
    debug = debug_text.splitlines()
    table = _parse_loc_table(debug)
    memo: dict[str, int | None] = {}
    plain_start, debug_start = _module_start(plain), _module_start(debug)
    ranges: LineRanges = []
    for offset in range(len(plain) - plain_start):
        debug_index = debug_start + offset
        if debug_index >= len(debug) or debug[debug_index].startswith("#loc"):
            break
        match = _TRAILING_LOC.search(debug[debug_index])
        source = _resolve_loc(match.group(1), table, memo) if match and match.group(1) != "unknown" else None
        _add(ranges, plain_start + offset + 1, source)
    return ranges


def _hlo_frame_lines(lines: list[str]) -> dict[int, int]:
    """stack_frame_id -> user source line, from the tables XLA prints first."""
    sections: dict[str, dict[int, str]] = {}
    section: str | None = None
    for line in lines:
        if line.startswith(("%", "ENTRY", "ROOT")) or line.startswith("  %"):
            break
        stripped = line.strip()
        if stripped in ("FileNames", "FunctionNames", "FileLocations", "StackFrames"):
            section = stripped
            sections[section] = {}
        elif section and stripped and stripped[0].isdigit():
            number, _, rest = stripped.partition(" ")
            sections[section][int(number)] = rest
    names = {key: value.strip('"') for key, value in sections.get("FileNames", {}).items()}
    location_lines: dict[int, int] = {}
    for key, value in sections.get("FileLocations", {}).items():
        fields = dict(re.findall(r"(\w+)=(\d+)", value))
        if names.get(int(fields.get("file_name_id", -1))) == USER_FILENAME and "line" in fields:
            location_lines[key] = int(fields["line"])
    frame_lines: dict[int, int] = {}
    for key, value in sections.get("StackFrames", {}).items():
        fields = dict(re.findall(r"(\w+)=(\d+)", value))
        location = int(fields.get("file_location_id", -1))
        if location in location_lines:
            frame_lines[key] = location_lines[location]
    return frame_lines


_HLO_SOURCE = re.compile(r'source_file="([^"]*)" source_line=(\d+)')


def hlo_line_ranges(text: str) -> LineRanges:
    lines = text.splitlines()
    frame_lines = _hlo_frame_lines(lines)
    ranges: LineRanges = []
    if not frame_lines:
        # Older XLA (the JAX 0.4-0.6 runtimes) names file and line in each instruction's metadata instead.
        for number, line in enumerate(lines, start=1):
            found = _HLO_SOURCE.search(line)
            _add(ranges, number, int(found.group(2)) if found and found.group(1) == USER_FILENAME else None)
        return ranges
    for number, line in enumerate(lines, start=1):
        match = _HLO_FRAME_ID.search(line) if "stack_frame_id=" in line else None
        _add(ranges, number, frame_lines.get(int(match.group(1))) if match else None)
    return ranges


def clip_ranges(ranges: LineRanges, last_line: int) -> LineRanges:
    """Drop what lies beyond a truncated text's last line."""
    clipped = [[first, min(last, last_line), source] for first, last, source in ranges if first <= last_line]
    return clipped
