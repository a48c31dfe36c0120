"""What made a jaxpr big: its equations counted per line of the user's code.

A Python loop unrolled by tracing, a helper called a hundred times, a
library layer that expands into dozens of primitives: each shows up as one
source line with many equations. The walk descends into every inner jaxpr
(``pjit``, ``scan`` and ``while`` bodies, ``cond`` branches, custom
derivatives), as JAX's own ``eqn_count_pprof`` dump does, and attributes each
equation to the innermost line of ``<playground>`` on its traceback. An inner
equation whose own traceback has no user line (library code, a rule JAX
applied) takes the line of the equation that holds it.

Runs in the renderer thread, never on the user's path: about 3 us per
equation.
"""

from __future__ import annotations

import linecache
from collections import Counter
from typing import Any

USER_FILENAME = "<playground>"
MAX_LINES_REPORTED = 500  # source lines, largest counts first; the rest are summed in ``other_lines``
TOP_PRIMITIVES = 4
MAX_SOURCE_CHARS = 120


def _user_line(traceback: Any, source_info_util: Any) -> int | None:
    if traceback is None:
        return None
    for frame in source_info_util.user_frames(traceback):
        if frame.file_name == USER_FILENAME:
            return int(frame.start_line)
    return None


def count_by_line(jaxpr: Any) -> tuple[Counter[tuple[int | None, str]], int]:
    """(line, primitive) -> equations, over the jaxpr and every jaxpr inside it; and the total."""
    from jax._src import core, source_info_util

    counts: Counter[tuple[int | None, str]] = Counter()
    total = 0
    # Explicit stack, no recursion: a deeply nested program must not exhaust Python's stack here.
    stack: list[tuple[Any, Any]] = [(jaxpr, None)]
    while stack:
        current, caller_traceback = stack.pop()
        for eqn in current.eqns:
            traceback = eqn.source_info.traceback
            if caller_traceback is not None:
                traceback = caller_traceback if traceback is None else traceback + caller_traceback
            counts[(_user_line(traceback, source_info_util), eqn.primitive.name)] += 1
            total += 1
            for inner in core.jaxprs_in_params(eqn.params):
                stack.append((inner, traceback))
    return counts, total


def summarize(counts: Counter[tuple[int | None, str]], total: int, limit: int = MAX_LINES_REPORTED) -> dict[str, Any]:
    """The ``eqn_counts`` field: one row per source line, largest first.

    Each row: ``{"line", "count", "primitives": [[name, count], ...], "source"}``; ``line`` null
    gathers equations with no line of the program on their traceback.
    """
    per_line: dict[int | None, Counter[str]] = {}
    for (line, primitive), count in counts.items():
        per_line.setdefault(line, Counter())[primitive] += count
    rows = []
    for line, primitives in per_line.items():
        source = linecache.getline(USER_FILENAME, line).strip()[:MAX_SOURCE_CHARS] if line is not None else ""
        rows.append({"line": line, "count": sum(primitives.values()),
                     "primitives": [[name, n] for name, n in primitives.most_common(TOP_PRIMITIVES)],
                     "source": source})
    rows.sort(key=lambda row: (-row["count"], row["line"] is None, row["line"] or 0))
    kept, left = rows[:limit], rows[limit:]
    return {"total": total, "lines": kept, "other_lines": len(left),
            "other_count": sum(row["count"] for row in left)}


def eqn_counts(traced: Any) -> dict[str, Any]:
    counts, total = count_by_line(traced.jaxpr.jaxpr)
    return summarize(counts, total)
