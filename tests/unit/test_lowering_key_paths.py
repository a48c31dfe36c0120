"""Keys of lowered modules name installed code the same wherever it is installed: the trusted fill of
one install (another checkout, another image on the host) writes the entries every other one reads."""

from __future__ import annotations

import os
import types
from pathlib import Path

import pytest

from jaxplay.sandbox.caches import compile_cache, installed_code
from jaxplay.sandbox.caches.lowering_key import KeyWriter
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
