"""A profiler trace (Chrome trace JSON, as ``jax.profiler`` writes it) turned into a timeline the page draws.

The trace holds every event the profiler saw: each Python call (tens of
thousands for a small program), JAX's dispatch, XLA's compiler passes, the
operations XLA ran (on a GPU, its kernels on the device's streams) and the
transfers. The timeline keeps what a person reads first, in five kinds:

- ``python``: calls of the user's own functions (``$<playground>:12 update``);
- ``dispatch``: the host work of running things (``PjitFunction(update)``,
  argument handling, launching executables);
- ``compile``: tracing, lowering and XLA's compiles (down to its pipelines);
- ``op``: XLA operations and device kernels (``args.hlo_op``), linked to the
  jitted function whose module ran them and to the source line of the
  instruction;
- ``transfer``: copies between host and devices.

Each kept slice is ``[track, depth, start_us, duration_us, name, kind, link]``
(indexes into ``tracks``, ``names``, ``KINDS``, ``links``; link -1 for none).
At most ``max_slices`` are kept: the longest, since the shortest are not
visible at the scale of a whole run; ``summary`` totals every slice by name
before that cut.
"""

from __future__ import annotations

import re
from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

KINDS = ("python", "dispatch", "compile", "op", "transfer")
PYTHON, DISPATCH, COMPILE, OP, TRANSFER = range(5)
USER_FRAME = re.compile(r"^\$<playground>:(\d+) (.+)$")
PJIT_CALL = re.compile(r"^PjitFunction\((.+)\)$")
TRANSFER_NAMES = re.compile(
    r"transfer|copy_array_to_device|copytodevice|copy_to_device|devicetohost|hosttodevice|"
    r"memcpy|device_put|d2h|h2d|d2d|tohost|fromhost|to_literal", re.IGNORECASE)
COMPILE_NAMES = re.compile(r"compile|lower|trace_to_jaxpr|jaxpr_trace|codegen|pipeline", re.IGNORECASE)
COMPILER_THREADS = re.compile(r"compil|codegen", re.IGNORECASE)
# Python threads all carry the name "python"; their frames say whose they are.
CAPTURE_FRAMES = re.compile(r"^\$(jit_ready\.py:\d+ _block_until_ready|jit_render\.py:\d+ render)$")
PROGRAM_FRAMES = re.compile(r"^\$(<playground>:|runner\.py:|profiling\.py:|timing\.py:|jit_capture\.py:\d+ __call__$)")
# Markers and bookkeeping that say nothing at this scale.
NOISE = re.compile(r"^(end: |ThreadpoolListener::|RunInvariantCheckers$|PythonRefManager::)")
MAX_COMPILER_DEPTH = 1  # on compiler threads: each compile and its pipelines, not each of ~200 passes
DEFAULT_MAX_SLICES = 20_000
SUMMARY_ROWS = 60


@dataclass
class ModuleLink:
    """A jitted function's compiled module, as the jit capture reported it."""

    fn: str
    fn_id: int
    key: str
    line: int | None
    op_lines: dict[str, int] = field(default_factory=dict)


@dataclass
class _Links:
    by_module: dict[str, ModuleLink]
    table: list[list[Any]] = field(default_factory=list)  # [fn, fn_id, key, line] rows
    index: dict[tuple[Any, ...], int] = field(default_factory=dict)

    def add(self, fn: str | None, fn_id: int | None, key: str | None, line: int | None) -> int:
        row = (fn, fn_id, key, line)
        if row == (None, None, None, None):
            return -1
        if row not in self.index:
            self.index[row] = len(self.table)
            self.table.append(list(row))
        return self.index[row]

    def module(self, name: str | None) -> ModuleLink | None:
        return self.by_module.get(name) if name else None

    def by_function_name(self, fn: str) -> ModuleLink | None:
        return self.by_module.get(f"jit_{fn}") or self.by_module.get(f"jit_{fn.rsplit('.', 1)[-1]}")


