"""The Sharding panel shows what JAX does, not our reading of the spec.

Each case is a small program run twice, each in a process of its own with 8
CPU devices: once through the playground runner (in a fork of a process that imported JAX,
tests/runner_harness.py) and once in a plain process where ``show_sharding`` and
``jax.debug.visualize_array_sharding`` record only what JAX's public API
says: ``sharding.devices_indices_map(shape)`` and, for a concrete array, each
``addressable_shards`` entry's replica id. For a jitted function, its
``compiled`` event's ``collectives`` must equal the collective instructions a
separate line parser finds in ``jax.jit(f).lower(...).compile().as_text()``
of a plain process, and its ``in_shardings``/``out_shardings`` the
``devices_indices_map`` of that plain ``Compiled``'s input/output shardings.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from tests import runner_harness

REPO = Path(__file__).resolve().parents[2]
PYTHON = sys.executable
EIGHT_DEVICES = {"XLA_FLAGS": "--xla_force_host_platform_device_count=8", "JAX_PLATFORMS": "cpu"}
ENV = {**os.environ, **EIGHT_DEVICES}

HEADER = """\
import functools
import jax, jax.numpy as jnp
from jax.sharding import NamedSharding, PartitionSpec as P, AxisType
from playground import show_sharding
"""

CASES: dict[str, str] = {
    "2d_over_2x4": """
        mesh = jax.make_mesh((2, 4), ("x", "y"))
        show_sharding(jax.device_put(jnp.zeros((8, 8)), NamedSharding(mesh, P("x", "y"))), name="a")
    """,
    "2d_transposed_axes": """
        mesh = jax.make_mesh((2, 4), ("x", "y"))
        show_sharding(jax.device_put(jnp.zeros((8, 6)), NamedSharding(mesh, P("y", "x"))), name="a")
    """,
    "batch_over_1d_mesh": """
        mesh = jax.make_mesh((8,), ("data",))
        show_sharding(jax.device_put(jnp.zeros((32, 5)), NamedSharding(mesh, P("data"))), name="batch")
    """,
    "fully_replicated": """
        mesh = jax.make_mesh((2, 4), ("x", "y"))
        jax.debug.visualize_array_sharding(jax.device_put(jnp.zeros((4, 4)), NamedSharding(mesh, P())))
    """,
    "partly_replicated_rows": """
        mesh = jax.make_mesh((2, 4), ("x", "y"))
        show_sharding(jax.device_put(jnp.zeros((6, 8)), NamedSharding(mesh, P(None, "x"))), name="a")
    """,
    "single_device": """
        show_sharding(jnp.arange(12.0).reshape(3, 4), name="plain")
    """,
    "3d_on_2x2x2": """
        mesh = jax.make_mesh((2, 2, 2), ("a", "b", "c"))
        show_sharding(jax.device_put(jnp.zeros((4, 3, 6)), NamedSharding(mesh, P("a", None, "c"))), name="t")
    """,
    "subset_mesh": """
        mesh = jax.make_mesh((2, 2), ("a", "b"), devices=jax.devices()[4:])
        show_sharding(jax.device_put(jnp.zeros((4, 4)), NamedSharding(mesh, P("b", "a"))), name="a")
    """,
    "two_axes_on_one_dim": """
        mesh = jax.make_mesh((2, 4), ("x", "y"))
        show_sharding(jax.device_put(jnp.zeros(16), NamedSharding(mesh, P(("y", "x")))), name="v")
    """,
    "auto_with_sharding_constraint": """
        mesh = jax.make_mesh((2, 4), ("x", "y"), axis_types=(AxisType.Auto, AxisType.Auto))
        @jax.jit
        def f(a):
            b = jax.lax.with_sharding_constraint(a * 2, NamedSharding(mesh, P("y", "x")))
            show_sharding(b, name="constrained")
            return b
        out = f(jax.device_put(jnp.zeros((8, 8)), NamedSharding(mesh, P("x"))))
        show_sharding(out, name="out")
    """,
    "set_mesh_and_reshard": """
        mesh = jax.make_mesh((2, 4), ("x", "y"))
        with jax.set_mesh(mesh):
            a = jax.device_put(jnp.zeros((8, 8)), P("x", "y"))
            b = jax.sharding.reshard(a, P(None, "x"))
            show_sharding(b, name="resharded")
            @jax.jit
            def g(v):
                w = jax.sharding.reshard(v, P("y", None))
                jax.debug.visualize_array_sharding(w)
                return w
            show_sharding(g(a), name="g_out")
    """,
    "shard_map_psum_output": """
        mesh = jax.make_mesh((2, 4), ("x", "y"))
        x = jax.device_put(jnp.ones((8, 8)), NamedSharding(mesh, P("x", "y")))
        summed = jax.jit(jax.shard_map(lambda b: jax.lax.psum(b, "x"), mesh=mesh,
                                       in_specs=P("x", "y"), out_specs=P(None, "y")))(x)
        show_sharding(summed, name="summed")
    """,
    "jit_out_shardings_pytree": """
        mesh = jax.make_mesh((4, 2), ("d", "m"))
        s = {"w": NamedSharding(mesh, P(None, "m")), "b": NamedSharding(mesh, P("d"))}
        params = jax.jit(lambda: {"w": jnp.zeros((8, 4)), "b": jnp.zeros(8)}, out_shardings=s)()
        show_sharding(params, name="params")
    """,
    "scalar_replicated": """
        mesh = jax.make_mesh((8,), ("d",))
        show_sharding(jax.device_put(jnp.float32(3.0), NamedSharding(mesh, P())), name="s")
    """,
}

PLAIN_PRELUDE = """\
import json, sys
import jax
from jax._src.sharding_impls import device_replica_id_map
records = []

