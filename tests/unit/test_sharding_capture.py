"""The sharding capture in the runner: which events a program produces, and their fields.

Each program runs in a process of its own with 8 CPU devices (the device count
is fixed when JAX's backend starts, so it cannot be changed inside pytest's
process), through the runner in a fork of a process that imported JAX with that
environment (tests/runner_harness.py).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

from tests import runner_harness

REPO = Path(__file__).resolve().parents[2]
EIGHT_DEVICES = {"XLA_FLAGS": "--xla_force_host_platform_device_count=8", "JAX_PLATFORMS": "cpu"}
ENV = {**os.environ, **EIGHT_DEVICES}

HEADER = """\
import jax, jax.numpy as jnp, numpy as np
from jax.sharding import NamedSharding, PartitionSpec as P, AxisType
from playground import show_sharding
"""


def run(body: str, tmp_path: Path) -> tuple[list[dict], str, str]:
    """(events, stdout, stderr) of one program run by the playground runner."""
    ran = runner_harness.run_program(HEADER + textwrap.dedent(body), tmp_path / "run", EIGHT_DEVICES)
    return ran.events, ran.stdout, ran.stderr


def shardings(events: list[dict]) -> list[dict]:
    return [e for e in events if e["type"] == "sharding"]


def test_visualize_is_drawn_by_the_page_not_printed(tmp_path: Path) -> None:
    events, stdout, _ = run("""
        mesh = jax.make_mesh((2, 4), ("x", "y"))
        x = jax.device_put(jnp.zeros((8, 8), jnp.bfloat16), NamedSharding(mesh, P("x", "y")))
        jax.debug.visualize_array_sharding(x)
    """, tmp_path)
    [event] = shardings(events)
    assert stdout == ""  # rich's text table is not printed
    assert event["source"] == {"kind": "visualize", "name": "x", "line": 7, "fn": None}  # the argument as written
    assert event["shape"] == [8, 8] and event["dtype"] == "bfloat16"
    assert event["spec"] == "P('x', 'y')"
    assert event["typeof"] == "bfloat16[8@x,8@y]"
    assert event["mesh"] == {
        "axis_names": ["x", "y"], "axis_sizes": [2, 4], "axis_types": ["Explicit", "Explicit"],
        "device_ids": list(range(8)),
    }
    assert event["bytes"] == 128
    assert {s["bytes"] for s in event["shards"]} == {16}
    assert event["shards"][5] == {"device": 5, "index": [[4, 8], [2, 4]], "replica": 0, "bytes": 16}


def test_replicated_shards_have_distinct_replica_ids(tmp_path: Path) -> None:
    events, _, _ = run("""
        mesh = jax.make_mesh((2, 4), ("x", "y"), axis_types=(AxisType.Auto, AxisType.Auto))
        show_sharding(jax.device_put(jnp.zeros(8), NamedSharding(mesh, P("x"))), name="v")
    """, tmp_path)
    [event] = shardings(events)
    assert event["mesh"]["axis_types"] == ["Auto", "Auto"]
    by_device = {s["device"]: (s["index"], s["replica"]) for s in event["shards"]}
    assert by_device[0] == ([[0, 4]], 0) and by_device[3] == ([[0, 4]], 3)
    assert by_device[4] == ([[4, 8]], 0) and by_device[7] == ([[4, 8]], 3)


def test_traced_value_keeps_the_users_axis_types_and_line(tmp_path: Path) -> None:
    events, _, _ = run("""
        mesh = jax.make_mesh((2, 4), ("x", "y"))
        @jax.jit
        def step(a):
            b = jax.sharding.reshard(a * 2, P(None, "y"))
            show_sharding(b, name="b")
            return b
        with jax.set_mesh(mesh):
            step(jax.device_put(jnp.zeros((4, 8)), P("x", "y")))
            step(jax.device_put(jnp.ones((4, 8)), P("x", "y")))  # cached: no second view
    """, tmp_path)
    [event] = shardings(events)
    assert event["source"] == {"kind": "show_sharding", "name": "b", "line": 9, "fn": "step", "traced": True}
    assert event["mesh"]["axis_types"] == ["Explicit", "Explicit"]  # XLA alone would say Auto
    assert event["typeof"] == "float32[4,8@y]"
    assert [s["index"] for s in event["shards"][:2]] == [[[0, 4], [0, 2]], [[0, 4], [2, 4]]]


def test_shard_map_block_replicas_follow_invariant_axes(tmp_path: Path) -> None:
    events, _, _ = run("""
        mesh = jax.make_mesh((2, 4), ("x", "y"))
        def body(block):
            total = jax.lax.psum(block, "x")
            show_sharding(total, name="total")
            return total
        x = jax.device_put(jnp.ones((8, 8)), NamedSharding(mesh, P("x", "y")))
        jax.jit(jax.shard_map(body, mesh=mesh, in_specs=P("x", "y"), out_specs=P(None, "y")))(x)
    """, tmp_path)
    [event] = shardings(events)
    assert event["local_block"] is True
    assert event["shape"] == [4, 2]
    assert event["manual_axes"] == ["x", "y"] and event["varying_axes"] == ["y"]
    assert event["mesh"]["axis_types"] == ["Manual", "Manual"]
    # After psum over x, devices 0 and 4 (same y) hold equal blocks.
    replicas = {s["device"]: s["replica"] for s in event["shards"]}
    assert [replicas[d] for d in range(8)] == [0, 0, 0, 0, 1, 1, 1, 1]


def test_pytree_leaves_are_named_by_path(tmp_path: Path) -> None:
    events, _, _ = run("""
        show_sharding({"w": jnp.zeros((2, 3)), "layers": [jnp.zeros(4)]}, name="params")
    """, tmp_path)
    names = [e["source"]["name"] for e in shardings(events)]
    assert names == ["params['layers'][0]", "params['w']"]
    single = shardings(events)[1]
    assert single["sharding_type"] == "SingleDeviceSharding" and single["mesh"] is None
    assert single["shards"] == [{"device": 0, "index": [[0, 2], [0, 3]], "replica": 0, "bytes": 24}]


def test_non_array_gets_a_message_naming_the_fix(tmp_path: Path) -> None:
    events, _, _ = run("""
        show_sharding(np.zeros(3), name="host")
    """, tmp_path)
    [error] = [e for e in events if e["type"] == "error"]
    assert error["ename"] == "TypeError" and error["line"] == 5
    assert "numpy.ndarray" in error["message"] and "jax.device_put" in error["message"]


def test_visualize_sharding_of_a_shape_has_no_dtype(tmp_path: Path) -> None:
    events, _, _ = run("""
        mesh = jax.make_mesh((4, 2), ("a", "b"))
        jax.debug.visualize_sharding((8, 4, 2), NamedSharding(mesh, P("b", None, "a")))
    """, tmp_path)
    [event] = shardings(events)
    assert event["shape"] == [8, 4, 2] and event["dtype"] is None and event["bytes"] is None
    assert event["shards"][1]["index"] == [[4, 8], [0, 4], [0, 1]]


def test_views_per_run_are_capped_with_a_notice(tmp_path: Path) -> None:
    from jaxplay.sandbox.capture.sharding import MAX_SHARDING_EVENTS

    events, _, stderr = run(f"""
        x = jnp.zeros(2)
        for _ in range({MAX_SHARDING_EVENTS + 5}):
            show_sharding(x)
    """, tmp_path)
    assert len(shardings(events)) == MAX_SHARDING_EVENTS
    assert "5 more sharding views were not drawn" in stderr


LAYOUT_SCRIPT = """
import json
import jax, jax.numpy as jnp
from jax.sharding import NamedSharding, PartitionSpec as P
from jaxplay.sandbox.capture.sharding_layout import describe_layout, device_indices, padded_device_indices

