"""Errors that teach: every hint entry appears for its failing program and never for the corrected one;
"did you mean" for misspelled JAX attributes; short install paths; the full traceback on request.

Programs run through the real runner (tests/runner_harness.py), each in a fork of one process that
imported JAX, as in the sandbox's zygote.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from jaxplay.sandbox.learning.error_hints import short_paths
from jaxplay.sandbox.learning.error_hints_data import HINTS
from tests.runner_harness import run_programs

REPO = Path(__file__).resolve().parents[2]

EXTRA = {
    "typo_numpy": "import jax.numpy as jnp\njnp.arang(3)\n",
    "typo_random": "import jax\njax.random.PRNGkey(0)\n",
    "typo_far": "import jax\njax.zzzzqqq\n",
    "user_attribute": "class A: pass\nA().tree_map\n",
    "import_path": "from jax.experimental import no_such_thing\n",
    "filtering_env": (
        "import os\nos.environ['JAX_TRACEBACK_FILTERING'] = 'off'\n"
        "import jax, jax.numpy as jnp\njax.jit(lambda x: x.reshape(7))(jnp.ones(3))\n"
    ),
    "filtering_config": (
        "import jax, jax.numpy as jnp\njax.config.update('jax_traceback_filtering', 'off')\n"
        "jax.jit(lambda x: x.reshape(7))(jnp.ones(3))\n"
    ),
    "filtering_default": "import jax, jax.numpy as jnp\njax.jit(lambda x: x.reshape(7))(jnp.ones(3))\n",
}


@pytest.fixture(scope="module")
def outcomes() -> dict[str, list[dict]]:
    programs = {f"{hint.name}:failing": hint.failing for hint in HINTS}
    programs |= {f"{hint.name}:correct": hint.correct for hint in HINTS}
    programs |= EXTRA
    results = run_programs(list(programs.values()), cwd=str(REPO))
    return dict(zip(programs, results, strict=True))


def error_of(events: list[dict]) -> dict | None:
    errors = [e for e in events if e["type"] == "error"]
    return errors[0] if errors else None


@pytest.mark.parametrize("hint", HINTS, ids=[h.name for h in HINTS])
def test_the_hint_appears_for_the_failing_program(outcomes, hint) -> None:
    error = error_of(outcomes[f"{hint.name}:failing"])
    assert error is not None, f"{hint.name}: the failing program did not fail"
    assert error["ename"] in hint.exceptions
    assert error.get("hint"), f"{hint.name}: no hint for {error['ename']}: {error['message']}"
    # This entry answered, not an earlier one that happens to match too.
    assert error["hint"] == re.search(hint.message, error["message"], re.DOTALL).expand(hint.hint)

@pytest.mark.parametrize("hint", HINTS, ids=[h.name for h in HINTS])
def test_the_corrected_program_runs_without_a_hint(outcomes, hint) -> None:
    events = outcomes[f"{hint.name}:correct"]
    assert error_of(events) is None, error_of(events)
    assert not any("hint" in e for e in events)


def test_hint_texts_name_the_replacement(outcomes) -> None:
    def hint(name: str) -> str:
        return error_of(outcomes[f"{name}:failing"])["hint"]

    assert "jax.example_libraries.stax" in hint("stax")
    assert "jax.example_libraries.optimizers" in hint("optimizers") and "optax" in hint("optimizers")
    assert "jax.example_libraries.optimizers" in hint("minmax")
    assert "jax.tree.map" in hint("tree_functions") and "jax.tree.map" in hint("tree_multimap")
    assert "jax.vmap(f)(x, y)" in hint("vmap_arguments")
    assert "in_axes" in hint("axes_keyword")
    assert "from playground import timeit" in hint("timeit_magic") and "timeit(f, x)" in hint("timeit_magic")
    assert "jax.random.key(0)" in hint("prng_key_seed")
    assert "(3,) against (4,)" in hint("matmul_shapes") and ".T" in hint("matmul_shapes")
    assert "Element-wise add" in hint("broadcast_shapes") and "(3,) and (4,)" in hint("broadcast_shapes")
    assert all(name in hint("tracer_bool") for name in ("jnp.where", "jax.lax.cond", "static_argnums"))


def test_did_you_mean_for_a_misspelled_jax_attribute(outcomes) -> None:
    assert error_of(outcomes["typo_numpy"])["hint"] == "Did you mean jax.numpy.arange?"
    assert "jax.random.PRNGKey" in error_of(outcomes["typo_random"])["hint"]
    assert "hint" not in error_of(outcomes["typo_far"])
    # Not a JAX module: Python's own message stands alone.
    assert "hint" not in error_of(outcomes["user_attribute"])


def test_install_paths_are_shown_from_site_packages(outcomes) -> None:
    error = error_of(outcomes["import_path"])
    assert "site-packages/jax/experimental/__init__.py" in error["message"]
    assert str(REPO) not in error["message"] and "/lib/python" not in error["message"]
    assert short_paths("(/opt/venv/lib/python3.12/site-packages/jax/x.py)") == "(site-packages/jax/x.py)"


def test_traceback_filtering_off_shows_jax_frames(outcomes) -> None:
    default = error_of(outcomes["filtering_default"])
    assert "site-packages/jax" not in default["traceback"] and default["line"] == 2
    for name, line in (("filtering_env", 4), ("filtering_config", 3)):
        error = error_of(outcomes[name])
        assert error["line"] == line, name
        assert f'File "<playground>", line {line}' in error["traceback"]
        assert "site-packages/jax/_src/" in error["traceback"], name
        assert "sandbox/engine/runner.py" not in error["traceback"]
