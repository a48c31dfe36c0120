"""Starting this project's sandbox code under a JAX runtime's Python, whichever version that is.

A runtime's interpreter may be another Python than the worker's (3.13 for
JAX 0.12, beside a worker on 3.11). What it runs of this project (the zygote,
the shared cache's fill, the list of exposed paths, the API index) is pure
Python, but the folder that holds ``jaxplay`` must not go on its path: in an
installed worker that folder is the worker's whole site-packages, whose
compiled extensions (numpy, jaxlib, ...) are built for the worker's Python and
would shadow the runtime's own, and whose distributions would answer the
runtime's metadata lookups. So the interpreter is handed ``jaxplay``'s folder
and loads that one package from it (its subpackages follow from there, in a
checkout through ``jaxplay._CheckoutFolders``), then runs the module asked for
as ``__main__`` (sandbox/runtimes/bootstrap.py). Nothing else of the worker's
installation is importable.
"""

from __future__ import annotations

from pathlib import Path

import jaxplay

JAXPLAY_DIR = Path(jaxplay.__file__).resolve().parent
BOOTSTRAP = Path(__file__).resolve().with_name("bootstrap.py")
# Code run with ``-c`` whose first argument is jaxplay's folder: loads that package alone (and takes the
# argument off sys.argv), for programs that run code of their own (tests/runner_harness.py).
LOAD_JAXPLAY = (
    "import sys, runpy\n"
    f"runpy.run_path({str(BOOTSTRAP)!r}, run_name='bootstrap')['load_jaxplay'](sys.argv.pop(1))\n"
)
# No user site-packages, and neither the current folder nor any other writable one on sys.path.
FLAGS = ("-s", "-P")


def command(interpreter: str | Path, module: str, *args: str | Path, flags: tuple[str, ...] = FLAGS) -> list[str]:
    """The command line that runs ``python -m module args...`` with ``interpreter``, jaxplay alone added."""
    return [str(interpreter), *flags, str(BOOTSTRAP), str(JAXPLAY_DIR), module, *map(str, args)]
