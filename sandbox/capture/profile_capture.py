"""Profiles: ``jax.profiler`` traces (Chrome trace JSON) of the whole run (run option ``profile``) or of a region
(``with playground.profile():``), sent as ``profile`` events the page draws as timelines.

A profile costs: the profiler records every Python call while it is on
(slower Python, by a factor that depends on the program), and at its end
the trace is read back and summarized (a fraction of a second for a small
program). Nothing here runs unless a profile was asked for.

Bounds, each with a notice in the event: the trace file is read only up to
``MAX_TRACE_FILE_BYTES`` (compressed); the timeline keeps at most
``MAX_SLICES`` slices; the raw trace offered for download is the profiler's
own file up to ``MAX_RAW_BYTES``, else a trace of the slices kept; at most
``MAX_PROFILES`` profiles per run. Everything is written under the run's own
temporary folder (its private tmpfs) and removed after reading.

Threads: a profile starts and stops on the thread that asked for it; the
renderer thread adds module links through ``module_hook`` (a
``jit_capture.COMPILED_HOOKS`` entry) under ``_lock``.
"""

from __future__ import annotations

import base64
import contextlib
import glob
import gzip
import json
import linecache
import os
import shutil
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from typing import Any

from jaxplay import worker_protocol as wp
from jaxplay.sandbox.capture import hlo_ops, profile_timeline
from jaxplay.sandbox.output import events

MAX_PROFILES = 3
MAX_SLICES = profile_timeline.DEFAULT_MAX_SLICES
MAX_TRACE_FILE_BYTES = 48 << 20
MAX_RAW_BYTES = 4 << 20
MAX_LABEL_CHARS = 200
WHOLE_RUN = "the whole run"
USER_FILENAME = "<playground>"

_lock = threading.Lock()
# Module name -> (fn, fn_id, key, line, optimized HLO text): kept as given, read only when a profile is.
_modules: dict[str, tuple[str, int, str, int | None, str]] = {}


class _State:
    def __init__(self) -> None:
        self.active: str | None = None  # the trace folder of the profile in progress
        self.sent = 0
        self.refused_noted = False
        self.whole_run = False
        self.stopped: str | None = None  # a whole-run trace stopped, not yet read
        self.stop_error: str | None = None
        self.clock_noted = False


_state = _State()


def module_hook(event: dict[str, Any], compiled: Any) -> None:
    """Renderer thread: remember which jitted function each compiled module is, to link trace slices.
    Costs a dict entry: the module's text is read only if a profile is taken."""
    text = event.get("hlo")
    if not isinstance(text, str):
        return
    name = hlo_ops.module_name(text)
    if name is not None:
        with _lock:
            _modules[name] = (event["fn"], event["fn_id"], event["key"], event.get("line"), text)


def _module_links() -> dict[str, profile_timeline.ModuleLink]:
    with _lock:
        modules = dict(_modules)
    return {name: profile_timeline.ModuleLink(fn, fn_id, key, line, hlo_ops.op_source_lines(text))
            for name, (fn, fn_id, key, line, text) in modules.items()}


def install(run: wp.SandboxRun) -> None:
    _state.sent = 0
    _state.refused_noted = False
    _state.clock_noted = False
    with _lock:
        _modules.clear()
    from jaxplay.sandbox.capture import jit_capture

    if module_hook not in jit_capture.COMPILED_HOOKS:
        jit_capture.COMPILED_HOOKS.append(module_hook)
    if run.options.profile:
        _state.whole_run = start()


def before_finish() -> None:
    """The program has ended: stop recording before the other captures' end-of-run work."""
    if _state.whole_run and _state.active is not None:
        _state.stopped = _end_trace()


def finish() -> None:
    """After the jit capture has rendered every compilation (so slices link to their functions)."""
    if _state.whole_run and _state.stopped is not None:
        _state.whole_run = False
        folder, _state.stopped = _state.stopped, None
        _send(folder, WHOLE_RUN, None, 0.0)


def start(line: int | None = None) -> bool:
    """Start the profiler; False when a profile is already running or none may be taken.

    A profile is a reading of the clock: the run says so (``nondeterministic``), so a recording of
    it is never replayed from the result cache as if it were this run's."""
    if _state.active is not None or _state.sent >= MAX_PROFILES:
        if _state.sent >= MAX_PROFILES and not _state.refused_noted:
            _state.refused_noted = True
            print(f"[playground] Not shown: more than {MAX_PROFILES} profiles in one run.", file=sys.stderr)
        return False
    import jax

    if not _state.clock_noted:
        _state.clock_noted = True
        events.emit({"type": "nondeterministic", "kind": "time", "source": "jax.profiler", "line": line})
    folder = tempfile.mkdtemp(prefix="jaxplay-profile-")
    # Not create_perfetto_trace: that rewrites the whole trace in Python (load, dump, gzip), seconds for a
    # busy run. The profiler's own Chrome trace is read instead; the page drops its "metadata" field
    # (which Perfetto refuses) when the file is downloaded.
    jax.profiler.start_trace(folder)
    _state.active = folder
    return True


