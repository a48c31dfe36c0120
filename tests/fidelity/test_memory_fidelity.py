"""The memory view tells the truth on every JAX the playground offers.

For this checkout's JAX and each installed runtime (``make runtimes``: 0.4.38, 0.6.2, and 0.12 where
installed), the inspect fidelity program plus a few memory-heavy functions run twice, each in a process
of its own with the worker's 8 CPU devices: through the playground runner (forked from a process of that
runtime's Python that imported JAX, tests/runner_harness.py), and in a plain process that asks
``compiled.memory_analysis()`` for each case. For every compilation:

- the view's argument, output, alias and temp totals equal ``memory_analysis()``'s, byte for byte;
- what is listed alive at the peak (plus the summed rest) adds up to the peak, and the peak lies between
  what must be alive at the end (arguments and outputs, a donated buffer once) and that plus every
  temporary;
- where XLA kept its heap simulator's trace (0.4.38, 0.6.2), its peak equals the view's for the same
  buffers: XLA's own account of when its temporaries are alive.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from jaxplay.sandbox.runtimes import store
from tests import runner_harness
from tests.fidelity.test_inspect_fidelity import PROGRAM as INSPECT_PROGRAM
from tests.runtimes_server import require_runtimes, runtimes_dir

REPO = Path(__file__).resolve().parents[2]
# A runtime's interpreter finds this checkout's jaxplay on PYTHONPATH, as the worker's zygote does.
EIGHT_DEVICES = {"XLA_FLAGS": "--xla_force_host_platform_device_count=8", "JAX_PLATFORMS": "cpu",
                 "PYTHONPATH": str(REPO)}
ENV = {**os.environ, **EIGHT_DEVICES}

PROGRAM = INSPECT_PROGRAM + textwrap.dedent("""
    @jax.jit
    def train_step(w, x):
        h = jnp.tanh(x @ w)
        grad = jax.grad(lambda w: jnp.mean(jnp.tanh(x @ w) ** 2))(w)
        return jnp.mean((h @ w.T - x) ** 2), w - 0.1 * grad

    @functools.partial(jax.jit, donate_argnums=0)
    def rnn(h, xs, w):
        def cell(h, x):
            h = jnp.tanh(h @ w + x)
            return h, h.sum()
        return lax.scan(cell, h, xs)

    call(train_step, jnp.ones((128, 128)), jnp.ones((64, 128)))
    call(rnn, jnp.ones((32, 64)), jnp.ones((12, 32, 64)), jnp.ones((64, 64)))
""")
CASES = 14

REFERENCE = """
import json, linecache, sys
code = open(sys.argv[1]).read()
linecache.cache["<playground>"] = (len(code), None, code.splitlines(True), "<playground>")
namespace = {"__name__": "__main__"}
exec(compile(code, "<playground>", "exec"), namespace)
FIELDS = ("argument_size_in_bytes", "output_size_in_bytes", "alias_size_in_bytes", "temp_size_in_bytes")
results = []
for fn, args, kwargs in namespace["CASES"]:
    stats = fn.lower(*args, **kwargs).compile().memory_analysis()
    results.append({name: int(getattr(stats, name)) for name in FIELDS})
print(json.dumps(results))
"""


def interpreters() -> list[tuple[str, str]]:
    require_runtimes()
    found = [("this checkout", sys.executable)]
    for version in store.installed_versions(runtimes_dir()):
        found.append((version, str(store.folder_for(runtimes_dir(), version) / "bin" / "python")))
    return found


def captured(python: str, program: Path, tmp_path: Path) -> list[dict]:
    ran = runner_harness.run_program(program.read_text(), tmp_path / "run", EIGHT_DEVICES, python, timeout=300)
    assert ran.status == 0, ran.stderr[-3000:]
    return ran.events


def reference(python: str, program: Path, tmp_path: Path) -> list[dict]:
    script = tmp_path / "reference.py"
    script.write_text(REFERENCE)
    result = subprocess.run([python, str(script), str(program)], cwd=tmp_path, env=ENV, capture_output=True,
                            timeout=300)
    assert result.returncode == 0, result.stderr.decode()[-3000:]
    return json.loads(result.stdout)


@pytest.mark.parametrize("runtime", range(4), ids=["default", "runtime-1", "runtime-2", "runtime-3"])
def test_memory_view_totals_equal_memory_analysis_and_the_peak_adds_up(runtime: int, tmp_path: Path) -> None:
    available = interpreters()
    if runtime >= len(available):
        pytest.skip(f"only {len(available)} runtimes are installed")
    name, python = available[runtime]
    program = tmp_path / "prog.py"
    program.write_text(PROGRAM)
    compiled = [e for e in captured(python, program, tmp_path) if e["type"] == "compiled"]
    expected = reference(python, program, tmp_path)
    assert len(compiled) == len(expected) == CASES, name
    simulated = 0
    for event, analysis in zip(compiled, expected, strict=True):
        label = f"JAX {name}: {event['key']} {event['fn']}"
        view = event["memory_view"]
        assert view is not None, f"{label}: {event.get('capture_errors')}"
        totals = view["totals"]
        assert {"argument_size_in_bytes": totals["argument"], "output_size_in_bytes": totals["output"],
                "alias_size_in_bytes": totals["alias"], "temp_size_in_bytes": totals["temp"]} == analysis, label
        peak = view["peak"]["bytes"]
        listed = sum(b["bytes"] for b in view["at_peak"]) + (view["at_peak_others"] or {}).get("bytes", 0)
        assert listed == peak == sum(view["peak"]["by_kind"].values()), label
        sizes = [b["bytes"] for b in view["at_peak"]]
        assert sizes == sorted(sizes, reverse=True), label
        resident = totals["argument"] + totals["output"] - totals["alias"]
        assert resident <= peak <= resident + totals["temp"], label
        assert max(sum(step[1:]) for step in view["steps"]) == peak, label
        for xla_peak, view_peak in view.get("heap_simulator", []):
            assert xla_peak == view_peak, f"{label}: XLA's heap simulator peaks at {xla_peak}, the view at {view_peak}"
            simulated += 1
    if name in ("0.4.38", "0.6.2"):
        assert simulated >= 5, f"JAX {name} kept heap simulator traces for only {simulated} compilations"
    donated = next(e for e in compiled if e["fn"] == "rnn")["memory_view"]
    assert donated["totals"]["alias"] > 0 and any(b["kind"] == "aliased" for b in donated["at_peak"])
