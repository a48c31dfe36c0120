"""The lowered-module cache (sandbox/caches/lowered_modules.py): a re-run loads what an earlier run
lowered, and gets exactly the module JAX would have lowered, or JAX lowers it.

Each run is a fresh fork of a process that imported JAX, as in the sandbox
(tests/lowering_harness.py); only the cache folder carries over between runs.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.lowering_harness import run_programs

PROGRAM = """
import jax, jax.numpy as jnp
from jax import lax

@jax.jit
def step(w, x, y):
    return w - 0.1 * jax.grad(lambda w: jnp.mean((x @ w - y) ** 2))(w)

@jax.jit
def cumulative(xs):
    return lax.scan(lambda c, x: (c + jnp.tanh(x), c), 0.0, xs)

@jax.jit
def branchy(x):
    return lax.cond(x.sum() > 0, lambda v: v * 2, lambda v: -v, x)

x = jax.random.normal(jax.random.key(1), (16, 3))
y = x @ jnp.array([1.0, 2.0, 3.0])
w = step(jnp.zeros(3), x, y)
print(w, cumulative(jnp.arange(5.0))[0], branchy(jnp.ones(4)), jnp.sin(x).sum())
for name, fn, args in [("step", step, (jnp.zeros(3), x, y)), ("cumulative", cumulative, (jnp.arange(5.0),)),
                       ("branchy", branchy, (jnp.ones(4),))]:
    TEXTS[name] = fn.lower(*args).compiler_ir("stablehlo").operation.get_asm(enable_debug_info=True)