def _names(events: list[dict[str, Any]]) -> tuple[dict[Any, str], dict[tuple[Any, Any], str]]:
    processes: dict[Any, str] = {}
    threads: dict[tuple[Any, Any], str] = {}
    for event in events:
        if event.get("ph") != "M":
            continue
        name = (event.get("args") or {}).get("name")
        if not isinstance(name, str):
            continue
        if event.get("name") == "process_name":
            processes[event.get("pid")] = name
        elif event.get("name") == "thread_name":
            threads[(event.get("pid"), event.get("tid"))] = name
    return processes, threads


def _depths(slices: list[dict[str, Any]]) -> None:
    """Nesting depth of each slice within its thread, from start and end times alone."""
    by_thread: dict[Any, list[dict[str, Any]]] = defaultdict(list)
    for item in slices:
        by_thread[item["thread"]].append(item)
    for items in by_thread.values():
        items.sort(key=lambda s: (s["ts"], -s["dur"]))
        open_ends: list[float] = []
        for item in items:
            while open_ends and open_ends[-1] <= item["ts"]:
                open_ends.pop()
            item["depth"] = len(open_ends)
            open_ends.append(item["ts"] + item["dur"])


def _classify(item: dict[str, Any], process: str, thread: str, links: _Links,
              def_line: Callable[[int], int]) -> tuple[int, int] | None:
    """(kind, link) of one complete event, or None to leave it out of the timeline."""
    name, args = item["name"], item["args"]
    if NOISE.match(name):
        return None
    if name.startswith("$"):
        match = USER_FRAME.match(name)
        if match is None:
            return None
        line = def_line(int(match.group(1)))
        item["name"] = f"{match.group(2)} (line {line})"
        return PYTHON, links.add(None, None, None, line)
    if "hlo_op" in args or (process.startswith("/device:") and not TRANSFER_NAMES.search(name)):
        module = links.module(str(args.get("hlo_module", "")))
        if module is None:
            return OP, -1
        return OP, links.add(module.fn, module.fn_id, module.key, module.op_lines.get(str(args.get("hlo_op", name))))
    if TRANSFER_NAMES.search(name):
        return TRANSFER, -1
    if COMPILER_THREADS.search(thread):
        if item["depth"] > MAX_COMPILER_DEPTH:
            return None
        module = links.module(str(args.get("module", "")))
        return COMPILE, -1 if module is None else links.add(module.fn, module.fn_id, module.key, module.line)
    if COMPILE_NAMES.search(name):
        return COMPILE, -1
    if (call := PJIT_CALL.match(name)) is not None and (module := links.by_function_name(call.group(1))):
        return DISPATCH, links.add(module.fn, module.fn_id, None, module.line)
    return DISPATCH, -1


