"""XLA's per-pass HLO dumps and its compile trace, read back as a pass pipeline with before/after texts.

With ``xla_dump_hlo_pass_re=.*`` XLA writes the module at the start of each
pipeline and after every pass that changed it, one file each::

    module_0010.jit_update.0006.simplification.after_algsimp.before_simplify-sorts.txt
            id  module     seq  pipeline       the pass that ran  the pass that runs next

plus ``before_optimizations.txt`` (what XLA was given). Passes that changed
nothing leave no file. The profiler's trace of the same compile names every
pass that ran, in order, with its duration (``<pipeline> (<module>)`` events
on the compiler thread, each pass a child of its pipeline). ``passes``
merges the two: the full list when the trace is there, each pass marked
changed when a dump belongs to it; the dumps alone otherwise.

Texts: each kept dump is the whole module after its pass. Their header
(XLA's tables of file names and stack frames, the same in every dump) is
kept once, in ``header``; each text keeps its source-line map
(``jit_source_map.hlo_line_ranges``, on the full text, shifted past the
header). A text equal to the one before it is not repeated (``same_as``).
"""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from jaxplay.sandbox.capture import jit_source_map

PASS_FILE = re.compile(r"^(\d+)\.(.+?)\.after_(.+?)(?:\.before_(.+))?\.txt$")
PIPELINE_START = "pipeline-start"
INVARIANT_CHECKS = "RunInvariantCheckers"
HEADER_SECTIONS = ("FileNames", "FunctionNames", "FileLocations", "StackFrames")


@dataclass
class DumpFile:
    seq: int
    pipeline: str
    after: str
    before: str | None
    name: str


@dataclass
class TracedPipeline:
    name: str  # as XLA's dump files spell it: spaces as underscores
    start_us: float
    duration_us: float
    # (pass, start, duration, whether XLA's invariant checks ran after it: they run only after a change)
    passes: list[tuple[str, float, float, bool]] = field(default_factory=list)


def dump_files(names: list[str], module: str) -> tuple[str | None, list[DumpFile]]:
    """The before-optimizations file and the per-pass files of ``module``'s last compile, in order."""
    prefixes = sorted({n.split(".", 1)[0] for n in names if n.startswith("module_") and f".{module}." in n})
    if not prefixes:
        return None, []
    prefix = f"{prefixes[-1]}.{module}."  # the highest module id: the compile we asked for
    before = prefix + "before_optimizations.txt"
    files = []
    for name in names:
        if not name.startswith(prefix):
            continue
        match = PASS_FILE.match(name[len(prefix):])
        if match is not None:
            files.append(DumpFile(int(match.group(1)), match.group(2), match.group(3), match.group(4), name))
    files.sort(key=lambda f: f.seq)
    return (before if before in names else None), files


def traced_pipelines(trace: dict[str, Any], module: str) -> list[TracedPipeline]:
    """Every pipeline run on ``module``, in order, with the passes it ran (from a Chrome trace).

    On the compiler thread a pipeline ``<name> (<module>)`` holds its passes as direct children; a
    pass that changed the module holds XLA's invariant checks; a pass may hold a nested pipeline."""
    events = [e for e in trace.get("traceEvents", []) if isinstance(e, dict) and e.get("ph") == "X"
              and isinstance(e.get("ts"), int | float) and isinstance(e.get("dur"), int | float)]
    by_thread: dict[Any, list[dict[str, Any]]] = {}
    for event in events:
        by_thread.setdefault((event.get("pid"), event.get("tid")), []).append(event)
    suffix = f" ({module})"
    pipelines: list[TracedPipeline] = []
    for thread_events in by_thread.values():
        thread_events.sort(key=lambda e: (e["ts"], -e["dur"]))
        depths = _nesting(thread_events)
        for index, event in enumerate(thread_events):
            name = event.get("name", "")
            if (event.get("args") or {}).get("module") != module or not name.endswith(suffix):
                continue
            pipeline = TracedPipeline(name[: -len(suffix)].replace(" ", "_"), event["ts"], event["dur"])
            end, depth = event["ts"] + event["dur"], depths[index]
            for child_index in range(index + 1, len(thread_events)):
                child = thread_events[child_index]
                if child["ts"] >= end:
                    break
                child_depth = depths[child_index]
                if child_depth == depth + 1 and child.get("name") != INVARIANT_CHECKS:
                    pipeline.passes.append((child.get("name", "?"), child["ts"], child["dur"], False))
                elif child_depth == depth + 2 and child.get("name") == INVARIANT_CHECKS and pipeline.passes:
                    pass_name, start, duration, _ = pipeline.passes[-1]
                    pipeline.passes[-1] = (pass_name, start, duration, True)
            pipelines.append(pipeline)
    pipelines.sort(key=lambda p: p.start_us)
    return pipelines