"""
MOVED = PROGRAM.replace("from jax import lax\n", "from jax import lax\n\n# three lines further down\n\n")
CALLED_ELSEWHERE = PROGRAM.replace("x = jax.random", "# the functions stay, their calls move down\nx = jax.random")
RUNTIMES = [None, "0.12.0.1", "0.6.2", "0.4.38"]  # the venv's JAX, then the installed runtimes, newest first


@pytest.mark.parametrize("runtime", RUNTIMES, ids=lambda r: r or "venv")
def test_a_rerun_lowers_nothing_and_gets_the_module_jax_lowers(tmp_path: Path, runtime: str | None) -> None:
    plain, first, again = run_programs(tmp_path / "cache", [{"code": PROGRAM, "cached": False}, PROGRAM, PROGRAM],
                                       runtime)
    assert first["unavailable"] is None, first["unavailable"]
    assert first["counts"]["misses"] > 0 and first["counts"]["stored"] == first["counts"]["misses"]
    assert first["counts"]["refused"] == 0, first["counts"]["refusals"]
    assert again["counts"]["misses"] == 0 and again["counts"]["hits"] == first["counts"]["misses"]
    assert again["out"] == first["out"] == plain["out"]
    assert again["texts"] == first["texts"] == plain["texts"]  # locations and all
    assert '"<playground>":7' in again["texts"]["step"]  # the line of its equations


def test_a_function_moved_down_is_lowered_again_with_its_new_lines(tmp_path: Path) -> None:
    first, moved, plain_moved, back = run_programs(
        tmp_path / "cache", [PROGRAM, MOVED, {"code": MOVED, "cached": False}, PROGRAM])
    assert moved["counts"]["misses"] > 0  # the jitted functions, keyed on their locations
    assert moved["texts"] == plain_moved["texts"] != first["texts"]
    assert '"<playground>":10' in moved["texts"]["step"] and '"<playground>":10' not in first["texts"]["step"]
    assert back["counts"]["misses"] == 0 and back["texts"] == first["texts"]


def test_a_function_called_from_another_line_gets_that_lines_locations(tmp_path: Path) -> None:
    # Lowering writes its caller's stack into the module (a jit's name location, the operations its
    # rules trace): the module of an unmoved function called from elsewhere names the new call site.
    first, called, plain_called = run_programs(
        tmp_path / "cache", [PROGRAM, CALLED_ELSEWHERE, {"code": CALLED_ELSEWHERE, "cached": False}])
    assert called["texts"] == plain_called["texts"] != first["texts"]


EAGER = """import jax, jax.numpy as jnp
{gap}x = jnp.arange(6.0)
print(float(jnp.cos(x).sum()))
TEXTS["cos"] = jax.jit(jnp.cos).lower(x).compiler_ir("stablehlo").operation.get_asm(enable_debug_info=True)
"""


@pytest.mark.parametrize("runtime", RUNTIMES, ids=lambda r: r or "venv")
def test_an_eager_operation_hits_wherever_it_is_written(tmp_path: Path, runtime: str | None) -> None:
    # JAX's persistent cache ignores an eager operation's locations too; nobody is shown its module.
    # jnp.cos is itself a jitted function of JAX's own from JAX 0.5 on: called, it is keyed as an eager
    # operation; lowered for the program to read, its module names the lines of this edit.
    first, moved, plain_moved = run_programs(tmp_path / "cache", [
        EAGER.format(gap=""), EAGER.format(gap="\n\n# moved\n"), {"code": EAGER.format(gap="\n\n# moved\n"),
                                                                     "cached": False}], runtime)
    assert first["counts"]["misses"] >= 3
    assert moved["counts"]["misses"] == 1 and moved["out"] == first["out"]  # the lower() alone
    assert moved["texts"] == plain_moved["texts"] != first["texts"]


KEYED = """
import numpy as np, jax, jax.numpy as jnp
{setting}
C = np.array({constant}, np.float32)
f = jax.jit(lambda x: (x * C) @ x)
print(float(f(jnp.arange(3.0))), jnp.arange(3.0).dtype)
"""


def test_constants_configuration_and_xla_flags_are_in_the_key(tmp_path: Path) -> None:
    base = KEYED.format(setting="", constant="[1.0, 2.0, 3.0]")
    variants = [
        KEYED.format(setting="", constant="[1.0, 2.0, 4.0]"),
        KEYED.format(setting='jax.config.update("jax_enable_x64", True)', constant="[1.0, 2.0, 3.0]"),
        KEYED.format(setting='jax.config.update("jax_default_matmul_precision", "highest")',
                     constant="[1.0, 2.0, 3.0]"),
        {"code": base, "env": {"XLA_FLAGS": "--xla_force_host_platform_device_count=4"}},
    ]
    first, changed, x64, precision, flags, again = run_programs(tmp_path / "cache", [base, *variants, base])
    assert first["out"] == "14.0 float32\n" and again["out"] == first["out"]
    assert changed["out"] == "18.0 float32\n"
    assert x64["out"] == "14.0 float64\n"
    for report in (changed, x64, precision, flags):
        assert report["counts"]["misses"] >= 1, report
    assert again["counts"]["misses"] == 0


OWN_RULE = """
import jax, jax.numpy as jnp
from jax.extend.core import Primitive
from jax.interpreters import mlir
op = Primitive("playground_op")
op.def_abstract_eval(lambda x: x)
mlir.register_lowering(op, mlir.lower_fun(lambda x: jnp.{fn}(x), multiple_results=False))
print(jax.jit(lambda x: op.bind(x))(jnp.zeros(2)))
"""


def test_a_lowering_rule_the_program_registers_is_never_cached(tmp_path: Path) -> None:
    # Same primitive name, same program text but the rule: the rule may differ from run to run.
    sine, cosine, sine_again = run_programs(tmp_path / "cache", [OWN_RULE.format(fn="sin"), OWN_RULE.format(fn="cos"),
                                                                 OWN_RULE.format(fn="sin")])
    assert sine["out"] == sine_again["out"] == "[0. 0.]\n"
    assert cosine["out"] == "[1. 1.]\n"
    assert any("lowering rule" in reason for reason in cosine["counts"]["refusals"]), cosine["counts"]


def test_a_function_with_a_host_callback_is_lowered_every_run(tmp_path: Path) -> None:
    code = "import jax, jax.numpy as jnp\njax.jit(lambda x: jax.debug.print('saw {}', x) or x + 1)(jnp.ones(2))\n"
    first, again = run_programs(tmp_path / "cache", [code, code])
    assert first["out"] == again["out"] == "saw [1. 1.]\n"
    assert again["counts"]["misses"] >= 1
    assert not [p for p in (tmp_path / "cache").iterdir() if p.name.startswith("jit__lambda") and
                p.name.endswith("-lowered")]


def _damage(path: Path, how: int) -> None:
    data = path.read_bytes()
    header_end = data.index(b"\n", len(b"jaxplay-lowered 1\n")) + 1
    if how == 0:
        path.write_bytes(b"garbage" * 50)
    elif how == 1:
        path.write_bytes(data.replace(b'"key": "', b'"key": "0', 1))
    elif how == 2:
        path.write_bytes(data[:header_end] + b"\x00" * (len(data) - header_end))
    else:
        path.write_bytes(data[:-10])


def test_a_bad_entry_costs_a_lowering_never_the_run(tmp_path: Path) -> None:
    cache = tmp_path / "cache"
    (first,) = run_programs(cache, [PROGRAM])
    entries = sorted(p for p in cache.iterdir() if p.name.endswith("-lowered"))
    assert len(entries) == first["counts"]["stored"] >= 4
    for index, path in enumerate(entries):
        _damage(path, index % 4)
    (damaged,) = run_programs(cache, [PROGRAM])
    assert damaged["out"] == first["out"] and damaged["texts"] == first["texts"]
    assert damaged["counts"]["bad_entries"] == len(entries) and damaged["counts"]["hits"] == 0


MESH = """
import jax, jax.numpy as jnp, numpy as np
from jax.sharding import Mesh, NamedSharding, PartitionSpec as P
mesh = Mesh(np.array(jax.devices()){order}, ("x",))
x = jax.device_put(jnp.arange(16.0), NamedSharding(mesh, P("x")))
f = jax.jit(lambda v: v * 2, out_shardings=NamedSharding(mesh, P("x")))
y = f(x)
print([s.device.id for s in y.addressable_shards][:3], float(y.sum()))
TEXTS["f"] = f.lower(x).as_text()
"""


def test_a_mesh_with_its_devices_in_another_order_is_another_module(tmp_path: Path) -> None:
    forward, backward = MESH.format(order=""), MESH.format(order="[::-1]")
    first, reversed_, plain_reversed, again = run_programs(
        tmp_path / "cache", [forward, backward, {"code": backward, "cached": False}, forward])
    assert reversed_["out"] == plain_reversed["out"] != first["out"]
    assert reversed_["texts"] == plain_reversed["texts"]
    assert reversed_["counts"]["misses"] >= 1
    assert again["counts"]["misses"] == 0 and again["texts"] == first["texts"]


EQUIVALENT_SHARDINGS = """
import jax, jax.numpy as jnp
from jax.sharding import NamedSharding, PartitionSpec as P
compiles = []
jax.monitoring.register_event_duration_secs_listener(
    lambda name, secs, **kw: compiles.append(name) if name == "/jax/core/compile/backend_compile_duration" else None)
