"""The page's imports: ``frontend/src`` is one level of folders, each importing only itself and the folders
below it in ``LAYERS``, with no circle between modules or between folders.

Read from the source (nothing is run): every static ``import``/``export ... from``, side-effect import,
``declare module`` augmentation, dynamic ``import()`` and ``import.meta.glob`` with a relative path counts,
type-only ones included (a type is still a dependency a reader must follow). Stylesheets and raw files a
module imports count for the folder order too.
"""

from __future__ import annotations

import re
from pathlib import Path, PurePosixPath

from tests.unit.test_import_layers import circles

SRC = Path(__file__).resolve().parents[2] / "frontend" / "src"

# Bottom first: a folder may import itself and the folders before it, never one after it.
# docs/frontend.md lists the same order with each folder's job.
LAYERS = (
    "examples",     # programs the page ships (raw text; imports nothing)
    "core",         # DOM helpers, the page's boot data, the design tokens
    "wire",         # the protocol mirror and the one WebSocket
    "editor",       # CodeMirror, its contract (EditorAccess), drafts, completion and API help
    "ir",           # what JAX compiled as every view shows it: Inspect events, number formats, IR views
    "panel",        # what a panel is and is given; hint actions under an error
    "performance",  # the Performance tab: roofline, timelines, the performance events
    "flags",        # JAX options and XLA flags: the editor, the Flags tab
    "passes",       # XLA's pass pipeline of one compilation (shown inside Inspect)
    "panes",        # IR panes side by side, coloured by source line (shown inside Inspect)
    "memory",       # where a compilation's memory goes; the out-of-memory hint (shown inside Inspect)
    "sharding",     # the Sharding tab
    "output",       # the Output tab and how display values are drawn
    "inspect",      # the Inspect tab
    "compare",      # the Compare tab
    "gallery",      # the Gallery tab
    "runtimes",     # backends and JAX versions: the pickers, a link's runtime
    "sharing",      # Share, export, embeds, the recorded-run banner
    "shell",        # the page frame: the app, tabs, splitter, status line, the panel registry
    "rooms",        # workshop rooms, which drive the app
)
ENTRY = "main.ts"  # the only module at the top: above every folder

STATIC = re.compile(r"^(?:import|export)\s+(?:type\s+)?[\w$*{},\s]*?\bfrom\s*\"([^\"]+)\"", re.M)
SIDE_EFFECT = re.compile(r"^import\s*\"([^\"]+)\"", re.M)
AUGMENTED = re.compile(r"^declare\s+module\s+\"([^\"]+)\"", re.M)
DYNAMIC = re.compile(r"\bimport(?:\.meta\.glob)?\(\s*\"([^\"]+)\"")


def modules(src: Path = SRC) -> list[PurePosixPath]:
    return sorted(PurePosixPath(p.relative_to(src).as_posix()) for p in src.rglob("*.ts"))


def specifiers(text: str) -> list[str]:
    return [m.group(1) for pattern in (STATIC, SIDE_EFFECT, AUGMENTED, DYNAMIC) for m in pattern.finditer(text)]


def resolve(module: PurePosixPath, spec: str, src: Path) -> PurePosixPath | None:
    """The file a relative specifier names (``?raw`` and such dropped; a glob names its folder's files)."""
    path = spec.split("?", 1)[0]
    joined = PurePosixPath(*_normalized(module.parent / path).parts)
    if "*" in joined.name:
        return joined.parent / "*"
    for candidate in (joined, joined.with_name(joined.name + ".ts"), joined / "index.ts"):
        if (src / candidate).is_file():
            return candidate
    return None


def _normalized(path: PurePosixPath) -> PurePosixPath:
    parts: list[str] = []
    for part in path.parts:
        if part == "..":
            parts.pop()
        elif part != ".":
            parts.append(part)
    return PurePosixPath(*parts)


def imports(src: Path = SRC) -> dict[PurePosixPath, set[PurePosixPath]]:
    """Each module's relative imports, resolved to files under ``src``; one that names no file fails here."""
    found: dict[PurePosixPath, set[PurePosixPath]] = {}
    for module in modules(src):
        targets: set[PurePosixPath] = set()
        for spec in specifiers((src / module).read_text()):
            if not spec.startswith("."):
                continue  # a package from node_modules
            target = resolve(module, spec, src)
            assert target is not None, f"{module} imports {spec!r}, which names no file under frontend/src"
            targets.add(target)
        found[module] = targets
    return found


