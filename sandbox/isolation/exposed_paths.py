"""What a sandbox may read besides /usr: the interpreter, our own packages, and the
distributions user code imports, entry by entry.

A whole ``site-packages`` is never exposed: next to jax it may hold anything
the host installed (cloud SDK credentials helpers, private packages, a
server-side database driver). Instead each needed distribution contributes the
top-level entries its RECORD lists (``jax/``, ``jax-0.10.2.dist-info/``,
``numpy.libs/``, ``six.py``), and the sandbox sees a ``site-packages`` made of
those alone. Which distributions are needed is an allow-list (``SANDBOX_REQUIREMENTS``
and ``SANDBOX_EXTRAS`` of jaxplay's own metadata) closed over their installed
requirements, so ``pip install 'jax[cuda12]'`` brings its plugin and CUDA
libraries along. Paths under /usr are left out: bwrap binds /usr whole.
"""

from __future__ import annotations

import logging
import re
import sys
import sysconfig
from collections.abc import Iterable
from importlib import metadata
from pathlib import Path

import jaxplay

log = logging.getLogger("jaxplay.worker")

SANDBOX_DIR = Path(__file__).resolve().parents[1]  # jaxplay.sandbox, in a checkout or a wheel
JAXPLAY_DIR = Path(jaxplay.__file__).resolve().parent
# What of jaxplay a run never imports: the server and the command line stay out of every sandbox.
HOST_ONLY_SUBPACKAGES = frozenset({"server", "cli"})


def own_entries() -> list[Path]:
    """What the zygote and runner import of this project, found on the sandbox's PYTHONPATH at the
    same paths: jaxplay's own modules and jaxplay.sandbox, wherever a checkout or a wheel keeps it."""
    entries = [e for e in JAXPLAY_DIR.iterdir() if e.name not in HOST_ONLY_SUBPACKAGES and e.name != "sandbox"]
    return [*entries, SANDBOX_DIR]
# jaxplay's requirements that user code and the runner import...
SANDBOX_REQUIREMENTS = frozenset({"jax", "jaxlib", "numpy", "treescope", "matplotlib"})
# ...and those only the server, the worker agent (outside the sandbox) or the tests use: the
# metrics library, the PostgreSQL driver, the Redis client and the MCP SDK stay out of every run's reach.
HOST_ONLY_REQUIREMENTS = frozenset({"starlette", "uvicorn", "websockets", "jinja2", "prometheus-client",
                                    "psycopg", "redis", "mcp"})
# Extras of jaxplay whose libraries a run may import.
SANDBOX_EXTRAS = frozenset({"worker-libs"})
DISTRIBUTION = "jaxplay"
SKIPPED_ENTRIES = frozenset({"__pycache__", "..", ""})
_NAME = re.compile(r"^\s*([A-Za-z0-9][A-Za-z0-9._-]*)")
_EXTRA = re.compile(r"""extra\s*==\s*["']([^"']+)["']""")
SHARED_LIBRARY = re.compile(r"^lib[\w.+-]*\.so(\.[\d.]+)?$")
ACCELERATOR_PLUGIN = re.compile(r"^jax-(cuda|rocm)\d*-(plugin|pjrt)$")
# Extras for a distribution's own development, never what a run imports, even when all they name is
# installed: pandas' "test" extra is pytest and pytest-xdist, both in a venv that runs our tests.
DEVELOPMENT_EXTRA = re.compile(r"^(test|tests|testing|dev|develop|development|doc|docs|lint|benchmark|benchmarking)(-.*)?$")