def _record(name, shape, sharding, array=None):
    indices = sharding.devices_indices_map(tuple(shape))
    if array is not None:
        replicas = {s.device.id: s.replica_id for s in array.addressable_shards}
    else:
        replicas = {d.id: r for d, r in device_replica_id_map(sharding, tuple(shape)).items()}
    records.append({
        "name": name,
        "shards": sorted(
            [d.id, [list(sl.indices(n)[:2]) for sl, n in zip(idx, shape)], replicas[d.id]]
            for d, idx in indices.items()
        ),
    })

def show_sharding(x, name=None):
    leaves = jax.tree_util.tree_flatten_with_path(x)[0]
    for path, leaf in leaves:
        label = name if len(leaves) == 1 and not path else (name or "") + jax.tree_util.keystr(path)
        if isinstance(leaf, jax.core.Tracer):
            shape = leaf.shape
            jax.debug.inspect_array_sharding(leaf, callback=lambda s, label=label, shape=shape: _record(label, shape, s))
        else:
            _record(label, leaf.shape, leaf.sharding, leaf)

def _visualize(x, **kwargs):
    if isinstance(x, jax.core.Tracer):
        jax.debug.inspect_array_sharding(x, callback=lambda s, shape=x.shape: _record(None, shape, s))
    else:
        _record(None, x.shape, x.sharding, x)

jax.debug.visualize_array_sharding = _visualize
"""


def program(body: str) -> str:
    return HEADER + textwrap.dedent(body)


def run_in_playground(code: str, tmp_path: Path) -> list[dict]:
    ran = runner_harness.run_program(code, tmp_path / "run", EIGHT_DEVICES)
    errors = [e for e in ran.events if e["type"] == "error"]
    assert ran.status == 0 and not errors, (ran.stderr, errors)
    return ran.events


def run_plain(code: str) -> list[dict]:
    plain = PLAIN_PRELUDE + code.replace("from playground import show_sharding\n", "")
    plain += "\nprint('RECORDS' + json.dumps(records))\n"
    proc = subprocess.run([PYTHON, "-c", plain], cwd="/", env=ENV, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    line = next(line for line in proc.stdout.splitlines() if line.startswith("RECORDS"))
    return json.loads(line[len("RECORDS"):])


@pytest.mark.parametrize("case", sorted(CASES))
def test_event_shards_equal_jax(case: str, tmp_path: Path) -> None:
    code = program(CASES[case])
    events = [e for e in run_in_playground(code, tmp_path) if e["type"] == "sharding"]
    expected = run_plain(code)
    assert expected, "the plain process recorded nothing: the case shows no array"
    got = [
        {
            # visualize views are named by the argument's source text; the plain recorder has no name for them.
            "name": e["source"]["name"] if e["source"]["kind"] == "show_sharding" else None,
            "shards": sorted([s["device"], s["index"], s["replica"]] for s in e["shards"]),
        }
        for e in events
    ]
    assert got == expected
    for event in events:
        assert len(event["shards"]) == len(event["devices"])
        if event["mesh"] is not None:
            assert sorted(event["mesh"]["device_ids"]) == sorted(event["devices"])


# --- collectives -------------------------------------------------------------

COLLECTIVE_PROGRAMS: dict[str, str] = {
    "matmul_contracting_sharded": """
        mesh = jax.make_mesh((2, 4), ("x", "y"), axis_types=(AxisType.Auto, AxisType.Auto))
        a = jax.device_put(jnp.ones((8, 16)), NamedSharding(mesh, P("x", "y")))
        b = jax.device_put(jnp.ones((16, 4)), NamedSharding(mesh, P("y", None)))
        fn, args = jax.jit(lambda a, b: a @ b), (a, b)
    """,
    "shard_map_all_gather": """
        mesh = jax.make_mesh((2, 4), ("x", "y"))
        a = jax.device_put(jnp.ones((8, 8)), NamedSharding(mesh, P("x", "y")))
        fn = jax.jit(jax.shard_map(lambda b: jax.lax.all_gather(b, "y", axis=1, tiled=True), mesh=mesh,
                                   in_specs=P("x", "y"), out_specs=P("x", None), check_vma=False))
        args = (a,)
    """,
    "shard_map_psum_scatter_ppermute_all_to_all": """
        mesh = jax.make_mesh((2, 4), ("x", "y"))
        a = jax.device_put(jnp.ones((16, 32)), NamedSharding(mesh, P("x", "y")))
        def body(b):
            b = jax.lax.psum_scatter(b, "y", scatter_dimension=0, tiled=True)
            b = jax.lax.ppermute(b, "x", [(0, 1), (1, 0)])
            return jax.lax.all_to_all(b, "y", 1, 0, tiled=True)
        fn = jax.jit(jax.shard_map(body, mesh=mesh, in_specs=P("x", "y"), out_specs=P("x", "y")))
        args = (a,)
    """,
    "data_parallel_grad": """
        mesh = jax.make_mesh((8,), ("data",))
        w = jax.device_put(jnp.ones((4, 2)), NamedSharding(mesh, P()))
        x = jax.device_put(jnp.ones((32, 4)), NamedSharding(mesh, P("data")))
        fn = jax.jit(jax.grad(lambda w, x: jnp.mean((x @ w) ** 2)))
        args = (w, x)
    """,
}

CALL = "\nfn(*args)\n"
PLAIN_COMPILED = """
compiled = fn.lower(*args).compile()
def _maps(tree, infos):
    out = []
    for sharding, info in zip(jax.tree_util.tree_leaves(tree), jax.tree_util.tree_leaves(infos)):
        m = sharding.devices_indices_map(tuple(info.shape))
        out.append(sorted([d.id, [list(sl.indices(n)[:2]) for sl, n in zip(idx, info.shape)]] for d, idx in m.items()))
    return out
