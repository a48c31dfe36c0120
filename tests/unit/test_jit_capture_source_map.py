"""Lines of jaxpr, StableHLO and HLO point back at the user's source lines."""

from __future__ import annotations

from pathlib import Path

from jaxplay.sandbox.capture import jit_source_map
from tests import runner_harness
from tests.unit.test_jit_capture import compiled_events, run_program

PROGRAM = """
import jax
import jax.numpy as jnp

def body(carry, x):
    carry = carry + jnp.tanh(x)
    return carry, carry * 2

@jax.jit
def f(xs, w):
    total, ys = jax.lax.scan(body, 0.0, xs)
    z = jnp.dot(ys, w)
    return z.sum() + total

f(jnp.ones(5), jnp.ones((5, 5)))
"""


def source_line_of(ranges: list[list[int]], text_line: int) -> int | None:
    for first, last, source in ranges:
        if first <= text_line <= last:
            return source
    return None


def lines_mentioning(text: str, needle: str) -> list[int]:
    return [number for number, line in enumerate(text.splitlines(), start=1) if needle in line]


def test_each_stage_maps_operations_to_the_lines_that_wrote_them(tmp_path):
    events, _, stderr = run_program(tmp_path, PROGRAM)
    (event,) = compiled_events(events)
    ranges = event["source_lines"]
    jaxpr, stablehlo, hlo = event["jaxpr"], event["stablehlo"], event["hlo"]
    assert [source_line_of(ranges["jaxpr"], n) for n in lines_mentioning(jaxpr, "= tanh")] == [6]
    assert {source_line_of(ranges["jaxpr"], n) for n in lines_mentioning(jaxpr, "dot_general")} == {12}
    # the scan's parameter lines continue its equation
    scan_line = lines_mentioning(jaxpr, "= scan[")[0]
    assert source_line_of(ranges["jaxpr"], scan_line) == 11
    assert source_line_of(ranges["jaxpr"], lines_mentioning(jaxpr, "length=5")[0]) == 11
    assert [source_line_of(ranges["stablehlo"], n) for n in lines_mentioning(stablehlo, "stablehlo.tanh")] == [6]
    assert {source_line_of(ranges["stablehlo"], n) for n in lines_mentioning(stablehlo, "stablehlo.dot_general")} == {12}
    assert 6 in {source_line_of(ranges["hlo"], n) for n in lines_mentioning(hlo, " tanh(")}
    # nothing points into the sandbox's own files
    assert "runner.py" not in stablehlo and "runner.py" not in hlo and "runner.py" not in jaxpr, stderr


def test_jaxpr_continuation_lines_and_library_equations():
    text = "\n".join([
        "{ lambda ; a:f32[3]. let",
        "    b:f32[3] = dot_general[          # <playground>:4:8 (f)",
        "      dimension_numbers=(([1], [0]), ([], []))",
        "    ] a a",
        "    c:f32[3] = sin b                 # /usr/lib/lib.py:9:1 (helper)",
        "    d:f32[3] = cos c                 # <playground>:5:8 (f)",
        "  in (d,) }",
    ])
    assert jit_source_map.jaxpr_line_ranges(text) == [[2, 4, 4], [6, 6, 5]]


def test_stablehlo_locations_resolve_through_names_and_callsites():
    plain = "module @jit_f {\n  %0 = stablehlo.sine %arg0\n  %1 = stablehlo.add %0, %0\n  return %1\n}\n"
    debug = "\n".join([
        '#loc1 = loc("x")',
        "module @jit_f {",
        "  %0 = stablehlo.sine %arg0 loc(#loc6)",
        "  %1 = stablehlo.add %0, %0 loc(#loc7)",
        "  return %1 loc(#loc)",
        "} loc(#loc)",
        "#loc = loc(unknown)",
        '#loc2 = loc("<playground>":4:8 to :18)',
        '#loc3 = loc("<playground>":9:0 to :14)',
        '#loc4 = loc("f"(#loc2))',
        '#loc5 = loc("<module>"(#loc3))',
        "#loc6 = loc(callsite(#loc4 at #loc5))",
        '#loc7 = loc("jit(f)"(#loc5))',
    ])
    assert jit_source_map.stablehlo_line_ranges(plain, debug) == [[2, 2, 4], [3, 3, 9]]


def test_hlo_stack_frames_and_clipping():
    text = "\n".join([
        "HloModule jit_f",
        "",
        "FileNames",
        '1 "<playground>"',
        '2 "/usr/lib/lib.py"',
        "",
        "FileLocations",
        "1 {file_name_id=1 function_name_id=1 line=7 end_line=7 column=8 end_column=18}",
        "2 {file_name_id=2 function_name_id=1 line=3 end_line=3 column=1 end_column=2}",
        "",
        "StackFrames",
        "1 {file_location_id=1 parent_frame_id=1}",
        "2 {file_location_id=2 parent_frame_id=1}",
        "",
        "ENTRY %main.1 (x.1: f32[3]) -> f32[3] {",
        '  %x.1 = f32[3]{0} parameter(0), metadata={op_name="x"}',
        '  %sine = f32[3]{0} sine(%x.1), metadata={op_name="jit(f)/sin" stack_frame_id=1}',
        '  ROOT %c = f32[3]{0} cosine(%sine), metadata={op_name="jit(f)/cos" stack_frame_id=2}',
        "}",
    ])
    ranges = jit_source_map.hlo_line_ranges(text)
    assert ranges == [[17, 17, 7]]
    assert jit_source_map.clip_ranges([[1, 5, 3], [8, 9, 4]], 6) == [[1, 5, 3]]
    assert jit_source_map.clip_ranges([[1, 5, 3]], 4) == [[1, 4, 3]]


EDITED_PROGRAM = """import jax
import jax.numpy as jnp

@jax.jit
def f(x):
    y = jnp.sin(x)
    return y * 2

print(f(jnp.arange(3.0)))
"""


def run_with_persistent_cache(tmp_path: Path, code: str, cache: Path, name: str) -> dict:
    ran = runner_harness.run_program(
        code, tmp_path / name, before=f"from jaxplay.sandbox.engine import warmup\nwarmup.use_persistent_cache({str(cache)!r})\n")
    assert ran.status == 0, ran.stderr
    (event,) = compiled_events(ran.events)
    return event


def test_after_lines_move_above_a_function_every_stage_points_at_the_new_lines(tmp_path):
    """The second run compiles the same computation at other lines: JAX's persistent cache keys
    strip locations, so without metadata in the key it would hand back the first run's executable,
    whose HLO still names the old lines."""
    cache = tmp_path / "cache"
    first = run_with_persistent_cache(tmp_path, EDITED_PROGRAM, cache, "first")
    moved = run_with_persistent_cache(tmp_path, "# one\n# two\n# three\n" + EDITED_PROGRAM, cache, "moved")
    again = run_with_persistent_cache(tmp_path, "# one\n# two\n# three\n" + EDITED_PROGRAM, cache, "again")
    for event, sine_line in ((first, 6), (moved, 9), (again, 9)):
        for stage, needle in (("jaxpr", "= sin"), ("stablehlo", "stablehlo.sine"), ("hlo", " sine(")):
            lines = {source_line_of(event["source_lines"][stage], n) for n in lines_mentioning(event[stage], needle)}
            assert lines == {sine_line}, (stage, event["persistent_cache_hit"], event[stage])
    # An unchanged program still loads its executable from the cache.
    assert again["persistent_cache_hit"] and not first["persistent_cache_hit"]