mesh = jax.make_mesh((8,), ("data",))
w = jax.device_put(jnp.zeros(4), NamedSharding(mesh, P()))
step = jax.jit(lambda w: w * 0.5 + 1.0)
for _ in range(3):
    w = step(w)  # from the second call on, its argument's sharding reads P(None,): JAX's same lowering
print(w.sharding.spec, len(compiles))
"""


@pytest.mark.parametrize("runtime", [None, "0.12.0.1"], ids=lambda r: r or "venv")
def test_shardings_jax_holds_equivalent_share_one_module_and_one_compile_as_in_plain_jax(
        tmp_path: Path, runtime: str | None) -> None:
    plain, first, again = run_programs(
        tmp_path / "cache", [{"code": EQUIVALENT_SHARDINGS, "cached": False}, EQUIVALENT_SHARDINGS,
                             EQUIVALENT_SHARDINGS], runtime)
    # A re-run that loaded the first call's module from the cache lowered the second call again (its
    # sharding written otherwise) and compiled it once more, where JAX's own cache holds them the same.
    assert again["out"] == first["out"] == plain["out"]


LOGGED_COMPILES = """
import logging
import jax, jax.numpy as jnp
seen = []
class Seen(logging.Handler):
    def emit(self, record):
        seen.append(record.getMessage().split(" with ")[0])
logging.getLogger("jax").addHandler(Seen())
jax.config.update("jax_log_compiles", True)
f = jax.jit(lambda x: x * 3 + 1)
print(f(jnp.arange(5.0)), [message for message in seen if message.startswith("Compiling ")])
"""


def test_a_program_that_logs_its_compiles_sees_every_lowering_it_would_see_in_plain_jax(tmp_path: Path) -> None:
    plain, first, again = run_programs(
        tmp_path / "cache", [{"code": LOGGED_COMPILES, "cached": False}, LOGGED_COMPILES, LOGGED_COMPILES])
    # A re-run that loaded its modules logged no "Compiling jit(<lambda>) with global shapes ..." line:
    # JAX writes it while lowering, which a loaded module skips.
    assert "Compiling jit(<lambda>)" in plain["out"]
    assert again["out"] == first["out"] == plain["out"]
