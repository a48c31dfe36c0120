"""A profiler trace turned into the page's timeline: kinds, links to functions and lines, nesting, bounds."""

from __future__ import annotations

from jaxplay.sandbox.capture import hlo_ops, profile_timeline
from jaxplay.sandbox.capture.profile_timeline import ModuleLink

HOST, DEVICE = 1, 2
MAIN, WATCHER, XLA, COMPILER, STREAM = 10, 11, 12, 13, 14


def meta(pid, tid, kind, name):
    event = {"ph": "M", "pid": pid, "name": kind, "args": {"name": name}}
    if tid is not None:
        event["tid"] = tid
    return event


def x(tid, name, ts, dur, pid=HOST, **args):
    event = {"ph": "X", "pid": pid, "tid": tid, "name": name, "ts": ts, "dur": dur}
    if args:
        event["args"] = args
    return event


TRACE = {"traceEvents": [
    meta(HOST, None, "process_name", "/host:CPU"),
    meta(DEVICE, None, "process_name", "/device:GPU:0"),
    meta(HOST, MAIN, "thread_name", "python"),
    meta(HOST, WATCHER, "thread_name", "python"),
    meta(HOST, XLA, "thread_name", "tf_XLAPjRtCpuClient/123"),
    meta(HOST, COMPILER, "thread_name", "tf_PjRtCompilerThreadPool/9"),
    meta(DEVICE, STREAM, "thread_name", "Stream #7"),
    # the program's thread: its own function, JAX's Python (left out), dispatch of a jitted call
    x(MAIN, "$<playground>:12 step", 1000, 500),
    x(MAIN, "$api.py:100 jit_call", 1001, 400),
    x(MAIN, "PjitFunction(update)", 1002, 300),
    x(MAIN, "backend_compile_and_load", 1010, 200),
    x(MAIN, "batched_copy_array_to_devices_with_sharding", 1300, 20),
    x(MAIN, "ThreadpoolListener::Record", 1301, 0),
    # the playground's timing thread
    x(WATCHER, "$jit_ready.py:20 _block_until_ready", 1100, 50),
    x(WATCHER, "CommonPjRtBuffer::Await", 1101, 40),
    # XLA ran the module's ops
    x(XLA, "dot.1", 1400, 40, hlo_module="jit_update", hlo_op="dot.1"),
    x(XLA, "fusion", 1440, 10, hlo_module="jit_update", hlo_op="fusion"),
    x(XLA, "end: fusion", 1450, 0),
    x(XLA, "copy", 1460, 5, hlo_module="jit_convert_element_type", hlo_op="copy"),
    # the compiler: the compile and its pipelines, not each pass
    x(COMPILER, "PjRtCpuClient::Compile", 1020, 150),
    x(COMPILER, "simplification (jit_update)", 1030, 50, module="jit_update"),
    x(COMPILER, "algsimp", 1031, 10),
    # a GPU kernel and a copy on the device's stream
    x(STREAM, "loop_fusion_kernel", 1500, 30, pid=DEVICE, hlo_module="jit_update", hlo_op="fusion"),
    x(STREAM, "MemcpyD2H", 1540, 15, pid=DEVICE),
]}
MODULES = {"jit_update": ModuleLink("update", 1, "1.1", 9, {"dot.1": 10, "fusion": 11})}


def slices_by_name(timeline):
    return {timeline["names"][s[4]]: s for s in timeline["slices"]}


def test_kinds_tracks_and_what_is_left_out():
    timeline = profile_timeline.build(TRACE, MODULES)
    found = slices_by_name(timeline)
    kinds = {name: timeline["kinds"][s[5]] for name, s in found.items()}
    assert kinds == {
        "step (line 12)": "python", "PjitFunction(update)": "dispatch", "backend_compile_and_load": "compile",
        "batched_copy_array_to_devices_with_sharding": "transfer", "dot.1": "op", "fusion": "op", "copy": "op",
        "PjRtCpuClient::Compile": "compile", "simplification (jit_update)": "compile",
        "loop_fusion_kernel": "op", "MemcpyD2H": "transfer", "CommonPjRtBuffer::Await": "dispatch",
    }
    assert "algsimp" not in found and "$api.py:100 jit_call" not in found and "end: fusion" not in found
    tracks = [t["name"] for t in timeline["tracks"]]
    assert tracks[0] == profile_timeline.PROGRAM_THREAD
    assert profile_timeline.CAPTURE_THREAD in tracks  # told apart by its own frames
    assert timeline["tracks"][-1]["device"] is True
    assert timeline["duration_us"] == 1555 - 1000
    assert found["step (line 12)"][2] == 0.0  # times start at the first kept slice


