"""Keys of lowered modules name installed code the same wherever it is installed: the trusted fill of
one install (another checkout, another image on the host) writes the entries every other one reads."""

from __future__ import annotations

import ast
import os
import subprocess
import sys
import types
from pathlib import Path

import pytest

from jaxplay.sandbox.caches import compile_cache, installed_code
from jaxplay.sandbox.caches.key_writer import KeyWriter
from jaxplay.settings import Settings


def key_text(value: object) -> str:
    writer = KeyWriter(locations=False)
    writer.value(value)
    return "\x1e".join(writer.parts)


def test_an_installed_function_a_parameter_holds_is_keyed_by_its_place_under_its_install_root(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import jax
    from jax._src.random import threefry2x32

    here = threefry2x32.threefry_seed
    root = str(Path(jax.__file__).resolve().parent.parent)
    elsewhere_root = tmp_path / "elsewhere" / "site-packages"
    moved = types.FunctionType(here.__code__.replace(co_filename=str(elsewhere_root) + here.__code__.co_filename[len(root):]),
                               here.__globals__, here.__name__, here.__defaults__, here.__closure__)
    moved.__qualname__, moved.__module__ = here.__qualname__, here.__module__
    roots = installed_code.installed_roots()
    monkeypatch.setattr(installed_code, "installed_roots", lambda: (*roots, os.path.join(str(elsewhere_root), "")))

    # The same function, installed at another path: the same key (a PRNG key's dtype holds it).
    assert key_text(moved) == key_text(here)
    assert str(elsewhere_root) not in key_text(moved) and root not in key_text(here)
    # Anything else about it still counts.
    other_line = types.FunctionType(here.__code__.replace(co_firstlineno=here.__code__.co_firstlineno + 1),
                                    here.__globals__, here.__name__, here.__defaults__, here.__closure__)
    other_line.__qualname__, other_line.__module__ = here.__qualname__, here.__module__
    assert key_text(other_line) != key_text(here)


def test_a_prng_keys_dtype_is_keyed_without_the_install_path() -> None:
    import jax

    key = jax.random.key(0)
    text = key_text(jax.typeof(key) if hasattr(jax, "typeof") else key.aval)
    assert "<installed>/" in text and str(Path(jax.__file__).resolve().parent.parent) not in text


def test_the_shared_folder_changes_with_the_code_that_writes_its_keys(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    copies = []
    for path in compile_cache.KEY_WRITERS:
        copy = tmp_path / path.name
        copy.write_bytes(path.read_bytes())
        copies.append(copy)
    monkeypatch.setattr(compile_cache, "KEY_WRITERS", tuple(copies))
    before = compile_cache.environment_name(Settings(), "cpu")
    copies[0].write_bytes(copies[0].read_bytes() + b"\n# a key written otherwise\n")
    assert compile_cache.environment_name(Settings(), "cpu") != before


def test_every_module_that_writes_lowered_modules_keys_or_entries_names_the_shared_folder() -> None:
    """The modules of sandbox/caches that the lowered-module cache imports, all the way down, write its keys
    and entries: each is in ``KEY_WRITERS``, so a module split out of one of them still changes the folder."""
    folder = Path(compile_cache.__file__).parent
    package = "jaxplay.sandbox.caches"
    writers, waiting = set(), ["lowered_modules"]
    while waiting:
        name = waiting.pop()
        if name in writers:
            continue
        writers.add(name)
        for node in ast.walk(ast.parse((folder / f"{name}.py").read_text())):
            if isinstance(node, ast.ImportFrom) and node.module == package:
                waiting += [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and (node.module or "").startswith(package + "."):
                waiting.append(node.module.rpartition(".")[2])
    assert writers >= {"lowered_modules", "lowering_key", "key_writer", "installed_code", "lowered_entries"}
    assert {f"{name}.py" for name in writers} <= {path.name for path in compile_cache.KEY_WRITERS}


def test_neither_the_cache_nor_the_key_is_a_caller_a_lowered_module_names() -> None:
    """JAX writes the stack its lowering is called from into the module, and the key reads that stack from
    inside ``lowering_key.key``: once the cache is installed, neither module's frames count as the
    program's, wherever the sandbox's own folder is not left out (a fill, a warm-up)."""
    check = ("from jax._src import source_info_util\n"
             "from jaxplay.sandbox.caches import lowered_modules, lowering_key\n"
             "assert lowered_modules.install()\n"
             "print([source_info_util.is_user_filename(m.__file__) for m in (lowered_modules, lowering_key)])\n")
    result = subprocess.run([sys.executable, "-c", check], capture_output=True, text=True, timeout=120,
                            env={**os.environ, "JAX_PLATFORMS": "cpu"})
    assert result.returncode == 0, result.stderr[-2000:]
    assert result.stdout.split() == ["[False,", "False]"]