mesh = jax.make_mesh((2, 4), ("x", "y"))
cube = jax.make_mesh((2, 2, 2), ("a", "b", "c"))
subset = jax.make_mesh((2, 2), ("a", "b"), devices=jax.devices()[4:])
even = [
    (mesh, P("x", "y"), (8, 8)), (mesh, P("y", "x"), (8, 8)), (mesh, P("y"), (8, 4)), (mesh, P(None, "x"), (4, 8)),
    (mesh, P(("x", "y")), (16,)), (mesh, P(("y", "x")), (16,)), (mesh, P(), (4,)), (subset, P("b", "a"), (4, 4)),
    (cube, P("c", None, "a"), (4, 2, 6)), (cube, P(("c", "a")), (8, 3, 3)), (cube, P(None, ("b", "c")), (2, 8)),
]
agree = []
for m, spec, shape in even:
    s = NamedSharding(m, spec)
    jax_map = [(d.id, b) for d, b in device_indices(s, shape)]
    ours = [(d.id, b) for d, b in padded_device_indices(s, shape)]
    agree.append(jax_map == ours)
uneven = describe_layout((10,), jnp.float32, NamedSharding(mesh, P("y")))
tiny = describe_layout((3, 2), jnp.int8, NamedSharding(mesh, P("y", "x")))
print(json.dumps({"agree": agree, "uneven": uneven, "tiny": tiny}))
"""


def test_xla_padding_rule_matches_jax_and_handles_uneven_shards() -> None:
    proc = subprocess.run([sys.executable, "-c", LAYOUT_SCRIPT], cwd=REPO, env=ENV, capture_output=True, text=True,
                          timeout=120)
    assert proc.returncode == 0, proc.stderr
    result = json.loads(proc.stdout.splitlines()[-1])
    assert all(result["agree"]), result["agree"]
    uneven = result["uneven"]
    assert uneven["uneven"] is True
    assert [s["index"] for s in uneven["shards"][:4]] == [[[0, 3]], [[3, 6]], [[6, 9]], [[9, 10]]]
    assert [s["bytes"] for s in uneven["shards"][:4]] == [12, 12, 12, 4]
    assert [s["replica"] for s in uneven["shards"]] == [0, 0, 0, 0, 1, 1, 1, 1]
    tiny = {s["device"]: s["index"] for s in result["tiny"]["shards"]}
    assert tiny[3] == [[3, 3], [0, 1]]  # XLA gives the fourth row-tile nothing to hold
    assert tiny[7] == [[3, 3], [1, 2]]


def test_compiled_event_names_arguments_and_skips_static_ones(tmp_path: Path) -> None:
    events, _, _ = run("""
        import functools
        mesh = jax.make_mesh((8,), ("d",))
        @functools.partial(jax.jit, static_argnums=1)
        def scale(params, times, x, *, bias):
            return {"y": params["w"] * x * times + bias}
        x = jax.device_put(jnp.ones(16), NamedSharding(mesh, P("d")))
        scale({"w": jnp.ones(16)}, 3, x, bias=jnp.float32(1))
    """, tmp_path)
    [compiled] = [e for e in events if e["type"] == "compiled"]
    assert [(i["name"], i["spec"]) for i in compiled["in_shardings"]] == [
        ("params['w']", "P('d',)"), ("x", "P('d',)"), ("bias", "P()"),
    ]
    assert [o["name"] for o in compiled["out_shardings"]] == ["out['y']"]
    assert compiled["num_devices"] == 8
    assert set(compiled["collectives"]) >= {"all-reduce", "all-gather", "reduce-scatter", "all-to-all",
                                             "collective-permute"}


def test_shard_map_without_vma_tracking_claims_no_copies(tmp_path: Path) -> None:
    events, _, _ = run("""
        mesh = jax.make_mesh((2, 4), ("x", "y"))
        def body(block):
            total = jax.lax.psum(block, "x")
            show_sharding(total, name="total")
            return total
        x = jax.device_put(jnp.ones((8, 8)), NamedSharding(mesh, P("x", "y")))
        jax.jit(jax.shard_map(body, mesh=mesh, in_specs=P("x", "y"), out_specs=P(None, "y"), check_vma=False))(x)
    """, tmp_path)
    [event] = shardings(events)
    assert event["local_block"] is True and event["varying_axes"] is None
    assert {s["replica"] for s in event["shards"]} == {0}