def test_slices_link_to_their_function_and_source_line():
    timeline = profile_timeline.build(TRACE, MODULES)
    found = slices_by_name(timeline)
    links = timeline["links"]
    assert links[found["dot.1"][6]] == ["update", 1, "1.1", 10]
    assert links[found["loop_fusion_kernel"][6]] == ["update", 1, "1.1", 11]
    assert links[found["step (line 12)"][6]] == [None, None, None, 12]
    assert links[found["PjitFunction(update)"][6]] == ["update", 1, None, 9]
    assert links[found["simplification (jit_update)"][6]] == ["update", 1, "1.1", 9]
    assert found["copy"][6] == -1  # an eager op's module: no function of the program


def test_nesting_depth_within_a_thread():
    found = slices_by_name(profile_timeline.build(TRACE, MODULES))
    assert found["step (line 12)"][1] == 0
    # Inside step; JAX's own Python frame between them is left out, so it does not count.
    assert found["PjitFunction(update)"][1] == 1
    assert found["backend_compile_and_load"][1] == 2


def test_at_most_max_slices_are_kept_the_longest_and_the_summary_counts_all():
    events = [meta(HOST, MAIN, "thread_name", "python")]
    events += [x(MAIN, f"op{i % 3}", i * 10, 1 + i, hlo_module="m", hlo_op=f"op{i % 3}") for i in range(100)]
    timeline = profile_timeline.build({"traceEvents": events}, {}, max_slices=10)
    assert timeline["total_slices"] == 100 and len(timeline["slices"]) == 10
    assert min(s[3] for s in timeline["slices"]) == timeline["min_duration_us"] == 91
    assert sum(row["count"] for row in timeline["summary"]) == 100
    assert [s[2] for s in timeline["slices"]] == sorted(s[2] for s in timeline["slices"])


def test_malformed_events_are_skipped():
    trace = {"traceEvents": [{"ph": "X", "name": "no time"}, {"ph": "X", "name": "neg", "ts": 1, "dur": -5},
                             "not an event", {"ph": "X", "name": 3, "ts": 1, "dur": 1},
                             x(MAIN, "PjitFunction(f)", 5, 5)]}
    timeline = profile_timeline.build(trace, {})
    assert timeline["names"] == ["PjitFunction(f)"]


HLO = """HloModule jit_update, entry_computation_layout={(f32[3]{0})->f32[3]{0}}

FileNames
1 "<playground>"

FunctionNames
1 "update"

FileLocations
1 {file_name_id=1 function_name_id=1 line=11 end_line=11 column=0 end_column=5}
2 {file_name_id=1 function_name_id=1 line=12 end_line=12 column=0 end_column=5}

StackFrames
1 {file_location_id=1 parent_frame_id=1}
2 {file_location_id=2 parent_frame_id=2}


%fused_computation (param_0: f32[3]) -> f32[3] {
  %param_0 = f32[3]{0} parameter(0)
  ROOT %mul.0 = f32[3]{0} multiply(%param_0, %param_0), metadata={op_name="jit(update)/mul" stack_frame_id=2}
}

ENTRY %main.1 (w.1: f32[3]) -> f32[3] {
  %w.1 = f32[3]{0} parameter(0), metadata={op_name="w"}
  %neg.1 = f32[3]{0} negate(%w.1), metadata={op_name="jit(update)/neg" stack_frame_id=1}
  %dot = f32[3]{0} dot(%neg.1, %w.1), lhs_contracting_dims={0}, rhs_contracting_dims={0}
  ROOT %multiply_fusion = f32[3]{0} fusion(%neg.1), kind=kLoop, calls=%fused_computation
}
"""


def test_hlo_instructions_map_to_source_lines_fusions_through_their_computation():
    assert hlo_ops.module_name(HLO) == "jit_update"
    assert hlo_ops.op_source_lines(HLO) == {"neg.1": 11, "mul.0": 12, "multiply_fusion": 12}
