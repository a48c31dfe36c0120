"""``profile``: record what ran in a block of code with ``jax.profiler``, drawn as a timeline in the page.

    from playground import profile

    with profile():              # or profile("training step")
        for _ in range(10):
            params = update(params, batch)

The page's Performance tab shows the timeline (your Python, JAX's dispatch,
compiles, XLA's operations and transfers, linked to your functions and
lines) and offers the raw trace for download (Perfetto, https://ui.perfetto.dev,
opens it). Profiling slows Python down while it records; results inside
``with profile():`` are the same as without it. Inside a run profiled as a
whole (the page's "Profile this run"), the block becomes a named region of
that profile. At most three profiles per run.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from contextlib import contextmanager

from jaxplay.sandbox.capture import profile_capture as _capture


def _user_line() -> int | None:
    frame = sys._getframe(2)
    while frame is not None:
        if frame.f_code.co_filename == "<playground>":
            return frame.f_lineno
        frame = frame.f_back
    return None


@contextmanager
def profile(label: str | None = None) -> Iterator[None]:
    """Profile the ``with`` block; ``label`` names it in the page (default: its line)."""
    line = _user_line()
    name = label if label is not None else (f"profile at line {line}" if line is not None else "profile")
    with _capture.region(str(name), line):
        yield


__all__ = ["profile"]
