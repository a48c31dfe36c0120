"""Which libraries a run can import on this worker, and what a run is told when one is missing.

The list is the project's own: its core dependencies a program uses (jax,
numpy, matplotlib, treescope: the sandbox's ``SANDBOX_REQUIREMENTS``; the
server's plumbing, such as prometheus_client, is neither visible in a sandbox
nor listed) and the ``worker-libs`` extra in pyproject.toml,
where the versions are pinned. An operator who changes that extra for a worker
image changes what the worker reports. Each is reported under the name a
program imports (``sklearn``, not ``scikit-learn``) with its installed version;
one that is listed but not installed is left out.

No pip at run time: a missing module ends the run with ``missing_module_message``.
"""

from __future__ import annotations

import difflib
import functools
import importlib.metadata
import importlib.util
import os
import re

from jaxplay.sandbox.isolation.exposed_paths import SANDBOX_REQUIREMENTS, normalize

PROJECT = "jaxplay"
EXTRA = "worker-libs"
# Used when the project is not installed as a distribution (a bare source tree).
WITHOUT_METADATA = ("jax", "jaxlib", "numpy")
_REQUIREMENT_NAME = re.compile(r"^\s*([A-Za-z0-9][A-Za-z0-9._-]*)")


LISTED_VARIABLE = "JAXPLAY_LIBRARIES"
_listed_by_worker: list[str] = []


def take_list_from_environment() -> None:
    """In the zygote: keep the worker's list and take it out of the environment runs will see."""
    value = os.environ.pop(LISTED_VARIABLE, "")
    _listed_by_worker[:] = [name for name in value.split(",") if name]


def listed_distributions() -> list[str]:
    """Distribution names from the project's metadata: core dependencies and the worker extra.

    Inside the sandbox the project's own metadata is not visible (only what runs import is):
    the worker computes the list and passes it in ``JAXPLAY_LIBRARIES``."""
    if _listed_by_worker:
        return list(_listed_by_worker)
    if os.environ.get(LISTED_VARIABLE):
        return os.environ[LISTED_VARIABLE].split(",")
    try:
        requirements = importlib.metadata.requires(PROJECT) or []
    except importlib.metadata.PackageNotFoundError:
        return list(WITHOUT_METADATA)
    names: list[str] = []
    for requirement in requirements:
        name_match = _REQUIREMENT_NAME.match(requirement)
        if name_match is None:
            continue
        _, _, marker = requirement.partition(";")
        if "extra" in marker and EXTRA not in marker:
            continue
        name = name_match.group(1)
        core_but_host_only = "extra" not in marker and normalize(name) not in SANDBOX_REQUIREMENTS
        if not core_but_host_only and name not in names:
            names.append(name)
    return names


def import_name(distribution: importlib.metadata.Distribution, fallback: str) -> str:
    """The top-level module a program imports from ``distribution``."""
    wanted = fallback.lower().replace("-", "_")
    top_level: set[str] = set()
    for path in distribution.files or ():
        parts = path.parts
        if not parts[-1].endswith(".py") or parts[0] in ("..", "__pycache__"):
            continue
        top_level.add(parts[0][:-3] if len(parts) == 1 else parts[0])  # a module, or a (namespace) package
    public = sorted(name for name in top_level if not name.startswith("_") and name.isidentifier())
    if wanted in public or not public:
        return wanted
    return min(public, key=len)  # scikit-learn -> sklearn; matplotlib's pylab loses to matplotlib above


@functools.cache
def installed() -> dict[str, str]:
    """``{import name: version}`` of every listed library this worker has, in the listed order.

    Cached: the zygote computes it once and every run forked from it inherits it.
    """
    found: dict[str, str] = {}
    for name in listed_distributions():
        try:
            distribution = importlib.metadata.distribution(name)
        except importlib.metadata.PackageNotFoundError:
            continue
        found[import_name(distribution, name)] = distribution.version
    return found


def is_missing(module: str) -> bool:
    """True when the top-level package of ``module`` cannot be imported at all."""
    top = module.partition(".")[0]
    try:
        return importlib.util.find_spec(top) is None
    except (ImportError, ValueError):
        return True


def missing_module_message(exc: ModuleNotFoundError) -> str | None:
    """What a run says for ``import x`` when x is not on this worker; None when the package exists.

    (``import flax.missing`` with flax installed keeps Python's own message.)
    """
    if not exc.name or not is_missing(exc.name):
        return None
    top = exc.name.partition(".")[0]
    available = installed()
    listing = ", ".join(f"{name} {version}" for name, version in available.items()) or "jax only"
    guess = difflib.get_close_matches(top, list(available), n=1, cutoff=0.75)
    hint = f" Did you mean {guess[0]!r}?" if guess else ""
    return (f"No module named {top!r}: it is not installed on this backend, and packages cannot be "
            f"installed while a program runs.{hint} Installed here: {listing}.")
