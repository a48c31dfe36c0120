"""Filling the shared compile cache: the gallery and the common operations, compiled by trusted code.

``CompileCaches.fill`` (sandbox/caches/compile_cache.py) starts this in a
process of its own, outside any sandbox, with a clean environment and the
lowest priority; no run's code ever reaches it, so what it writes may serve
every user.
"""

from __future__ import annotations

import fcntl
import sys
import time
from pathlib import Path

from jaxplay.sandbox.caches.compile_cache import FILLED_STAMP


def fill_main() -> None:
    """In the fill process: ``argv`` is [project, shared folder, examples folder]."""
    shared, examples = Path(sys.argv[2]), Path(sys.argv[3])
    with open(shared / ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # another worker of this host may be filling the same folder
        if (shared / FILLED_STAMP).exists():
            return
        import contextlib
        import io

        from jaxplay.sandbox.engine import runner, warmup

        warmup.use_persistent_cache(str(shared))

        sys.path.insert(0, runner.USERLIB)  # the examples import the playground helpers
        warmup.common_operations()
        programs = sorted(examples.glob("*.py")) + sorted((examples / "gallery").glob("*.py"))
        for path in programs:
            code = path.read_text(encoding="utf-8").replace("time.sleep(", "(lambda *_: None)(")
            try:
                with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
                    exec(compile(code, "<playground>", "exec"), {"__name__": "__main__"})
            except Exception as exc:  # noqa: BLE001 - one example failing leaves the others cached
                print(f"fill: {path.name}: {type(exc).__name__}: {exc}", file=sys.stderr)
        (shared / FILLED_STAMP).write_text(time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()))