def normalize(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def requirement_name_and_extra(requirement: str) -> tuple[str, str | None]:
    """``'jax-cuda12-plugin[with-cuda]>=0.10; extra == "cuda12"'`` -> ("jax-cuda12-plugin", "cuda12")."""
    match = _NAME.match(requirement)
    if match is None:
        raise ValueError(f"unreadable requirement {requirement!r}")
    _, _, marker = requirement.partition(";")
    extra = _EXTRA.search(marker)
    return normalize(match.group(1)), (normalize(extra.group(1)) if extra else None)


def installed(name: str) -> metadata.Distribution | None:
    try:
        return metadata.distribution(name)
    except metadata.PackageNotFoundError:
        return None


def root_requirements() -> list[str]:
    """The names, from jaxplay's own metadata, of what the sandbox needs."""
    own = installed(DISTRIBUTION)
    if own is None:  # running from a bare checkout: the allow-list is all we know
        return sorted(SANDBOX_REQUIREMENTS)
    roots = []
    for requirement in own.requires or []:
        name, extra = requirement_name_and_extra(requirement)
        if (extra is None and name in SANDBOX_REQUIREMENTS) or (extra in SANDBOX_EXTRAS):
            roots.append(name)
    return roots


def loads_whatever_is_installed(name: str) -> bool:
    """JAX's accelerator plugins load the CUDA/ROCm libraries of their extras that are installed
    (``site-packages/nvidia/...``) before the system's, whether or not the whole extra is."""
    return bool(ACCELERATOR_PLUGIN.match(name))


def needed_distributions(roots: Iterable[str]) -> list[metadata.Distribution]:
    """The installed distributions reachable from ``roots`` through requirements.

    Installed metadata does not record which extras were asked for, so an
    extra counts as installed when every requirement it names is installed:
    ``jax[cuda12]`` brings its plugin along, while a dependency's ``test``
    extra (pytest and friends) stays out of the sandbox, installed or not
    (``DEVELOPMENT_EXTRA``). An accelerator plugin
    is the exception: its libraries count one by one, as the plugin loads them
    (its ``with-cuda`` extra may name a package the host never installed), so a
    run loads exactly the CUDA libraries the worker's own Python loads.
    """
    found: dict[str, metadata.Distribution] = {}
    pending = list(roots)
    while pending:
        name = normalize(pending.pop())
        if name in found:
            continue
        dist = installed(name)
        if dist is None:
            continue
        found[name] = dist
        by_extra: dict[str | None, list[str]] = {}
        for requirement in dist.requires or []:
            required, extra = requirement_name_and_extra(requirement)
            by_extra.setdefault(extra, []).append(required)
        partial = loads_whatever_is_installed(name)
        for extra, names in by_extra.items():
            if extra is not None and DEVELOPMENT_EXTRA.match(extra):
                continue
            if extra is None or all(installed(n) is not None for n in names):
                pending += names
            elif partial:
                pending += [n for n in names if installed(n) is not None]
    return list(found.values())


def distribution_entries(dist: metadata.Distribution) -> set[Path]:
    """The top-level entries of site-packages (or wherever it lives) that belong to ``dist``."""
    site = Path(str(dist.locate_file(""))).absolute()  # as sys.path names it, symlinks kept
    entries: set[Path] = set()
    for file in dist.files or []:
        top = file.parts[0] if file.parts else ""
        if top in SKIPPED_ENTRIES:  # scripts in ../../bin, shared __pycache__
            continue
        entry = site / top
        if entry.exists():
            entries.add(entry)
    if not dist.files:
        log.warning("distribution %s lists no files (no RECORD): the sandbox may not import it",
                    dist.metadata["Name"])
    return entries


def interpreter_paths() -> list[Path]:
    """The interpreter: the venv's executable and pyvenv.cfg, and the base install's
    standard library without its own site-packages."""
    paths = [Path(sys.executable)]
    if sys.prefix != sys.base_prefix:
        paths.append(Path(sys.prefix) / "pyvenv.cfg")
    base = Path(sys.base_prefix).resolve()
    if not is_under_usr(base):
        paths.append(Path(sys.executable).resolve())
        paths += library_entries(base)
    return paths


def library_entries(base: Path) -> list[Path]:
    """What a non-/usr Python install (pyenv's, a JAX runtime's 3.13) needs of its lib/: its shared
    libraries (``libpython3.13.so.1.0``) and its standard library, each ``site-packages`` or
    ``dist-packages`` left out. Nothing else of the install (build files such as ``pkgconfig/``, another
    version's library) and nothing else of the folder it lives in (``~/.pyenv``)."""
    lib = base / "lib"
    stdlib = Path(sysconfig.get_paths()["stdlib"]).resolve()
    chosen: list[Path] = []
    for entry in sorted(lib.iterdir()) if lib.is_dir() else []:
        if entry.resolve() == stdlib:
            chosen += [e for e in sorted(stdlib.iterdir()) if e.name not in ("site-packages", "dist-packages")]
        elif SHARED_LIBRARY.match(entry.name) and entry.is_file():
            chosen.append(entry)
    return chosen


def is_under_usr(path: Path) -> bool:
    return path.parts[:2] == ("/", "usr")


def exposed_paths(roots: Iterable[str] | None = None) -> list[Path]:
    """Every path the sandbox binds read-only besides /usr, none nested in another.

    ``roots``: the distributions runs need, when this interpreter has no jaxplay metadata to read
    them from (a JAX runtime's environment, sandbox/runtimes/store.py)."""
    candidates: list[Path] = [*own_entries(), *interpreter_paths()]
    for dist in needed_distributions(root_requirements() if roots is None else roots):
        candidates += distribution_entries(dist)
    chosen: list[Path] = []
    for path in sorted({p.absolute() for p in candidates if p.exists()}, key=lambda p: len(p.parts)):
        if is_under_usr(path) or any(path.is_relative_to(c) for c in chosen):
            continue
        chosen.append(path)
    return chosen


if __name__ == "__main__":
    # Run by another interpreter (a JAX runtime): ``python -m ...exposed_paths ROOT...`` prints its paths.
    import json

    print(json.dumps([str(p) for p in exposed_paths(sys.argv[1:] or None)]))
