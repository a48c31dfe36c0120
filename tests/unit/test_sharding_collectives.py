"""Counting collectives in optimized HLO text: what the Sharding panel's table lists."""

from __future__ import annotations

from jaxplay.sandbox.capture.sharding_compiled import COLLECTIVE_OPS, count_collectives, leaf_name

HLO = """\
HloModule jit_f, is_scheduled=true, num_partitions=8

%add.clone (x.1: f32[], y.1: f32[]) -> f32[] {
  ROOT %add.1 = f32[] add(%x.1, %y.1)
}

ENTRY %main.5 (param: f32[4,2], param.1: f32[2,4]) -> (f32[4,4]{1,0}, f32[]) {
  %param = f32[4,2]{1,0} parameter(0), sharding={devices=[2,4]<=[8]}
  %dot = f32[4,4]{1,0} dot(%param, %param.1), lhs_contracting_dims={1}, rhs_contracting_dims={0}
  %all-reduce.3 = (f32[4,4]{1,0}, f32[]) all-reduce(%dot, %c), channel_id=1, replica_groups={{0,1,2,3}}, to_apply=%add.clone
  %get-tuple-element = f32[4,4]{1,0} get-tuple-element(%all-reduce.3), index=0
  %all-gather-start = (f32[4,4]{1,0}, f32[8,4]{1,0}) all-gather-start(%get-tuple-element), dimensions={0}
  %all-gather-done = f32[8,4]{1,0} all-gather-done(%all-gather-start)
  %collective-permute.1 = f32[8,4]{1,0} collective-permute(%all-gather-done), source_target_pairs={{0,1},{1,0}}
  %reduce-scatter = f32[2,4]{1,0} reduce-scatter(%collective-permute.1), dimensions={0}, to_apply=%add.clone
  %all-to-all = (f32[1,4]{1,0}, f32[1,4]{1,0}) all-to-all(%reduce-scatter, %reduce-scatter), replica_groups={{0,1}}
  %copy = f32[8,4]{1,0} copy(%all-gather-done), metadata={op_name="jit(f)/all-reduce(x)"}
  ROOT %tuple = (f32[4,4]{1,0}, f32[]) tuple(%get-tuple-element, %all-reduce.3)
}
"""


def test_each_collective_counted_once() -> None:
    assert count_collectives(HLO) == {
        "all-reduce": 1,
        "all-gather": 1,  # the async pair counts once, at -start
        "reduce-scatter": 1,
        "all-to-all": 1,
        "collective-permute": 1,
    }


def test_operand_names_and_metadata_are_not_instructions() -> None:
    text = '  %copy = f32[8]{0} copy(%all-reduce.3), metadata={op_name="all-gather(x)"}\n'
    assert count_collectives(text) == dict.fromkeys(COLLECTIVE_OPS, 0)


def test_repeated_collectives_add_up() -> None:
    text = "\n".join(f"  %ar.{i} = f32[] all-reduce(%p), to_apply=%add" for i in range(3))
    assert count_collectives(text)["all-reduce"] == 3


def test_rarer_collectives_are_listed_when_present() -> None:
    text = "  %b = f32[4]{0} collective-broadcast(%p), replica_groups={{0,1}}\n"
    counts = count_collectives(text)
    assert counts["collective-broadcast"] == 1
    assert counts["collective-permute"] == 0


def test_no_hlo_gives_zero_counts() -> None:
    assert count_collectives("") == dict.fromkeys(COLLECTIVE_OPS, 0)


def test_leaf_names_follow_the_pytree_path() -> None:
    from jax.tree_util import DictKey, SequenceKey

    assert leaf_name((), "out") == "out"
    assert leaf_name((DictKey("w"),), "arg0") == "arg0['w']"
    assert leaf_name((SequenceKey(1), DictKey("b")), "out") == "out[1]['b']"
