"""A ``passes`` request: compile one function again with XLA's per-pass dumps and send its pass pipeline.

The page asks for the passes of compilation ``key`` (e.g. ``"2.1"``) of a run
it showed. The server runs the same program again in a fresh sandbox with
the option ``passes: {"key", "fn"}`` (a plain run costs nothing: none of this
is installed without it). When the jit capture sees that compilation, it
calls ``respond`` in the program's own thread, which:

1. compiles the function's lowered module again with
   ``xla_dump_to=<a folder in the run's tmpfs>``, ``xla_dump_hlo_pass_re=.*``
   and ``xla_dump_hlo_module_re=<its module>``. The persistent compilation
   cache is switched off for that one compile (a cache hit compiles nothing,
   so it would dump nothing; the dump options are not part of its key);
2. compiles it once more under the profiler (no Python tracer, no dumps:
   dumping slows the passes that write), whose trace names every pass XLA
   ran, in order, with its duration;
3. reads the dumps back (``pass_dump``), sends one ``passes`` event, and ends
   the process: the rest of the program is not needed and does not run.

Bounds: a module whose optimized HLO is over ``MAX_MODULE_BYTES`` is not
dumped (tens of dumps of it would not fit the run's tmpfs or the page); the
texts sent stop at ``limit_bytes`` (later passes are listed without text,
with a notice). The dump folder is removed before the event is sent. The
work itself, from the first compile to the event, is watched by a thread
(``Watchdog``): past ``work_limit_s`` seconds, or ``MAX_DUMP_BYTES`` of dumps
on the run's tmpfs, it answers with an error naming the bound and ends the
run, so a large module holds its slot no longer than the program's own run
plus that bound, never the run's whole deadline.
"""

from __future__ import annotations

import contextlib
import glob
import gzip
import json
import os
import re
import shutil
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from jaxplay import worker_protocol as wp
from jaxplay.sandbox.capture import hlo_ops, pass_dump
from jaxplay.sandbox.output import events

DEFAULT_LIMIT_BYTES = 8 << 20
MAX_MODULE_BYTES = 4 << 20
MAX_DUMP_FILE_BYTES = 64 << 20  # a single dump larger than this is not read
# All of one compile's dumps on the run's tmpfs (memory the run is charged for); past it the work stops.
MAX_DUMP_BYTES = 256 << 20
DEFAULT_WORK_LIMIT_S = 10.0  # the server's --passes-work-limit-s, when the request names none
WATCH_EVERY_S = 0.1


@dataclass(frozen=True)
class Target:
    key: str
    fn: str
    limit_bytes: int = DEFAULT_LIMIT_BYTES
    work_limit_s: float = DEFAULT_WORK_LIMIT_S

    @classmethod
    def of(cls, passes: wp.PassesTarget | None) -> Target | None:
        """What a ``passes`` request asked for (None for any other run)."""
        if passes is None:
            return None
        return cls(passes.key, passes.fn, work_limit_s=passes.work_limit_s or DEFAULT_WORK_LIMIT_S)


class Watchdog:
    """Answers the request once, whoever is first: the work with its event, or this thread with an error once
    the work is over its time or its dumps over their size (it then ends the run: XLA's compile cannot be
    interrupted from Python)."""

    def __init__(self, target: Target, fields: dict[str, Any]) -> None:
        self.target = target
        self.fields = fields
        self.folder: str | None = None  # the dumps' folder, once made
        self._answered = False
        self._lock = threading.Lock()
        self._stop = threading.Event()

    def start(self) -> None:
        threading.Thread(target=self._watch, name="passes-watchdog", daemon=True).start()

    def answer(self, event: dict[str, Any]) -> bool:
        """Send ``event`` unless the request was answered already; True if it was sent now."""
        with self._lock:
            if self._answered:
                return False
            self._answered = True
            self._stop.set()
            events.emit(event)
            for stream in (sys.stdout, sys.stderr):
                with contextlib.suppress(Exception):
                    stream.flush()
            return True

    def _watch(self) -> None:
        deadline = time.monotonic() + self.target.work_limit_s
        while not self._stop.wait(WATCH_EVERY_S):
            over = self._over(deadline)
            if over is not None and self.answer({"type": "passes", **self.fields, "error": over}):
                if self.folder is not None:
                    shutil.rmtree(self.folder, ignore_errors=True)
                os._exit(0)

    def _over(self, deadline: float) -> str | None:
        limit = self.target.work_limit_s
        if time.monotonic() > deadline:
            return (f"XLA's per-pass dumps of this function took over {limit:g} s, the limit of a passes request's "
                    "own work on this server. Ask for the passes of a smaller version of it (fewer operations, "
                    "a smaller loop unrolled).")
        if self.folder is not None and _folder_bytes(self.folder) > MAX_DUMP_BYTES:
            return (f"XLA's per-pass dumps of this function passed {MAX_DUMP_BYTES >> 20} MiB, more than a passes "
                    "request may write. Ask for the passes of a smaller version of it (fewer operations).")
        return None


