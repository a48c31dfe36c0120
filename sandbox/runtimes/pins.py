"""Which library versions go with each JAX line: the one table the installer and ``make`` use.

A runtime is pinned jax and jaxlib plus the libraries a program may import
(the ``worker-libs`` extra of pyproject.toml names them; its pins are those
of this project's own JAX, 0.10). Older JAX needs older libraries: Flax, Optax and the others
drop support for old JAX releases, and a library built for a newer JAX fails at
import. Each line below was resolved by pip against its JAX (``pip install
--dry-run``); the lines marked ``tested`` are installed by ``make test`` and run
the capture tests (tests/live/test_runtimes_live.py).

``requirements("0.4.38")`` gives the pip arguments for one runtime: the
line's pins, with jax and jaxlib set to exactly that version.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

VERSION_PATTERN = re.compile(r"^\d+\.\d+\.\d+(\.\d+)?$")
# The oldest jaxlib PyPI has for Python 3.11 or newer (3.11 has 0.4.13 to 0.10.2; 3.12+ from 0.4.17 on).
OLDEST_SUPPORTED = (0, 4, 13)
# JAX 0.11 dropped Python 3.11: from this line on a runtime's venv needs 3.12 or newer
# (sandbox/runtimes/pythons.py finds one; the package index says exactly which, this is the fallback).
NEEDS_PYTHON_312_FROM = (0, 11)


@dataclass(frozen=True)
class Line:
    """One JAX line (``0.4``): its newest release and the libraries that go with it."""
    newest: str
    libraries: dict[str, str]
    tested: bool = False
    notes: tuple[str, ...] = field(default=())


# Libraries every line shares: they do not depend on JAX's version.
_COMMON = {"einops": "0.8.1"}

LINES: dict[str, Line] = {
    "0.4": Line("0.4.38", {
        "numpy": "2.2.1", "scipy": "1.14.1", "matplotlib": "3.10.0", "treescope": "0.1.7",
        "optax": "0.2.4", "flax": "0.10.2", "equinox": "0.11.11", "chex": "0.1.88", "einops": "0.8.0",
        "jaxtyping": "0.2.36", "orbax-checkpoint": "0.10.3", "pandas": "2.2.3", "diffrax": "0.6.2",
        "lineax": "0.0.7", "optimistix": "0.0.10", "numpyro": "0.16.1", "scikit-learn": "1.6.0",
    }, tested=True),
    "0.5": Line("0.5.3", {
        "numpy": "2.2.4", "scipy": "1.15.2", "matplotlib": "3.10.1", "treescope": "0.1.9",
        "optax": "0.2.4", "flax": "0.10.4", "equinox": "0.11.12", "chex": "0.1.89", **_COMMON,
        "jaxtyping": "0.3.0", "orbax-checkpoint": "0.11.10", "pandas": "2.2.3", "diffrax": "0.6.2",
        "lineax": "0.0.7", "optimistix": "0.0.10", "numpyro": "0.18.0", "scikit-learn": "1.6.1",
    }),
    "0.6": Line("0.6.2", {
        "numpy": "2.3.0", "scipy": "1.15.3", "matplotlib": "3.10.3", "treescope": "0.1.9",
        "optax": "0.2.5", "flax": "0.10.7", "equinox": "0.12.2", "chex": "0.1.89", **_COMMON,
        "jaxtyping": "0.3.2", "orbax-checkpoint": "0.11.16", "pandas": "2.3.0", "diffrax": "0.7.0",
        "lineax": "0.0.8", "optimistix": "0.0.11", "numpyro": "0.18.0", "scikit-learn": "1.7.0",
    }, tested=True),
    "0.7": Line("0.7.2", {
        "numpy": "2.3.3", "scipy": "1.16.2", "matplotlib": "3.10.6", "treescope": "0.1.10",
        "optax": "0.2.6", "flax": "0.12.0", "equinox": "0.13.1", "chex": "0.1.91", **_COMMON,
        "jaxtyping": "0.3.3", "orbax-checkpoint": "0.11.25", "pandas": "2.3.3", "diffrax": "0.7.0",
        "lineax": "0.0.8", "optimistix": "0.0.11", "numpyro": "0.19.0", "scikit-learn": "1.7.2",
    }),
    "0.8": Line("0.8.3", _LATE := {
        "numpy": "2.4.6", "scipy": "1.17.1", "matplotlib": "3.11.2", "treescope": "0.1.10",
        "optax": "0.2.8", "flax": "0.12.6", "equinox": "0.13.8", "chex": "0.1.92", "einops": "0.8.2",
        "jaxtyping": "0.3.11", "orbax-checkpoint": "0.12.8", "pandas": "3.1.1", "diffrax": "0.7.2",
        "lineax": "0.1.0", "optimistix": "0.1.0", "numpyro": "0.22.0", "scikit-learn": "1.9.1",
    }),
    "0.9": Line("0.9.2", dict(_LATE)),
    # 0.10: the worker-libs pins of pyproject.toml (``requirements``' newest_pins), this project's own JAX.
    # 0.11 and 0.12 need Python 3.12 or newer (``python_floor``). Resolved by pip under Python 3.13 as the
    # newest releases that install together with each JAX, then imported and run there
    # (tests/live/test_libraries_live.py on the runtime).
    "0.11": Line("0.11.2", _CURRENT := {
        "numpy": "2.5.5", "scipy": "1.18.1", "matplotlib": "3.11.2", "treescope": "0.1.10",
        "optax": "0.2.8", "flax": "0.12.12", "equinox": "0.13.8", "chex": "0.1.92", "einops": "0.8.2",
        "jaxtyping": "0.3.11", "orbax-checkpoint": "0.12.8", "pandas": "3.1.1", "diffrax": "0.7.2",
        "lineax": "0.1.1", "optimistix": "0.1.0", "numpyro": "0.22.0", "scikit-learn": "1.9.1",
    }),
    "0.12": Line("0.12.0.1", dict(_CURRENT), tested=True),
}


def line_of(version: str) -> str:
    """``0.4.38`` -> ``0.4``."""
    major, minor, *_ = version.split(".")
    return f"{major}.{minor}"


def check_version(version: str) -> str:
    """The version if PyPI can have it for a Python this project runs; else ValueError naming what to give."""
    if not VERSION_PATTERN.match(version):
        raise ValueError(f"{version!r} is not a JAX version: give one such as 0.4.38.")
    if tuple(int(part) for part in version.split(".")[:3]) < OLDEST_SUPPORTED:
        raise ValueError(f"JAX {version} is older than the oldest jaxlib PyPI has for Python 3.11 and newer: "
                         f"give {'.'.join(map(str, OLDEST_SUPPORTED))} or later.")
    return version


def python_floor(version: str) -> tuple[int, int]:
    """The oldest Python JAX ``version`` has wheels for, as far as this table knows."""
    line = tuple(int(part) for part in line_of(version).split("."))
    return (3, 12) if line >= NEEDS_PYTHON_312_FROM else (3, 11)


def requirements(version: str, newest_pins: dict[str, str] | None = None) -> list[str]:
    """pip's arguments for a runtime of JAX ``version``.

    A line not in ``LINES`` uses ``newest_pins`` (the worker's own ``worker-libs``, for the newest
    line) or, without them, only jax and jaxlib (pip then picks libraries that declare support)."""
    check_version(version)
    line = LINES.get(line_of(version))
    libraries = dict(line.libraries) if line is not None else dict(newest_pins or {})
    pinned = [f"{name}=={pin}" for name, pin in sorted(libraries.items()) if name not in ("jax", "jaxlib")]
    return [f"jax=={version}", f"jaxlib=={version}", *pinned]


def newest_of_line(line: str) -> str | None:
    entry = LINES.get(line)
    return entry.newest if entry else None
