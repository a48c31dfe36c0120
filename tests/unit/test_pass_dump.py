"""Reading XLA's per-pass dumps and its compile trace back as a pass list with before/after texts."""

from __future__ import annotations

from jaxplay.sandbox.capture import pass_dump

MODULE = "jit_update"
FILES = [
    "module_0003.jit_other.0000.simplification.after_pipeline-start.before_algsimp.txt",  # another module
    "module_0010.jit_update.before_optimizations.txt",
    "module_0010.jit_update.0000.simplification.after_pipeline-start.before_algsimp.txt",
    "module_0010.jit_update.0001.simplification.after_algsimp.before_dce.txt",
    "module_0010.jit_update.0002.simplification.after_constant_folding.before_pipeline-end.txt",
    "module_0010.jit_update.0003.layouts.after_pipeline-start.before_layout-assignment.txt",
    "module_0010.jit_update.0004.copy-insertion.after_adding_copies.txt",
    "module_0010.jit_update.0005.layouts.after_copy-insertion.before_pipeline-end.txt",
    "module_0010.jit_update.cpu_after_optimizations.txt",
    "module_0010.jit_update.dot_kernel_module.ir-no-opt.ll",
]


def _event(name: str, ts: float, dur: float, module: str | None = None) -> dict:
    event = {"ph": "X", "pid": 1, "tid": 7, "name": name, "ts": ts, "dur": dur}
    if module:
        event["args"] = {"module": module}
    return event


# The compiler thread as the profiler saw it: two pipelines; a pass that changed the module holds
# XLA's invariant checks; the pipeline's own checks at its start are not a pass.
TRACE = {"traceEvents": [
    {"ph": "M", "pid": 1, "tid": 7, "name": "thread_name", "args": {"name": "compiler"}},
    _event("simplification (jit_update)", 0, 100, MODULE),
    _event("RunInvariantCheckers", 0, 1),
    _event("algsimp", 2, 30),
    _event("RunInvariantCheckers", 20, 5),
    _event("dce", 33, 10),
    _event("constant_folding", 44, 50),
    _event("RunInvariantCheckers", 80, 5),
    _event("layouts (jit_update)", 200, 100, MODULE),
    _event("layout-assignment", 201, 20),
    _event("copy-insertion", 230, 60),
    _event("RunInvariantCheckers", 280, 5),
    _event("simplification (jit_other)", 400, 10, "jit_other"),
]}


def test_dump_files_of_one_module_in_order():
    before, files = pass_dump.dump_files(FILES, MODULE)
    assert before == "module_0010.jit_update.before_optimizations.txt"
    assert [(f.seq, f.pipeline, f.after, f.before) for f in files] == [
        (0, "simplification", "pipeline-start", "algsimp"),
        (1, "simplification", "algsimp", "dce"),
        (2, "simplification", "constant_folding", "pipeline-end"),
        (3, "layouts", "pipeline-start", "layout-assignment"),
        (4, "copy-insertion", "adding_copies", None),
        (5, "layouts", "copy-insertion", "pipeline-end"),
    ]


def test_traced_pipelines_name_every_pass_and_mark_the_changed_ones():
    pipelines = pass_dump.traced_pipelines(TRACE, MODULE)
    assert [p.name for p in pipelines] == ["simplification", "layouts"]
    assert [(name, duration, checked) for name, _, duration, checked in pipelines[0].passes] == [
        ("algsimp", 30, True), ("dce", 10, False), ("constant_folding", 50, True)]
    assert [(name, checked) for name, _, _, checked in pipelines[1].passes] == [
        ("layout-assignment", False), ("copy-insertion", True)]


def test_pass_list_merges_the_trace_with_the_dumps_in_the_order_passes_ran():
    _, files = pass_dump.dump_files(FILES, MODULE)
    runs, listed = pass_dump.passes(files, pass_dump.traced_pipelines(TRACE, MODULE))
    rows = [(runs[e["pipeline"]]["name"], e["name"], e["changed"], e["dump"], e.get("boundary", False))
            for e in listed]
    assert rows == [
        ("simplification", "simplification", False, 0, True),
        ("simplification", "algsimp", True, 1, False),
        ("simplification", "dce", False, None, False),
        ("simplification", "constant_folding", True, 2, False),
        ("layouts", "layouts", False, 3, True),
        ("layouts", "layout-assignment", False, None, False),
        ("copy-insertion", "adding_copies", True, 4, False),  # dumped by a step inside copy-insertion
        ("layouts", "copy-insertion", True, 5, False),
    ]
    assert listed[1]["duration_us"] == 30


