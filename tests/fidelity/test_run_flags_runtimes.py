"""The allow-list's word on each runtime, checked against that runtime's own JAX and XLA.

For the worker's JAX and every installed runtime: every XLA flag the allow-list says its XLA knows is taken
(XLA aborts a process at backend start with "Unknown flag" otherwise, a crashed run), every one it says its XLA
lacks is in fact unknown there (so the refusal is not a needless one), and every JAX option is one that JAX
takes with a value of its kind.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from jaxplay import run_flags
from jaxplay.sandbox.runtimes import store
from tests.runtimes_server import runtimes_dir

PROBE = r"""
import json, sys
import jax, jaxlib.version
options = json.loads(sys.argv[1])
for name, value in options.items():
    jax.config.update(name, value)
jax.jit(lambda x: x + 1)(1.0).block_until_ready()
print(json.dumps({"jaxlib": jaxlib.version.__version__}))
"""


def interpreters() -> list[tuple[str, Path]]:
    found = [("default", Path(sys.executable))]
    for version in store.installed_versions(runtimes_dir()):
        found.append((version, store.folder_for(runtimes_dir(), version) / "bin" / "python"))
    return found


def example_value(spec: run_flags.FlagSpec) -> bool | int | str:
    if spec.kind == "bool":
        return False
    if spec.kind == "int":
        return spec.high
    return spec.choices[-1] if spec.choices else "algsimp"


def probe(python: Path, xla_flags: str, options: dict[str, object]) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "XLA_FLAGS": xla_flags, "JAX_PLATFORMS": "cpu"}
    return subprocess.run([str(python), "-c", PROBE, json.dumps(options)], capture_output=True, text=True,
                          env=env, timeout=180)


@pytest.mark.parametrize("name, python", interpreters(), ids=[n for n, _ in interpreters()])
def test_the_allow_list_says_what_each_runtimes_xla_and_jax_take(name: str, python: Path) -> None:
    version = probe(python, "", {})
    assert version.returncode == 0, version.stderr[-2000:]
    jaxlib = json.loads(version.stdout.splitlines()[-1])["jaxlib"]
    known = [s for s in run_flags.XLA_SPECS.values() if s.known_to(run_flags.version_of(jaxlib))]
    lacking = [s for s in run_flags.XLA_SPECS.values() if s not in known]
    flags = run_flags.validate({"xla": {s.name: example_value(s) for s in known}}, jaxlib)
    options = {s.name: run_flags.typed_value(s, str(example_value(s)).lower() if s.kind == "bool"
                                             else str(example_value(s)))
               for s in run_flags.CONFIG_SPECS.values() if s.name != "jax_disable_jit"}
    taken = probe(python, flags.xla_flags_text(), options)
    assert taken.returncode == 0, (jaxlib, taken.stderr[-3000:])
    for spec in lacking:
        refused = probe(python, f"--{spec.name}={example_value(spec)}".lower(), {})
        assert refused.returncode != 0 and "Unknown flag" in refused.stderr, (jaxlib, spec.name)