def _nesting(ordered: list[dict[str, Any]]) -> list[int]:
    """Depth of each event (sorted by start, longest first) among the events that contain it."""
    depths: list[int] = []
    open_ends: list[float] = []
    for event in ordered:
        while open_ends and open_ends[-1] <= event["ts"]:
            open_ends.pop()
        depths.append(len(open_ends))
        open_ends.append(event["ts"] + event["dur"])
    return depths


@dataclass
class _DumpRun:
    """One run of a pipeline as the dump files show it."""

    pipeline: str
    start_file: int | None  # its pipeline-start dump
    pass_files: list[int] = field(default_factory=list)


def _dump_runs(files: list[DumpFile]) -> list[_DumpRun]:
    """A pipeline-start dump opens a run; a pass dump belongs to the innermost open run of its
    pipeline (runs nested inside it have ended by then)."""
    runs: list[_DumpRun] = []
    open_runs: list[int] = []
    for index, dump in enumerate(files):
        if dump.after == PIPELINE_START:
            runs.append(_DumpRun(dump.pipeline, index))
            open_runs.append(len(runs) - 1)
            continue
        if any(runs[r].pipeline == dump.pipeline for r in open_runs):
            while runs[open_runs[-1]].pipeline != dump.pipeline:
                open_runs.pop()
        else:  # a pass that dumps without a pipeline-start of its own (copy-insertion's steps)
            runs.append(_DumpRun(dump.pipeline, None))
            open_runs.append(len(runs) - 1)
        runs[open_runs[-1]].pass_files.append(index)
    return runs


def _entry(run: int, name: str, changed: bool, duration: float | None, dump: int | None,
           boundary: bool = False) -> dict[str, Any]:
    entry = {"pipeline": run, "name": name, "changed": changed,
             "duration_us": None if duration is None else round(duration, 3), "dump": dump}
    if boundary:
        entry["boundary"] = True
    return entry


def passes(files: list[DumpFile], pipelines: list[TracedPipeline]) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """(pipeline runs, passes in the order they ran). A pass: ``{pipeline, name, changed,
    duration_us, dump}``, ``dump`` an index into ``files`` or null. A pipeline-start dump is listed as
    a ``boundary`` entry (the module as that pipeline got it)."""
    dump_runs = _dump_runs(files)
    runs: list[dict[str, Any]] = []
    rows: list[tuple[tuple[float, float], dict[str, Any]]] = []
    used: set[int] = set()
    if pipelines:
        by_name: dict[str, list[_DumpRun]] = {}
        for dump_run in dump_runs:
            by_name.setdefault(dump_run.pipeline, []).append(dump_run)
        seen: dict[str, int] = {}
        for pipeline in pipelines:
            occurrence = seen.get(pipeline.name, 0)
            seen[pipeline.name] = occurrence + 1
            candidates = by_name.get(pipeline.name, [])
            matched = candidates[occurrence] if occurrence < len(candidates) else None
            pending = list(matched.pass_files) if matched else []
            run = len(runs)
            runs.append({"name": pipeline.name, "duration_us": round(pipeline.duration_us, 3)})
            if matched is not None and matched.start_file is not None:
                used.add(matched.start_file)
                rows.append(((pipeline.start_us, 0), _entry(run, pipeline.name, False, None, matched.start_file, True)))
            for name, start, duration, checked in pipeline.passes:
                dump = pending.pop(0) if pending and files[pending[0]].after == name else None
                if dump is not None:
                    used.add(dump)
                rows.append(((start, 1), _entry(run, name, dump is not None or checked, duration, dump)))
    # What the trace did not account for (no trace, or steps of a pass that dump on their own, like
    # copy-insertion's): from the files alone, just before the pass whose dump came next.
    placed = sorted((entry["dump"], key) for key, entry in rows if entry["dump"] is not None)
    last_time = max((key[0] for key, _ in rows), default=0.0)

    def order_of(dump: int) -> tuple[float, float]:
        following = next((key for index, key in placed if index > dump), None)
        if following is None:
            return (last_time + files[dump].seq, 0)
        return (following[0], -1.0 / (1 + dump))  # several before one pass keep their own order
    for dump_run in dump_runs:
        left = [d for d in ([dump_run.start_file] if dump_run.start_file is not None else []) + dump_run.pass_files
                if d not in used]
        if not left:
            continue
        run = len(runs)
        runs.append({"name": dump_run.pipeline, "duration_us": None})
        for dump in left:
            order = order_of(dump)
            if files[dump].after == PIPELINE_START:
                rows.append((order, _entry(run, dump_run.pipeline, False, None, dump, True)))
                continue
            rows.append((order, _entry(run, files[dump].after, True, None, dump)))
            following = files[dump].before
            if not pipelines and following and following != "pipeline-end" and not any(
                    files[d].after == following for d in left):
                rows.append(((order[0], 1), _entry(run, following, False, None, None)))
    rows.sort(key=lambda row: row[0])
    return runs, [entry for _, entry in rows]


