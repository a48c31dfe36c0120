"""The public API of the JAX a worker runs, as data for the editor's completion and help.

``python -m jaxplay.sandbox.learning.api_index`` (run with the worker's Python) prints one JSON
object: the versions it was made from and, per module, its public names with
their kind, signature and the first line of their docstring::

    {"format": 2, "jax_version": "0.10.2", "versions": {"jax": "0.10.2", "optax": "0.2.5"},
     "modules": {"jax.numpy": {"sum": {"k": "function", "s": "(a, axis=None, ...)", "d": "Sum of ..."}}}}

``--out DIR`` writes ``DIR/jax-<version>.json`` instead (a build step for a
worker host whose JAX differs from the server's; the server serves files put
in its data folder's ``api-index``). Importing JAX here starts no backend.
"""

from __future__ import annotations

import argparse
import importlib
import inspect
import json
import re
import sys
import types
from pathlib import Path
from typing import Any

# 2: defaults that print a memory address (sentinels such as JAX's ``NoDefault``) are shown by name.
FORMAT = 2
#: The modules a JAX program reaches for; a library's are included when it is installed.
MODULES = (
    "jax", "jax.numpy", "jax.lax", "jax.random", "jax.sharding", "jax.tree", "jax.tree_util", "jax.nn",
    "jax.debug", "jax.scipy", "jax.scipy.special", "jax.experimental", "jax.experimental.shard_map",
    "jax.example_libraries.optimizers", "jax.example_libraries.stax",
    "optax", "flax", "flax.nnx", "flax.linen", "equinox", "numpy", "playground",
)
MAX_SIGNATURE = 240
QUOTED_ANNOTATION = re.compile(r"(: |-> )'([^']*)'")
# `<NoDefault object at 0x7f32...>`, `<function f at 0x...>`: a live address, different in every process.
ADDRESS_REPR = re.compile(r"<(?:function |bound method |class )?([\w.<>]+?)(?: object)? at 0x[0-9a-fA-F]+>")
# `<built-in function print>`: no address, but the name is what a person reads.
BUILTIN_REPR = re.compile(r"<built-in function (\w+)>")
MAX_DOC = 200


def first_doc_line(obj: Any) -> str:
    doc = inspect.getdoc(obj) or ""
    for line in doc.strip().splitlines():
        line = line.strip()
        if line:
            return line[:MAX_DOC]
    return ""


class _Named:
    """A default value shown by its name: a sentinel's repr would print a memory address."""

    def __init__(self, name: str) -> None:
        self.name = name

    def __repr__(self) -> str:
        return self.name


def sentinel_name(value: Any) -> str | None:
    """``NoDefault`` for a value whose repr names only its address; None for a readable repr."""
    try:
        text = repr(value)
    except Exception:  # noqa: BLE001 - a repr that fails is as unreadable as an address
        return type(value).__name__
    match = ADDRESS_REPR.fullmatch(text) or BUILTIN_REPR.fullmatch(text)
    return _last_name(match.group(1)) if match else None


def _last_name(dotted: str) -> str:
    """``NoDefault`` from ``jax._src.config.NoDefault``; ``<lambda>`` stays whole."""
    return dotted if dotted.startswith("<") else dotted.rpartition(".")[2]


def readable_defaults(signature: inspect.Signature) -> inspect.Signature:
    parameters = []
    for parameter in signature.parameters.values():
        name = None if parameter.default is inspect.Parameter.empty else sentinel_name(parameter.default)
        parameters.append(parameter if name is None else parameter.replace(default=_Named(name)))
    return signature.replace(parameters=parameters)


def signature_of(obj: Any) -> str:
    try:
        text = str(readable_defaults(inspect.signature(obj)))
    except (TypeError, ValueError):
        return ""
    # Whatever else printed an address (an annotation, a nested default) keeps only the name.
    text = ADDRESS_REPR.sub(lambda m: _last_name(m.group(1)), BUILTIN_REPR.sub(r"\1", text))
    # String annotations (`x: 'ArrayLike'`) read better bare; default values keep their quotes.
    text = QUOTED_ANNOTATION.sub(r"\1\2", text)
    return text if len(text) <= MAX_SIGNATURE else text[: MAX_SIGNATURE - 1] + "…"


def kind_of(obj: Any) -> str:
    if isinstance(obj, types.ModuleType):
        return "module"
    if inspect.isclass(obj):
        return "class"
    if callable(obj):
        return "function"
    return "value"


def describe_module(module: types.ModuleType) -> dict[str, dict[str, str]]:
    names = getattr(module, "__all__", None)
    if not isinstance(names, list | tuple):
        names = [name for name in dir(module) if not name.startswith("_")]
    entries: dict[str, dict[str, str]] = {}
    for name in sorted(set(names)):
        if name.startswith("_"):
            continue
        try:
            obj = getattr(module, name)
        except Exception:  # noqa: BLE001 - a lazy attribute that fails to load is left out
            continue
        kind = kind_of(obj)
        entry = {"k": kind}
        if kind in ("function", "class"):
            entry["s"] = signature_of(obj)
        doc = first_doc_line(obj) if kind != "value" else ""
        if doc:
            entry["d"] = doc
        entries[name] = entry
    return entries


def build_index(modules: tuple[str, ...] = MODULES) -> dict[str, Any]:
    import jax

    userlib = str(Path(__file__).resolve().parents[1] / "userlib")
    if userlib not in sys.path:
        sys.path.append(userlib)
    index: dict[str, Any] = {"format": FORMAT, "jax_version": jax.__version__, "versions": {}, "modules": {}}
    for name in modules:
        try:
            module = importlib.import_module(name)
        except Exception:  # noqa: BLE001 - not installed in this worker: simply not offered
            continue
        index["modules"][name] = describe_module(module)
        top = name.partition(".")[0]
        version = getattr(sys.modules.get(top), "__version__", None)
        if isinstance(version, str):
            index["versions"][top] = version
    return index


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, help="write DIR/jax-<version>.json instead of printing")
    args = parser.parse_args(argv)
    index = build_index()
    text = json.dumps(index, separators=(",", ":"), sort_keys=True)
    if args.out:
        args.out.mkdir(parents=True, exist_ok=True)
        (args.out / f"jax-{index['jax_version']}.json").write_text(text, encoding="utf-8")
    else:
        sys.stdout.write(text)


if __name__ == "__main__":
    main()
