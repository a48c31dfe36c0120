"""Per-run resource limits applied inside the run's child, before user code.

Memory is capped by the slot's memory cgroup when the host offers one (see
``sandbox/cgroups.py``); without it, an address-space rlimit is the fallback.
Address space overstates use (XLA reserves thread stacks and arenas), so the
rlimit adds ``ADDRESS_SPACE_SLACK`` to the configured limit.
"""

from __future__ import annotations

import resource
from typing import Any

ADDRESS_SPACE_SLACK = 3 << 30
MAX_PROCESSES = 4096  # threads count too; JAX starts ~20-60 (pids cgroup is the tighter bound)


def apply_in_child(options: dict[str, Any]) -> None:
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    if options.get("memory_rlimit_bytes"):
        limit = int(options["memory_rlimit_bytes"]) + ADDRESS_SPACE_SLACK
        resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
    if options.get("limit_processes"):
        resource.setrlimit(resource.RLIMIT_NPROC, (MAX_PROCESSES, MAX_PROCESSES))


def format_bytes(n: int) -> str:
    for unit in ("bytes", "KiB", "MiB", "GiB"):
        if n < 1024 or unit == "GiB":
            return f"{n:g} {unit}" if unit == "bytes" else f"{n:.3g} {unit}"
        n /= 1024
    return f"{n} GiB"