def test_without_a_trace_the_dumps_alone_give_the_changed_passes_and_the_next_ones():
    _, files = pass_dump.dump_files(FILES, MODULE)
    _, listed = pass_dump.passes(files, [])
    named = [(e["name"], e["changed"]) for e in listed if not e.get("boundary")]
    assert named == [("algsimp", True), ("dce", False), ("constant_folding", True), ("adding_copies", True),
                     ("copy-insertion", True)]
    assert all(e["duration_us"] is None for e in listed)


HEADER = "FileNames\n1 \"<playground>\"\n\nFunctionNames\n1 \"f\"\n\nFileLocations\n" \
         "1 {file_name_id=1 function_name_id=1 line=7 end_line=7 column=0 end_column=5}\n\nStackFrames\n" \
         "1 {file_location_id=1 parent_frame_id=1}\n\n"


def _dump(body: str) -> str:
    return "HloModule jit_update\n\n" + HEADER + body


def test_texts_keep_the_header_once_repeat_no_text_and_map_lines_to_source():
    first = _dump("ENTRY %main {\n  %a = f32[] parameter(0)\n  ROOT %b = f32[] add(%a, %a), "
                  "metadata={op_name=\"add\" stack_frame_id=1}\n}\n")
    second = _dump("ENTRY %main {\n  %a = f32[] parameter(0)\n  ROOT %b = f32[] multiply(%a, %a), "
                   "metadata={op_name=\"mul\" stack_frame_id=1}\n}\n")
    header, entries, cut = pass_dump.texts([("before", first), ("a", first), ("b", second)], 1 << 20)
    assert header.startswith("FileNames") and "StackFrames" in header
    assert entries[1] == {"label": "a", "same_as": 0}
    body = entries[2]["text"]
    assert "FileNames" not in body and body.startswith("HloModule jit_update")
    line_of_root = body.splitlines().index(next(line for line in body.splitlines() if "ROOT" in line)) + 1
    assert [line_of_root, line_of_root, 7] in entries[2]["source_lines"]
    assert cut == 0


def test_texts_beyond_the_limit_are_listed_without_text():
    texts = [(f"t{i}", _dump(f"ENTRY %main {{\n  ROOT %c = f32[] constant({i})\n}}\n")) for i in range(5)]
    size = len(pass_dump.split_header(texts[0][1])[1].encode())
    _, entries, cut = pass_dump.texts(texts, size * 2)
    assert [e.get("text") is not None for e in entries] == [True, True, False, False, False]
    assert cut == 3


def test_line_changes_count_lines_added_and_removed():
    assert pass_dump.line_changes("a\nb\nc\n", "a\nc\nd\ne\n") == (2, 1)
    assert pass_dump.line_changes("same\n", "same\n") == (0, 0)
    assert pass_dump.resolved_texts([{"text": "x"}, {"same_as": 0}, {"text": None}]) == ["x", "x", None]


def test_a_pass_whose_text_reads_the_same_is_not_marked_changed_and_a_reorder_says_so():
    """XLA dumps after a nested pipeline or copy-insertion although their steps dumped the change: the
    page used to list such passes as changed with "+0 −0". A pass that only moved lines says how many."""
    from jaxplay.sandbox.capture import pass_pipeline

    start = _dump("ENTRY %main {\n  %a = f32[] parameter(0)\n  %b = f32[] negate(%a)\n  ROOT %c = f32[] abs(%b)\n}\n")
    edited = start.replace("abs(%b)", "sign(%b)")
    moved = edited.replace("  %a = f32[] parameter(0)\n  %b = f32[] negate(%a)\n",
                           "  %b = f32[] negate(%a)\n  %a = f32[] parameter(0)\n")
    _, dumps, _ = pass_dump.texts([("before", start), ("after algsimp", edited), ("after simplification", edited),
                                   ("after scheduling", moved)], 1 << 20)
    listed = [{"pipeline": 0, "name": name, "changed": True, "duration_us": 1.0, "dump": index}
              for index, name in enumerate(["algsimp", "simplification", "scheduling"])]
    algsimp, nested, scheduling = pass_pipeline._with_text_indexes(listed, dumps)
    assert (algsimp["changed"], algsimp["added"], algsimp["removed"]) == (True, 1, 1)
    assert nested["changed"] is False and nested["same_text"] is True
    assert scheduling["changed"] is True and (scheduling["added"], scheduling["removed"]) == (0, 0)
    assert scheduling["reordered"] == 2
