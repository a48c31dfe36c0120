"""The house's imports: no circles between modules or between packages, and one installed name.

Read from the source with ``ast`` (nothing is imported), counting every import:
at module level, inside functions, and under ``TYPE_CHECKING`` (a type-only
import is still a dependency a reader must follow).
"""

from __future__ import annotations

import ast
from pathlib import Path

import jaxplay

ROOT = jaxplay.IMPORT_ROOT
# Installed package -> its folder in the checkout (as setup.py maps them).
FOLDERS = {"jaxplay": ROOT / "jaxplay", "jaxplay.server": ROOT / "server", "jaxplay.sandbox": ROOT / "sandbox"}
# The runner puts userlib/ on sys.path: its modules import as ``playground``, not through jaxplay.
OWN_TOP_NAMES = ("jaxplay", "server", "sandbox", "jaxplay_cli")
# Where HTTP stops: these import no web framework; the layers above answer requests with what they hold.
WITHOUT_HTTP = ("jaxplay.server.storage", "jaxplay.server.sharing.snippets")
HTTP_FRAMEWORKS = frozenset({"starlette", "uvicorn", "websockets"})


def modules() -> dict[str, Path]:
    found: dict[str, Path] = {}
    for package, folder in FOLDERS.items():
        for path in folder.rglob("*.py"):
            relative = path.relative_to(folder).with_suffix("")
            if relative.parts[0] in ("userlib", "server", "sandbox") and package == "jaxplay":
                continue
            parts = [p for p in relative.parts if p != "__init__"]
            if "userlib" in parts:
                continue
            found[".".join([package, *parts])] = path
    return found


def imports_of(path: Path, name: str, known: dict[str, Path]) -> set[str]:
    """The project modules ``name`` imports (``from a import b`` counts as ``a.b`` when that is a module)."""
    is_package = path.name == "__init__.py"
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = name.split(".")[: len(name.split(".")) - node.level + (1 if is_package else 0)]
                base = ".".join([*anchor, *([base] if base else [])])
            for alias in node.names:
                found.add(f"{base}.{alias.name}" if f"{base}.{alias.name}" in known else base)
    return {m for m in found if m.split(".")[0] in OWN_TOP_NAMES}


def outside_imports_of(path: Path) -> set[str]:
    """The top-level names of the absolute imports of ``path``: ``from starlette.routing import Route`` -> starlette."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found |= {alias.name.split(".")[0] for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and not node.level and node.module:
            found.add(node.module.split(".")[0])
    return found


def graph() -> dict[str, set[str]]:
    known = modules()
    return {name: imports_of(path, name, known) - {name} for name, path in known.items()}


def circles(edges: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one node (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    on_stack: set[str] = set()
    stack: list[str] = []
    found: list[list[str]] = []
    counter = 0
    for start in sorted(edges):
        if start in index:
            continue
        work = [(start, iter(sorted(edges.get(start, ()))))]
        index[start] = low[start] = counter
        counter += 1
        stack.append(start)
        on_stack.add(start)
        while work:
            node, children = work[-1]
            for child in children:
                if child not in edges:
                    continue
                if child not in index:
                    index[child] = low[child] = counter
                    counter += 1
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(edges[child]))))
                    break
                if child in on_stack:
                    low[node] = min(low[node], index[child])
            else:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[node])
                if low[node] == index[node]:
                    component = []
                    while True:
                        member = stack.pop()
                        on_stack.discard(member)
                        component.append(member)
                        if member == node:
                            break
                    if len(component) > 1:
                        found.append(sorted(component))
    return found


def package_of(module: str, edges: dict[str, set[str]]) -> str:
    """The subpackage a module belongs to: ``jaxplay.server.runs.scheduler`` -> ``jaxplay.server.runs``."""
    is_package = any(other.startswith(module + ".") for other in edges)
    return module if is_package else module.rpartition(".")[0]


def test_every_import_of_the_project_goes_through_the_jaxplay_name():
    for module, imported in graph().items():
        stray = sorted(m for m in imported if m.split(".")[0] != "jaxplay")
        assert not stray, f"{module} imports {stray}: import through jaxplay.server / jaxplay.sandbox / jaxplay.cli"


def test_no_import_circles_between_modules():
    assert circles(graph()) == []


def test_no_import_circles_between_packages():
    """A package uses the packages below it, never one above: ``jaxplay.server.ops`` may not import
    ``jaxplay.server.app_state`` when ``jaxplay.server.app`` imports ``ops``."""
    edges = graph()
    packages: dict[str, set[str]] = {}
    for module, imported in edges.items():
        source = package_of(module, edges)
        targets = {package_of(target, edges) for target in imported if target in edges}
        packages.setdefault(source, set()).update(targets - {source})
    assert circles(packages) == []


def test_each_package_says_its_job():
    for folder in FOLDERS.values():
        for init in [folder / "__init__.py", *folder.rglob("*/__init__.py")]:
            doc = ast.get_docstring(ast.parse(init.read_text()))
            assert doc and doc.strip(), f"{init} has no docstring saying what the package holds"


def test_storage_and_the_snippet_model_speak_no_http():
    """Storage is the server's bottom, under every layer that answers requests: it never imports Starlette."""
    checked = {name: path for name, path in modules().items()
               if any(name == top or name.startswith(top + ".") for top in WITHOUT_HTTP)}
    assert "jaxplay.server.storage.interface" in checked and "jaxplay.server.sharing.snippets" in checked
    for name, path in checked.items():
        frameworks = sorted(outside_imports_of(path) & HTTP_FRAMEWORKS)
        assert not frameworks, f"{name} imports {frameworks}: HTTP belongs in the layers above it"


def test_storage_imports_no_other_server_package():
    for module, imported in graph().items():
        if module.startswith("jaxplay.server.storage"):
            above = sorted(m for m in imported
                           if m.startswith("jaxplay.server.") and not m.startswith("jaxplay.server.storage"))
            assert not above, f"{module} imports {above}: storage is the bottom of the server"