def _end_trace() -> str | None:
    folder, _state.active = _state.active, None
    if folder is not None:
        import jax

        try:
            jax.profiler.stop_trace()
        except Exception as exc:  # noqa: BLE001 - the program stopped it itself: say so in the event
            _state.stop_error = f"{type(exc).__name__}: {exc}"
    return folder


def stop(label: str, line: int | None) -> None:
    """Stop the profiler, read its trace and send the ``profile`` event."""
    began = time.perf_counter()
    folder = _end_trace()
    if folder is None:
        return
    from jaxplay.sandbox.capture import jit_capture

    jit_capture.wait_for_rendering()  # functions compiled inside the region, so their slices link
    _send(folder, label, line, began)


def _send(folder: str, label: str, line: int | None, began: float) -> None:
    began = began or time.perf_counter()
    try:
        event = _event_from_folder(folder, label, line)
    except Exception as exc:  # noqa: BLE001 - a profile that cannot be read must not fail the program
        event = {"type": "profile", "label": label[:MAX_LABEL_CHARS], "line": line,
                 "notices": [f"The trace could not be read: {type(exc).__name__}: {exc}"[:500]]}
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    if _state.stop_error:
        event["notices"].append(f"The profiler could not be stopped cleanly: {_state.stop_error}"[:500])
        _state.stop_error = None
    event["summarize_ms"] = round((time.perf_counter() - began) * 1e3, 1)
    _state.sent += 1
    events.emit(event)


def _event_from_folder(folder: str, label: str, line: int | None) -> dict[str, Any]:
    base: dict[str, Any] = {"type": "profile", "label": label[:MAX_LABEL_CHARS], "line": line, "notices": []}
    found = sorted(glob.glob(os.path.join(folder, "**", "*.trace.json.gz"), recursive=True))
    if not found:
        base["notices"].append("The profiler wrote no trace.")
        return base
    path = found[-1]
    size = os.path.getsize(path)
    if size > MAX_TRACE_FILE_BYTES:
        base["notices"].append(f"The trace is {size >> 20} MiB compressed, over the {MAX_TRACE_FILE_BYTES >> 20} MiB "
                               "this page reads: profile a shorter stretch with `with profile():`.")
        return base
    with open(path, "rb") as f:
        raw = f.read()
    trace = json.loads(gzip.decompress(raw))
    timeline = profile_timeline.build(trace, _module_links(), MAX_SLICES, _def_line)
    kept_events = timeline.pop("kept_events")
    base.update(timeline)
    kinds = {kind for *_, kind, _ in timeline["slices"]}
    if profile_timeline.KINDS.index("dispatch") in kinds and profile_timeline.KINDS.index("op") not in kinds:
        import jaxlib

        # Measured: jaxlib 0.6.2's CPU client traces its executions but not their operations; 0.10.2 does.
        base["notices"].append(f"This jaxlib ({jaxlib.__version__}) records no XLA operations in its traces: the "
                               "timeline shows Python, dispatch and compilation only.")
    if timeline["total_slices"] > len(timeline["slices"]):
        base["notices"].append(
            f"Showing the {len(timeline['slices']):,} longest of {timeline['total_slices']:,} slices (each at least "
            f"{timeline['min_duration_us']:.3g} µs); the summary counts them all.")
    if len(raw) <= MAX_RAW_BYTES:
        base["trace"] = {"format": "chrome-json-gzip", "bytes": len(raw), "filtered": False,
                         "data": base64.b64encode(raw).decode()}
    else:
        metadata = [e for e in trace.get("traceEvents", []) if isinstance(e, dict) and e.get("ph") == "M"]
        smaller = gzip.compress(json.dumps({"traceEvents": metadata + kept_events}).encode())
        base["notices"].append(f"The profiler's trace is {len(raw) >> 20} MiB compressed, over the "
                               f"{MAX_RAW_BYTES >> 20} MiB offered for download: the download holds the slices shown.")
        base["trace"] = {"format": "chrome-json-gzip", "bytes": len(smaller), "filtered": True,
                         "data": base64.b64encode(smaller).decode()} if len(smaller) <= MAX_RAW_BYTES else None
    return base


def _def_line(line: int) -> int:
    """A function's code starts at its first decorator; the page points at its ``def``."""
    for _ in range(50):
        if not linecache.getline(USER_FILENAME, line).lstrip().startswith("@"):
            return line
        line += 1
    return line


@contextlib.contextmanager
def region(label: str, line: int | None) -> Iterator[None]:
    """A profile of the ``with`` block; inside a profile already running, a named region of it."""
    if _state.active is not None:
        import jax

        with jax.profiler.TraceAnnotation(label[:MAX_LABEL_CHARS]):
            yield
        return
    started = start(line)
    try:
        yield
    finally:
        if started:
            stop(label, line)