def _folder_bytes(folder: str) -> int:
    """Bytes of the files under ``folder`` now (XLA may be writing them)."""
    total = 0
    for root, _, names in os.walk(folder):
        for name in names:
            with contextlib.suppress(OSError):
                total += os.path.getsize(os.path.join(root, name))
    return total


@contextlib.contextmanager
def persistent_cache_off() -> Iterator[None]:
    """JAX decides once per process whether its persistent cache is in use; ask it again, twice."""
    import jax
    from jax.experimental.compilation_cache import compilation_cache

    was = jax.config.jax_enable_compilation_cache
    jax.config.update("jax_enable_compilation_cache", False)
    compilation_cache.reset_cache()
    try:
        yield
    finally:
        jax.config.update("jax_enable_compilation_cache", was)
        compilation_cache.reset_cache()


def _profiled_compile(lowered: Any, module: str, folder: str) -> tuple[float, dict[str, Any] | None, str | None]:
    """Compile once under the profiler (no Python tracer, no dumps, so the durations are XLA's own):
    (seconds, the trace or None, why there is no trace)."""
    import jax

    options: dict[str, Any] = {}
    if hasattr(jax.profiler, "ProfileOptions"):  # JAX 0.5 and newer; 0.4 traces Python too (its durations show)
        profile_options = jax.profiler.ProfileOptions()
        profile_options.python_tracer_level = 0
        options["profiler_options"] = profile_options
    try:
        jax.profiler.start_trace(folder, create_perfetto_trace=True, **options)
    except Exception as exc:  # noqa: BLE001 - e.g. the program is profiling itself: still the dumps
        return 0.0, None, f"{type(exc).__name__}: {exc}"
    began = time.perf_counter()
    try:
        with persistent_cache_off():
            # Options of any kind make JAX compile anew (the Lowered object keeps the user's executable
            # for compile() without them); this one changes nothing without xla_dump_to.
            lowered.compile(compiler_options={"xla_dump_hlo_module_re": "^" + re.escape(module) + "$"})
    finally:
        seconds = time.perf_counter() - began
        try:
            jax.profiler.stop_trace()
        except Exception as exc:  # noqa: BLE001
            return seconds, None, f"{type(exc).__name__}: {exc}"
    found = sorted(glob.glob(os.path.join(folder, "**", "perfetto_trace.json.gz"), recursive=True))
    if not found:
        return seconds, None, "the profiler wrote no trace"
    with open(found[-1], "rb") as f:
        return seconds, json.loads(gzip.decompress(f.read())), None


def _dumped_compile(lowered: Any, module: str, folder: str) -> float:
    options = {"xla_dump_to": folder, "xla_dump_hlo_pass_re": ".*",
               "xla_dump_hlo_module_re": "^" + re.escape(module) + "$", "xla_dump_hlo_as_text": True}
    began = time.perf_counter()
    with persistent_cache_off():
        lowered.compile(compiler_options=options)
    return time.perf_counter() - began


def _label(dump: pass_dump.DumpFile) -> str:
    if dump.after == pass_dump.PIPELINE_START:
        return f"start of pipeline {dump.pipeline}"
    return f"after {dump.after} ({dump.pipeline})"


def _read(path: str) -> str | None:
    try:
        if os.path.getsize(path) > MAX_DUMP_FILE_BYTES:
            return None
        with open(path, encoding="utf-8", errors="replace") as f:
            return f.read()
    except OSError:
        return None


