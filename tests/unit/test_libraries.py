"""What a worker reports as importable, and the message for an import that is not (sandbox/engine/libraries.py)."""

from __future__ import annotations

import importlib.metadata
import tomllib
from pathlib import Path

import pytest

from jaxplay.sandbox.engine import libraries, library_preload
from jaxplay.sandbox.isolation.exposed_paths import HOST_ONLY_REQUIREMENTS, normalize

PYPROJECT = Path(__file__).resolve().parents[2] / "pyproject.toml"


def test_the_list_is_the_core_dependencies_a_program_uses_and_the_worker_extra():
    project = tomllib.loads(PYPROJECT.read_text())["project"]
    # A library pinned per Python (flax for JAX 0.10 on 3.11, for 0.12 on 3.12+) is listed once.
    extra = list(dict.fromkeys(r.split("==")[0] for r in project["optional-dependencies"][libraries.EXTRA]))
    listed = libraries.listed_distributions()
    assert listed[:3] == ["jax", "jaxlib", "numpy"]
    assert listed[-len(extra):] == extra
    assert "pytest" not in listed
    # The server's plumbing is neither importable in a sandbox nor listed as if it were.
    assert not {normalize(name) for name in listed} & HOST_ONLY_REQUIREMENTS
    assert "prometheus_client" not in listed and "prometheus_client" not in libraries.installed()


def test_each_library_is_reported_under_the_name_a_program_imports():
    installed = libraries.installed()
    assert installed["sklearn"] == importlib.metadata.version("scikit-learn")
    assert installed["orbax"] == importlib.metadata.version("orbax-checkpoint")
    assert installed["matplotlib"] == importlib.metadata.version("matplotlib")
    assert "scikit-learn" not in installed and "pylab" not in installed


def missing(statement: str) -> ModuleNotFoundError:
    with pytest.raises(ModuleNotFoundError) as caught:
        exec(statement, {})
    return caught.value


def test_a_missing_package_is_named_with_what_is_installed_and_a_close_match():
    message = libraries.missing_module_message(missing("import torch.nn"))
    assert message is not None and message.startswith("No module named 'torch': it is not installed on this backend")
    assert f"optax {importlib.metadata.version('optax')}" in message and "Did you mean" not in message
    assert "Did you mean 'einops'?" in (libraries.missing_module_message(missing("import einop")) or "")
    assert not any(name in message for name in ("prometheus", "psycopg", "redis", "uvicorn", "starlette"))


def test_a_missing_submodule_of_an_installed_package_keeps_pythons_message():
    assert libraries.missing_module_message(missing("import flax.no_such_module")) is None


def test_the_preload_list_can_be_replaced_for_a_worker(monkeypatch):
    assert library_preload.modules_to_preload() == library_preload.PRELOADED
    monkeypatch.setenv(library_preload.OVERRIDE_VARIABLE, "none")
    assert library_preload.modules_to_preload() == ()
    monkeypatch.setenv(library_preload.OVERRIDE_VARIABLE, "optax, einops")
    assert library_preload.modules_to_preload() == ("optax", "einops")