def folder_of(path: PurePosixPath) -> str:
    return path.parts[0] if len(path.parts) > 1 else ENTRY


def rank(folder: str) -> int:
    return len(LAYERS) if folder == ENTRY else LAYERS.index(folder)


def module_graph(edges: dict[PurePosixPath, set[PurePosixPath]]) -> dict[str, set[str]]:
    return {str(m): {str(t) for t in targets if t.suffix == ".ts"} - {str(m)} for m, targets in edges.items()}


def folder_graph(edges: dict[PurePosixPath, set[PurePosixPath]]) -> dict[str, set[str]]:
    folders: dict[str, set[str]] = {}
    for module, targets in edges.items():
        source = folder_of(module)
        folders.setdefault(source, set()).update({folder_of(t) for t in targets} - {source})
    return folders


def downward_violations(edges: dict[PurePosixPath, set[PurePosixPath]]) -> list[str]:
    return sorted(f"{module} imports {target} ({folder_of(module)} may import only {', '.join(LAYERS[:rank(folder_of(module))])})"
                  for module, targets in edges.items() for target in targets
                  if rank(folder_of(target)) > rank(folder_of(module)))


def test_the_reader_finds_every_kind_of_import():
    text = ('import { a,\n  b } from "./x";\nimport type { C } from "../y/c";\nexport type * from "./z";\n'
            'import "./side.css";\ndeclare module "../wire/protocol" {\n}\n'
            'const s = import.meta.glob("../examples/gallery/*.py", { eager: true });\n'
            '/**\n *     declare module "../in_a_comment" {\n *     import { no } from "./in_a_comment";\n */\n'
            'const url = "https://example.org/from";\n')
    assert specifiers(text) == ["./x", "../y/c", "./z", "./side.css", "../wire/protocol", "../examples/gallery/*.py"]


def test_every_folder_is_one_level_deep_and_has_its_place_in_the_order():
    folders = {p.name for p in SRC.iterdir() if p.is_dir()}
    assert folders == set(LAYERS), f"folders without a place in LAYERS: {sorted(folders - set(LAYERS))}; " \
                                   f"places without a folder: {sorted(set(LAYERS) - folders)}"
    nested = [str(m) for m in modules() if len(m.parts) > 2]
    assert not nested, f"modules below the first level of folders: {nested}"
    assert [str(m) for m in modules() if len(m.parts) == 1] == [ENTRY]


def test_no_import_circles_between_modules():
    assert circles(module_graph(imports())) == []


def test_no_import_circles_between_folders():
    assert circles(folder_graph(imports())) == []


def test_folders_import_only_downward():
    assert downward_violations(imports()) == []


def test_every_stylesheet_is_imported():
    imported = {t for targets in imports().values() for t in targets}
    orphans = sorted(str(p.relative_to(SRC)) for p in SRC.rglob("*.css")
                     if PurePosixPath(p.relative_to(SRC).as_posix()) not in imported)
    assert not orphans, f"stylesheets no module imports: {orphans}"


def test_a_planted_circle_and_an_upward_import_are_found(tmp_path: Path):
    """The checks above on a small tree that breaks both rules: core imports shell, which imports core."""
    (tmp_path / "core").mkdir()
    (tmp_path / "shell").mkdir()
    (tmp_path / "core" / "dom.ts").write_text('import type { App } from "../shell/app";\nexport const x = 1;\n')
    (tmp_path / "shell" / "app.ts").write_text('import { x } from "../core/dom";\nexport class App {}\n')
    (tmp_path / ENTRY).write_text('import { App } from "./shell/app";\n')
    edges = imports(tmp_path)
    assert circles(module_graph(edges)) == [["core/dom.ts", "shell/app.ts"]]
    assert circles(folder_graph(edges)) == [["core", "shell"]]
    assert downward_violations(edges) == [
        "core/dom.ts imports shell/app.ts (core may import only examples)"]
