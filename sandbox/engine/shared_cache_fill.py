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

        from jax._src import source_info_util

        from jaxplay import worker_protocol as wp
        from jaxplay.sandbox.engine import runner, warmup

        warmup.use_persistent_cache(str(shared))
        # This process starts from `python -c`: its `<string>` frame is none of a run's, and the
        # locations of the functions Inspect shows are part of their cache keys (capture/jit_capture.py).
        source_info_util.register_exclusion("<string>")

        sys.path.insert(0, runner.USERLIB)  # the examples import the playground helpers
        warmup.common_operations()
        programs = sorted(examples.glob("*.py")) + sorted((examples / "gallery").glob("*.py"))
        for path in programs:
            code = warmup.without_sleeps(path.read_text(encoding="utf-8"))
            # As a run executes it (Inspect on, the page's default, then off): the same keys.
            for inspect in (True, False):
                with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
                    if runner.execute(code, wp.SandboxRun(options=wp.JobOptions(inspect=inspect))) != 0:
                        print(f"fill: {path.name} failed (inspect {inspect})", file=sys.stderr)
        (shared / FILLED_STAMP).write_text(time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()))


if __name__ == "__main__":  # a JAX runtime's Python (sandbox/runtimes/launch.py)
    fill_main()