print("HLO" + json.dumps(compiled.as_text()))
print("INS" + json.dumps(_maps(compiled.input_shardings, compiled.args_info)))
print("OUTS" + json.dumps(_maps(compiled.output_shardings, compiled.out_info)))
"""


def compiled_event(code: str, tmp_path: Path) -> dict:
    """The ``compiled`` event the playground sent for the case's one jitted call."""
    events = run_in_playground(code + CALL, tmp_path)
    compiled = [e for e in events if e["type"] == "compiled"]
    assert compiled, [e["type"] for e in events]
    assert not compiled[-1].get("capture_errors"), compiled[-1]["capture_errors"]
    return compiled[-1]


# A parser written apart from the hook's: the opcode is the word before "(" after "= <shape>".
INSTRUCTION = re.compile(r"^\s*(?:ROOT\s+)?%?\S+\s*=\s*.*?\s([a-z][a-z0-9-]*)\(")


def plain_compiled(code: str) -> tuple[dict[str, int], list, list]:
    """(collective counts, input shard maps, output shard maps) from a plain process."""
    script = "import json\n" + code.replace("from playground import show_sharding\n", "") + PLAIN_COMPILED
    proc = subprocess.run([PYTHON, "-c", script], cwd="/", env=ENV, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    lines = {line.split("[", 1)[0].split('"', 1)[0]: line for line in proc.stdout.splitlines()}
    hlo = json.loads(lines["HLO"][3:])
    counts = {op: 0 for op in ("all-reduce", "all-gather", "reduce-scatter", "all-to-all", "collective-permute")}
    for line in hlo.splitlines():
        match = INSTRUCTION.match(line)
        if not match:
            continue
        opcode = match.group(1)
        if opcode.endswith("-done"):
            continue
        opcode = opcode.removesuffix("-start")
        if opcode in counts:
            counts[opcode] += 1
    return counts, json.loads(lines["INS"][3:]), json.loads(lines["OUTS"][4:])


@pytest.mark.parametrize("case", sorted(COLLECTIVE_PROGRAMS))
def test_compiled_event_collectives_and_shardings_equal_plain_jax(case: str, tmp_path: Path) -> None:
    code = program(COLLECTIVE_PROGRAMS[case])
    event = compiled_event(code, tmp_path)
    counts, ins, outs = plain_compiled(code)
    assert sum(counts.values()) > 0, "each case is chosen to make XLA insert at least one collective"
    assert {k: event["collectives"].get(k, 0) for k in counts} == counts
    assert [sorted([s["device"], s["index"]] for s in layout["shards"]) for layout in event["in_shardings"]] == ins
    assert [sorted([s["device"], s["index"]] for s in layout["shards"]) for layout in event["out_shardings"]] == outs
