"""JAX Playground: the version, the settings and the wire protocols that server and worker share.

Every installed name lives under ``jaxplay``: ``jaxplay.server`` (the
repository's ``server/``), ``jaxplay.sandbox`` (``sandbox/``) and
``jaxplay.cli`` (the ``jaxplay`` command, above both). A wheel holds the two
folders inside this package (pyproject.toml maps them there). In a checkout
they stay the repository's top-level folders, beside this one, and
``_CheckoutFolders`` finds them there, so a checkout, an editable install and
the sandbox (which binds the folders at the same paths) import alike.
"""

import importlib.machinery
import importlib.util
import sys
from pathlib import Path

__version__ = "0.1.0"

_HERE = Path(__file__).resolve().parent
# The folder that holds this package: a checkout's root, or site-packages.
IMPORT_ROOT = _HERE.parent
# Subpackage -> its folder in a checkout; a wheel has them inside this package instead.
CHECKOUT_FOLDERS = {f"{__name__}.server": IMPORT_ROOT / "server", f"{__name__}.sandbox": IMPORT_ROOT / "sandbox"}


class _CheckoutFolders:
    """Finds ``jaxplay.server`` and ``jaxplay.sandbox`` in a checkout's top-level folders; nothing else."""

    @classmethod
    def find_spec(cls, name: str, path: object = None, target: object = None) -> importlib.machinery.ModuleSpec | None:
        folder = CHECKOUT_FOLDERS.get(name)
        if folder is None or not (folder / "__init__.py").is_file():
            return None
        return importlib.util.spec_from_file_location(name, folder / "__init__.py",
                                                      submodule_search_locations=[str(folder)])


if not (_HERE / "sandbox").is_dir() and _CheckoutFolders not in sys.meta_path:
    sys.meta_path.append(_CheckoutFolders)
