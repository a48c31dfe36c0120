"""Per-run resource limits applied inside the run's process, before user code.

Memory is capped by the sandbox's memory cgroup when the host offers one (see
``sandbox/isolation/cgroups.py``). Without one, the fallback is RLIMIT_DATA, not an
address-space limit: CUDA and XLA reserve huge virtual ranges (PROT_NONE)
that RLIMIT_AS counts and RLIMIT_DATA does not, so a GPU backend can start
and thread stacks can be made. The slack covers those stacks, which scale
with the host's cores (XLA starts threads per core).
"""

from __future__ import annotations

import os
import resource

DATA_SLACK_BYTES = 1 << 30
STACK_SLACK_PER_CORE = 64 << 20


def cores() -> int:
    return os.cpu_count() or 1


def max_processes() -> int:
    """Threads count as processes: JAX starts a few per core, and a run may have a spare beside it."""
    return max(4096, 256 * cores())


def data_limit(memory_limit_bytes: int) -> int:
    return memory_limit_bytes + DATA_SLACK_BYTES + STACK_SLACK_PER_CORE * cores()


def apply_in_child(memory_rlimit_bytes: int, limit_processes: bool) -> None:
    """``memory_rlimit_bytes``: the run's memory limit when no cgroup holds it, else 0."""
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    if memory_rlimit_bytes:
        limit = data_limit(memory_rlimit_bytes)
        resource.setrlimit(resource.RLIMIT_DATA, (limit, limit))
    if limit_processes:
        resource.setrlimit(resource.RLIMIT_NPROC, (max_processes(), max_processes()))


def format_bytes(n: int) -> str:
    for unit in ("bytes", "KiB", "MiB", "GiB"):
        if n < 1024 or unit == "GiB":
            return f"{n:g} {unit}" if unit == "bytes" else f"{n:.3g} {unit}"
        n /= 1024
    return f"{n} GiB"
