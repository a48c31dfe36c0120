"""What a run reports besides its output, installed before user code runs.

Each capture module exposes ``install(run)`` (patch JAX, matplotlib, ...
before the user's code executes) and ``finish()`` (send what is still pending
when the code has ended); an optional ``before_finish()`` runs for every
module before any ``finish``. ``run`` is the ``SandboxRun`` the worker gave
(jaxplay/worker_protocol.py): what the browser asked (``run.options.inspect``
...) and what the worker added (``run.device_peak`` ...). A capture that
fails to install must not fail the run: it is reported on stderr and skipped.
"""

from __future__ import annotations

import importlib
import sys
import traceback
from typing import Any

from jaxplay import worker_protocol as wp

# Order matters: display wraps matplotlib before user imports it.
# profile_capture last: a whole-run profile starts just before the program and, stopped by its
# ``before_finish``, ends just after it, leaving out the captures' own set-up and end-of-run work.
CAPTURE_MODULES = ("jaxplay.sandbox.capture.display", "jaxplay.sandbox.capture.jit_capture", "jaxplay.sandbox.capture.sharding",
                   "jaxplay.sandbox.capture.determinism", "jaxplay.sandbox.capture.profile_capture")

_installed: list[Any] = []


def install(run: wp.SandboxRun) -> None:
    for name in CAPTURE_MODULES:
        try:
            module = importlib.import_module(name)
            module.install(run)
            _installed.append(module)
        except Exception:
            print(f"[playground] capture {name} could not be installed:", file=sys.stderr)
            traceback.print_exc()


def prepare() -> None:
    """What does not depend on the run's options, done in a spare before the code arrives."""
    for name in CAPTURE_MODULES:
        module = importlib.import_module(name)
        if hasattr(module, "prepare"):
            module.prepare()


def finish() -> None:
    for module in _installed:
        if hasattr(module, "before_finish"):
            try:
                module.before_finish()
            except Exception:
                print(f"[playground] capture {module.__name__} failed at the end of the run:", file=sys.stderr)
                traceback.print_exc()
    for module in _installed:
        try:
            module.finish()
        except Exception:
            print(f"[playground] capture {module.__name__} failed at the end of the run:", file=sys.stderr)
            traceback.print_exc()
