"""Sharding through the real server, worker and bubblewrap sandbox: 8 CPU devices,
the gallery's sharding examples, and the sharding fields of compiled functions."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.conftest import done_of, output_text

GALLERY = Path(__file__).resolve().parents[2] / "frontend" / "src" / "examples" / "gallery"


def of_type(events: list[dict], kind: str) -> list[dict]:
    return [e for e in events if e["type"] == kind]


def compiled_named(events: list[dict], fn: str) -> dict:
    [event] = [e for e in of_type(events, "compiled") if e["fn"] == fn]
    return event


def run_example(live, name: str) -> list[dict]:
    events = live.run((GALLERY / name).read_text(), timeout=120)
    assert done_of(events)["status"] == "ok", (output_text(events, "stderr"), of_type(events, "error"))
    return events


def test_the_cpu_backend_has_eight_devices(live):
    [cpu] = [b for b in live.get_json("/api/backends")["backends"] if b["name"] == "cpu"]
    assert cpu["device_count"] == 8
    events = live.run("import jax\nprint(jax.device_count(), jax.devices()[7].id)")
    assert output_text(events).split() == ["8", "7"]
    assert of_type(events, "started")[0]["devices"]["count"] == 8


def test_model_parallel_example_events(live):
    events = run_example(live, "sharding_2_model_parallel_matmul.py")
    views = of_type(events, "sharding")
    assert [v["source"]["name"] for v in views] == ["x", "w1", "h", "out"]
    h = views[2]
    assert h["spec"] == "P('x', 'y')" and h["mesh"]["axis_sizes"] == [2, 4]
    assert sorted(s["device"] for s in h["shards"]) == list(range(8))
    assert len({str(s["index"]) for s in h["shards"]}) == 8  # eight distinct blocks
    assert {s["replica"] for s in views[0]["shards"]} == {0, 1, 2, 3}  # x: 2 blocks, 4 copies each
    assert compiled_named(events, "layer2")["collectives"]["all-reduce"] >= 1
    layer1 = compiled_named(events, "layer1")
    assert [(i["name"], i["spec"]) for i in layer1["in_shardings"]] == [("x", "P('x', None)"), ("w1", "P(None, 'y')")]
    assert layer1["out_shardings"][0]["spec"] == "P('x', 'y')"
    assert sum(layer1["collectives"].values()) == 0


def test_data_parallel_example_averages_gradients_with_an_all_reduce(live):
    events = run_example(live, "sharding_1_data_parallel.py")
    step = compiled_named(events, "train_step")
    assert step["num_devices"] == 8 and step["collectives"]["all-reduce"] >= 1
    x = next(v for v in of_type(events, "sharding") if v["source"]["name"] == "x (batch)")
    assert [s["index"] for s in x["shards"]][:2] == [[[0, 8], [0, 16]], [[8, 16], [0, 16]]]
    assert "step 2: loss" in output_text(events)


def test_shard_map_example_shows_blocks_and_collectives(live):
    events = run_example(live, "sharding_3_shard_map_collective.py")
    block, gathered = [v for v in of_type(events, "sharding") if v.get("local_block")]
    assert block["shape"] == [4, 2] and block["source"]["fn"] == "column_sums"
    assert block["varying_axes"] == ["x", "y"] and {s["replica"] for s in block["shards"]} == {0}
    # After psum over x and all_gather over y, the two devices of each y column hold equal blocks.
    assert gathered["shape"] == [1, 8] and gathered["varying_axes"] == ["y"]
    assert [s["replica"] for s in gathered["shards"]] == [0, 0, 0, 0, 1, 1, 1, 1]
    counts = compiled_named(events, "shard_map(column_sums)")["collectives"]  # what compiles is the mapped function
    assert counts["all-reduce"] == 1 and counts["all-gather"] == 1
    assert "equal to x.sum(axis=0): True" in output_text(events)


def test_explicit_example_prints_the_type_error_then_fixes_it(live):
    events = run_example(live, "sharding_4_explicit_sharding_types.py")
    text = output_text(events)
    assert "ShardingTypeError" in text and "fix 2: float32[8@x,4]" in text
    assert compiled_named(events, "product_into")["collectives"]["all-reduce"] >= 1


@pytest.mark.parametrize("inspect", [True, False])
def test_views_are_sent_with_or_without_inspect(live, inspect: bool):
    events = live.run("""
import jax, jax.numpy as jnp
from jax.sharding import NamedSharding, PartitionSpec as P
mesh = jax.make_mesh((8,), ("d",))
x = jax.device_put(jnp.zeros(16), NamedSharding(mesh, P("d")))
jax.debug.visualize_array_sharding(x)
jax.jit(lambda v: v.sum())(x)
""", inspect=inspect)
    assert done_of(events)["status"] == "ok"
    assert output_text(events) == ""  # no rich table on stdout
    [view] = of_type(events, "sharding")
    assert view["source"]["name"] == "x" and len(view["shards"]) == 8
    compiled = of_type(events, "compiled")
    if inspect:
        assert compiled[0]["collectives"]["all-reduce"] >= 1 and compiled[0]["in_shardings"][0]["name"] == "v"
    else:
        assert compiled == []
