"""The host's numerical-library settings a run keeps: one named allow-list, nothing else of the worker's environment.

A sandbox starts from an empty environment (``engine/zygote_link.ZygoteLink.zygote_environment``
builds it). Some host settings change what a program computes, though: on
processors that older OpenBLAS builds misdetect, a host sets
``OPENBLAS_CORETYPE`` (and ``OPENBLAS_L2_SIZE``), and without them LAPACK
calls such as ``jnp.linalg.eigvals`` give other last digits, or crash. A run
must compute what plain Python computes on the same host, so the kernel and
thread choices of OpenBLAS, MKL, BLIS and OpenMP pass through. None of them is
a secret or a path: a value that does not look like a setting (letters,
digits and ``.,:=+{}_-`` and spaces, at most ``MAX_VALUE_CHARS``) is left out.
"""

from __future__ import annotations

import re
from collections.abc import Mapping

NUMERICAL_LIBRARY_SETTINGS = frozenset({
    # OpenBLAS (and GotoBLAS, its ancestor, whose names it still reads)
    "OPENBLAS_CORETYPE", "OPENBLAS_L2_SIZE", "OPENBLAS_NUM_THREADS", "OPENBLAS_DEFAULT_NUM_THREADS",
    "OPENBLAS_MAIN_FREE", "GOTOBLAS_MAIN_FREE", "GOTO_NUM_THREADS",
    # Intel MKL
    "MKL_NUM_THREADS", "MKL_DOMAIN_NUM_THREADS", "MKL_DYNAMIC", "MKL_CBWR", "MKL_ENABLE_INSTRUCTIONS",
    "MKL_DEBUG_CPU_TYPE", "MKL_THREADING_LAYER", "MKL_INTERFACE_LAYER",
    # BLIS
    "BLIS_NUM_THREADS", "BLIS_ARCH_TYPE",
    # OpenMP, and the GNU and Intel runtimes' own knobs
    "OMP_NUM_THREADS", "OMP_DYNAMIC", "OMP_PROC_BIND", "OMP_PLACES", "OMP_WAIT_POLICY",
    "OMP_MAX_ACTIVE_LEVELS", "OMP_THREAD_LIMIT", "OMP_STACKSIZE", "GOMP_SPINCOUNT",
    "KMP_AFFINITY", "KMP_BLOCKTIME",
    # Apple Accelerate and numexpr read these for their thread pools
    "VECLIB_MAXIMUM_THREADS", "NUMEXPR_NUM_THREADS", "NUMEXPR_MAX_THREADS",
})
MAX_VALUE_CHARS = 64
_SETTING_VALUE = re.compile(rf"^[A-Za-z0-9.,:=+{{}}_ -]{{1,{MAX_VALUE_CHARS}}}$")


def numerical_library_settings(environ: Mapping[str, str]) -> dict[str, str]:
    """The allow-listed settings of ``environ`` (the worker's), with values that look like settings."""
    return {name: value for name, value in environ.items()
            if name in NUMERICAL_LIBRARY_SETTINGS and _SETTING_VALUE.match(value)}