def pipeline_event(target: Target, lowered: Any, compiled: Any, fields: dict[str, Any],
                   watchdog: Watchdog | None = None) -> dict[str, Any]:
    """The ``passes`` event for one compilation (``fields``: key, fn, fn_id, line, signature); ``watchdog``
    is told the dumps' folder."""
    event: dict[str, Any] = {"type": "passes", **fields, "notices": [], "limit_bytes": target.limit_bytes}
    hlo_text = compiled.as_text()
    module = hlo_ops.module_name(hlo_text)
    if module is None:
        event["error"] = "XLA's optimized module has no name to dump it by."
        return event
    event["module"] = module
    if len(hlo_text.encode()) > MAX_MODULE_BYTES:
        event["error"] = (f"The optimized module is {len(hlo_text.encode()) >> 20} MiB, over the "
                          f"{MAX_MODULE_BYTES >> 20} MiB whose passes can be dumped: dozens of copies of it would "
                          "not fit the run's memory. Try a smaller version of the function.")
        return event
    folder = tempfile.mkdtemp(prefix="jaxplay-passes-")
    if watchdog is not None:
        watchdog.folder = folder
    try:
        seconds, trace, why = _profiled_compile(lowered, module, os.path.join(folder, "trace"))
        event["profiled_compile_ms"] = round(seconds * 1e3, 1)
        dump_folder = os.path.join(folder, "dump")
        event["compile_ms"] = round(_dumped_compile(lowered, module, dump_folder) * 1e3, 1)
        names = sorted(os.listdir(dump_folder)) if os.path.isdir(dump_folder) else []
        event["dump_bytes"] = sum(os.path.getsize(os.path.join(dump_folder, n)) for n in names)
        event["dump_files"] = len(names)
        before, files = pass_dump.dump_files(names, module)
        pipelines = pass_dump.traced_pipelines(trace, module) if trace is not None else []
        if trace is None or not pipelines:
            event["notices"].append("Passes that changed nothing and pass durations come from the profiler's trace "
                                    f"of the compile, which is missing ({why or 'no passes in it'}): the list "
                                    "shows what XLA dumped.")
        runs, listed = pass_dump.passes(files, pipelines)
        named = [("before optimizations", (_read(os.path.join(dump_folder, before)) or "") if before else "")]
        named += [(_label(f), _read(os.path.join(dump_folder, f.name)) or "") for f in files]
        header, dumps, cut = pass_dump.texts(named, target.limit_bytes)
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    event["pipelines"] = runs
    event["passes"] = _with_text_indexes(listed, dumps)
    event["header"] = header
    event["dumps"] = dumps
    if cut:
        event["notices"].append(f"The dumps were cut at {target.limit_bytes >> 20} MiB: {cut} later passes are listed "
                                "without their text.")
    if not files:
        event["error"] = "XLA wrote no per-pass dumps for this module."
    return event


def _with_text_indexes(listed: list[dict[str, Any]], dumps: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Dump file i is text i + 1 (text 0: before optimizations); each pass with a text gets its lines
    added and removed, or ``reordered`` when it only moved lines. A pass whose text reads the same as
    the one before it is not marked changed: XLA dumps after a pass that reported a change, and after
    a nested pipeline or copy-insertion, whose own steps dumped the change already. A pipeline's start
    is kept only when the module changed between passes (outside any pass), as a changed entry."""
    resolved = pass_dump.resolved_texts(dumps)
    kept = []
    for entry in listed:
        if entry["dump"] is not None:
            entry["dump"] += 1
            before, after = resolved[entry["dump"] - 1], resolved[entry["dump"]]
            if before is not None and after is not None:
                entry["added"], entry["removed"] = pass_dump.line_changes(before, after)
                if before == after:
                    entry["changed"] = False
                    entry["same_text"] = True
                elif not entry["added"] and not entry["removed"]:
                    entry["reordered"] = pass_dump.lines_moved(before, after)
        if entry.pop("boundary", False):
            if entry["dump"] is None or "same_as" in dumps[entry["dump"]]:
                continue
            entry["name"] = f"(between passes, before {entry['name']})"
            entry["changed"] = True
        kept.append(entry)
    return kept


def respond(target: Target, lowered: Any, compiled: Any, fields: dict[str, Any]) -> None:
    """Send the pipeline and end the run here: the page asked for nothing else."""
    watchdog = Watchdog(target, fields)
    watchdog.start()
    try:
        event = pipeline_event(target, lowered, compiled, fields, watchdog)
    except Exception as exc:  # noqa: BLE001 - the request's answer, not the program's failure
        event = {"type": "passes", **fields, "error": f"The passes could not be captured: {type(exc).__name__}: {exc}"}
    if not watchdog.answer(event):
        time.sleep(60)  # the watchdog answered first and ends the run
    os._exit(0)


def not_found(target: Target, compiled_keys: list[str]) -> None:
    """The program ended without making that compilation (it ran differently this time)."""
    events.emit({"type": "passes", "key": target.key, "fn": target.fn,
                 "error": (f"The program ran again but did not compile {target.fn} (compilation {target.key}) "
                           f"this time (it made {len(compiled_keys)} compilations). Run it again, then ask again.")})