def split_header(text: str) -> tuple[str, str, int, int]:
    """(header, body, first header line (0-based), header line count): XLA's file and frame tables
    apart from the module's code."""
    lines = text.splitlines(keepends=True)
    start = next((i for i, line in enumerate(lines) if line.strip() in HEADER_SECTIONS), None)
    if start is None:
        return "", text, 0, 0
    end = start
    while end < len(lines) and not lines[end].startswith(("%", "ENTRY", "ROOT")):
        end += 1
    return "".join(lines[start:end]), "".join(lines[:start] + lines[end:]), start, end - start


def texts(named: list[tuple[str, str]], limit_bytes: int) -> tuple[str, list[dict[str, Any]], int]:
    """``named``: (label, full dump text) in order. Returns (the header, one entry per dump, how many
    texts were left out at the limit). An entry: ``{"label", "text", "source_lines"}``,
    ``{"label", "same_as": index}`` for a text equal to the one before, or ``{"label", "text": null}``
    beyond the limit."""
    header = ""
    entries: list[dict[str, Any]] = []
    spent = 0
    cut = 0
    previous_body: str | None = None
    previous_index = -1
    for label, full in named:
        this_header, body, start, count = split_header(full)
        header = header or this_header
        if body == previous_body:
            entries.append({"label": label, "same_as": previous_index})
            continue
        size = len(body.encode())
        if spent + size > limit_bytes:
            entries.append({"label": label, "text": None})
            cut += 1
            continue
        spent += size
        ranges = []
        for first, last, source in jit_source_map.hlo_line_ranges(full):
            if last <= start:
                ranges.append([first, last, source])
            elif first > start + count:
                ranges.append([first - count, last - count, source])
        previous_body, previous_index = body, len(entries)
        entries.append({"label": label, "text": body, "source_lines": ranges})
    return header, entries, cut


def resolved_texts(entries: list[dict[str, Any]]) -> list[str | None]:
    """Each dump's text, following ``same_as``; None where it was cut."""
    resolved: list[str | None] = []
    for entry in entries:
        resolved.append(resolved[entry["same_as"]] if "same_as" in entry else entry.get("text"))
    return resolved


def line_changes(before: str, after: str) -> tuple[int, int]:
    """(lines added, lines removed) from ``before`` to ``after``, as multisets of lines: what the pass
    list shows beside each pass (the page draws the full diff). Linear in the texts' size."""
    old, new = Counter(before.splitlines()), Counter(after.splitlines())
    return sum((new - old).values()), sum((old - new).values())


def lines_moved(before: str, after: str) -> int:
    """How many lines stand elsewhere in ``after``, for texts with the same lines in another order."""
    return sum(old != new for old, new in zip(before.splitlines(), after.splitlines(), strict=False))