def build(trace: dict[str, Any], modules: dict[str, ModuleLink], max_slices: int = DEFAULT_MAX_SLICES,
          def_line: Callable[[int], int] = lambda line: line) -> dict[str, Any]:
    """The timeline fields of a ``profile`` event from a parsed Chrome trace. ``def_line`` turns the
    first line of a function's code (its first decorator) into the line of its ``def``."""
    events = trace.get("traceEvents") if isinstance(trace, dict) else trace
    events = [e for e in events or [] if isinstance(e, dict)]
    processes, threads = _names(events)
    complete = []
    capture_threads: set[Any] = set()
    program_threads: set[Any] = set()
    for event in events:
        name = event.get("name")
        if event.get("ph") != "X" or not isinstance(name, str):
            continue
        thread = (event.get("pid"), event.get("tid"))
        # Most of a trace is JAX's own Python, one event per call: dropped here, before any work,
        # except for what says whose a Python thread is.
        if name.startswith("$") and not name.startswith("$<playground>:"):
            if CAPTURE_FRAMES.match(name):
                capture_threads.add(thread)
            elif PROGRAM_FRAMES.match(name):
                program_threads.add(thread)
            continue
        ts, dur = event.get("ts"), event.get("dur", 0)
        if not isinstance(ts, int | float) or not isinstance(dur, int | float) or dur < 0:
            continue
        if name.startswith("$"):
            program_threads.add(thread)
        args = event.get("args") if isinstance(event.get("args"), dict) else {}
        complete.append({"name": name, "ts": float(ts), "dur": float(dur), "args": args, "thread": thread,
                         "raw": event})
    _depths(complete)
    roles = {thread: PROGRAM_THREAD for thread in program_threads}
    roles.update({thread: CAPTURE_THREAD for thread in capture_threads})
    links = _Links(modules)
    kept: list[dict[str, Any]] = []
    totals: dict[tuple[str, int, int], list[float]] = {}
    for item in complete:
        process = processes.get(item["thread"][0], "")
        thread = threads.get(item["thread"], "")
        classified = _classify(item, process, thread, links, def_line)
        if classified is None:
            continue
        item["kind"], item["link"] = classified
        kept.append(item)
        total = totals.setdefault((item["name"], item["kind"], item["link"]), [0, 0.0])
        total[0] += 1
        total[1] += item["dur"]
    total_slices = len(kept)
    min_duration = 0.0
    if len(kept) > max_slices:
        kept.sort(key=lambda s: -s["dur"])
        min_duration = kept[max_slices - 1]["dur"]
        kept = kept[:max_slices]
    kept.sort(key=lambda s: (s["ts"], -s["dur"]))
    origin = min((s["ts"] for s in kept), default=0.0)
    end = max((s["ts"] + s["dur"] for s in kept), default=origin)

    track_index: dict[Any, int] = {}
    for item in kept:
        track_index.setdefault(item["thread"], 0)
    ordered = sorted(track_index, key=lambda t: _track_order(processes.get(t[0], ""), roles.get(t) or threads.get(t, ""), t))
    tracks = []
    for position, thread_key in enumerate(ordered):
        track_index[thread_key] = position
        process = processes.get(thread_key[0], "")
        name = roles.get(thread_key) or _plain_thread_name(threads.get(thread_key) or f"thread {thread_key[1]}")
        taken = sum(1 for track in tracks if track["name"] == name or track["name"].startswith(name + " #"))
        tracks.append({"name": f"{name} #{taken + 1}" if taken else name, "process": process,
                       "device": process.startswith("/device:")})
    names: dict[str, int] = {}
    slices = []
    for item in kept:
        name_index = names.setdefault(item["name"], len(names))
        slices.append([track_index[item["thread"]], item["depth"], round(item["ts"] - origin, 3),
                       round(item["dur"], 3), name_index, item["kind"], item["link"]])
    summary = sorted(totals.items(), key=lambda kv: -kv[1][1])[:SUMMARY_ROWS]
    return {
        "duration_us": round(end - origin, 3),
        "kinds": list(KINDS),
        "tracks": tracks,
        "names": list(names),
        "links": links.table,
        "slices": slices,
        "summary": [{"name": name, "kind": KINDS[kind], "link": link, "count": count, "total_us": round(total, 3)}
                    for (name, kind, link), (count, total) in summary],
        "total_slices": total_slices,
        "min_duration_us": min_duration,
        "kept_events": [item["raw"] for item in kept],
    }


PROGRAM_THREAD = "python: your program"
CAPTURE_THREAD = "python: the playground's timing and Inspect"


def _plain_thread_name(name: str) -> str:
    """``tf_XLAPjRtCpuClient/-6542749617829699273`` -> ``XLAPjRtCpuClient``."""
    return THREAD_ID_SUFFIX.sub("", name.removeprefix("tf_")) or name


THREAD_ID_SUFFIX = re.compile(r"/-?\d+$")


def _track_order(process: str, thread: str, key: Any) -> tuple[int, str, Any]:
    """The program's own thread first, then XLA's execution threads, compilers, then devices."""
    if process.startswith("/device:"):
        rank = 3
    elif thread == PROGRAM_THREAD:
        rank = -1
    elif thread.startswith("python"):
        rank = 0
    elif COMPILER_THREADS.search(thread):
        rank = 2
    else:
        rank = 1
    return rank, process + thread, str(key)
