"""The worker's libraries through the real server, worker and sandbox: importable, reported, preloaded.

On the worker's own JAX and on the newest runtime (``live_on_runtime``), each with the libraries pinned for
its line (sandbox/runtimes/pins.py; the worker's own: pyproject.toml's ``worker-libs``)."""

from __future__ import annotations

import pytest

from jaxplay.sandbox.runtimes import install, pins
from tests.conftest import done_of, output_text
from tests.live_server import LiveServer

# What a program imports, for each library the issue lists and the others the extra pins.
MODULES = ("optax", "flax", "flax.nnx", "equinox", "chex", "einops", "jaxtyping", "orbax.checkpoint", "scipy",
           "scipy.optimize", "pandas", "diffrax", "lineax", "optimistix", "numpyro", "sklearn")
PRELOADED = ("optax", "flax.nnx", "equinox", "chex", "einops", "jaxtyping")


@pytest.fixture(scope="session")
def live(live_on_runtime: LiveServer) -> LiveServer:
    return live_on_runtime


def pinned_versions(live: LiveServer) -> dict[str, str]:
    """The worker-libs, at the versions pinned for the line of the JAX the server's runs get (the worker's
    own: pyproject.toml's, for this Python)."""
    pinned = install.newest_pins()
    (cpu,) = [b for b in live.get_json("/api/backends")["backends"] if b["name"] == "cpu"]
    line = pins.LINES.get(pins.line_of(cpu["jax_version"]))
    return {name: line.libraries[name] for name in pinned} if line else pinned


def test_every_listed_library_imports_in_the_sandbox(live):
    code = f"""
import importlib
for name in {MODULES!r}:
    importlib.import_module(name)
    print("imported", name)
import jax.numpy as jnp, optax, einops
params = {{"w": jnp.ones(3)}}
updates, _ = optax.sgd(0.5).update({{"w": jnp.ones(3)}}, optax.sgd(0.5).init(params))
print(einops.rearrange(jnp.arange(6).reshape(2, 3), "a b -> b a").shape, optax.apply_updates(params, updates)["w"])
import orbax.checkpoint as ocp  # a checkpoint round trip in the run's /tmp, no network
checkpointer = ocp.StandardCheckpointer()
checkpointer.save("/tmp/checkpoint", params)
checkpointer.wait_until_finished()
print(checkpointer.restore("/tmp/checkpoint")["w"])
"""
    events = live.run(code, timeout=180)
    assert done_of(events)["status"] == "ok", events[-3:]
    lines = output_text(events).splitlines()
    assert lines[:-2] == [f"imported {name}" for name in MODULES]
    assert lines[-2:] == ["(3, 2) [0.5 0.5 0.5]", "[1. 1. 1.]"]


def test_the_zygote_preloads_the_common_libraries(live):
    code = f"""
import sys
print([name for name in {PRELOADED!r} if name not in sys.modules])
print("pandas" in sys.modules, "sklearn" in sys.modules)
"""
    events = live.run(code)
    assert done_of(events)["status"] == "ok", events[-3:]
    # Imported before the fork; the heavy, rarely used ones are left to the programs that want them.
    assert output_text(events).splitlines() == ["[]", "False False"]


def test_backends_list_the_installed_libraries_with_their_pinned_versions(live):
    (cpu,) = [b for b in live.get_json("/api/backends")["backends"] if b["name"] == "cpu"]
    libraries = cpu["libraries"]
    assert libraries["jax"] == cpu["jax_version"]
    pinned = pinned_versions(live)
    import_names = {"scikit-learn": "sklearn", "orbax-checkpoint": "orbax"}
    for distribution, version in pinned.items():
        assert libraries[import_names.get(distribution, distribution)] == version, distribution
    assert not {"starlette", "uvicorn", "websockets", "jinja2"} & set(libraries)


def test_a_missing_module_says_it_is_not_installed_and_what_is(live):
    events = live.run("import numpy\nimport torch\n")
    assert done_of(events)["status"] == "error"
    (error,) = [e for e in events if e["type"] == "error"]
    assert error["ename"] == "ModuleNotFoundError" and error["line"] == 2
    assert error["message"].startswith("No module named 'torch': it is not installed on this backend")
    assert f"optax {pinned_versions(live)['optax']}" in error["message"] and "flax" in error["message"]

    events = live.run("import optx\n")
    (error,) = [e for e in events if e["type"] == "error"]
    assert "Did you mean 'optax'?" in error["message"]
    # A module missing from an installed package keeps Python's own message.
    events = live.run("import flax.no_such_module\n")
    (error,) = [e for e in events if e["type"] == "error"]
    assert error["message"] == "No module named 'flax.no_such_module'"
