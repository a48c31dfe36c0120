"""Runs programs as a warm sandbox does, for the lowered-module tests: each in a fork of one process.

The parent imports JAX (and installs the lowered-module cache) as the zygote
does, without starting a backend; each program then runs in a fresh fork that
starts its backend, points JAX's persistent cache at a folder shared by the
runs, and executes the program as ``<playground>`` through the real runner's
exclusions. So every run starts with JAX's in-memory caches empty, exactly as
a run in the playground does, and only the folder carries work between runs.

A program may fill ``TEXTS`` (a dict of name -> text) for the test to compare.
Each run reports its output, ``TEXTS``, and what the cache did (``Counts``).
``python_of(runtime)`` gives the interpreter of an installed JAX runtime: the
harness runs there as in the sandbox, with this checkout on ``PYTHONPATH``.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

REPO = Path(__file__).resolve().parent.parent

FORKING_RUNS = r"""
import contextlib, dataclasses, io, json, linecache, os, sys
import jax, jax.numpy  # as the zygote: imported, no backend
from jaxplay.sandbox.caches import lowered_modules
from jaxplay.sandbox.capture import jit_capture
from jaxplay.sandbox.engine import warmup

lowered_modules.install()
request = json.load(sys.stdin)
results = []
for run in request["runs"]:
    read_fd, write_fd = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(read_fd)
        report = {}
        try:
            os.environ.update(run.get("env", {}))
            if run.get("cached", True):
                warmup.use_persistent_cache(request["cache"])
            jax.devices()
            jit_capture.leave_our_frames_out_of_locations()
            code = run["code"]
            linecache.cache["<playground>"] = (len(code), None, code.splitlines(True), "<playground>")
            namespace = {"__name__": "__main__", "TEXTS": {}}
            out = io.StringIO()
            with contextlib.redirect_stdout(out):
                exec(compile(code, "<playground>", "exec"), namespace)
            report = {"out": out.getvalue(), "texts": namespace["TEXTS"],
                      "counts": dataclasses.asdict(lowered_modules.counts()),
                      "unavailable": lowered_modules.unavailable()}
        except BaseException as exc:
            report = {"error": f"{type(exc).__name__}: {exc}"}
        with os.fdopen(write_fd, "w") as pipe:
            json.dump(report, pipe)
        os._exit(0)
    os.close(write_fd)
    with os.fdopen(read_fd) as pipe:
        results.append(json.loads(pipe.read() or '{"error": "the run died"}'))
    os.waitpid(pid, 0)
json.dump(results, sys.stdout)
"""


def python_of(runtime: str | None) -> str:
    """The venv's interpreter for None, else an installed runtime's (the test is skipped without it)."""
    if runtime is None:
        return sys.executable
    from jaxplay.sandbox.runtimes import store
    from jaxplay.settings import Settings

    runtimes_dir = Settings.from_env().runtimes_dir.expanduser()
    if store.record_of(runtimes_dir, runtime) is None:
        pytest.skip(f"JAX runtime {runtime} is not installed in {runtimes_dir}: run `make runtimes`")
    return str(store.folder_for(runtimes_dir, runtime) / "bin" / "python")


def run_programs(cache: Path, runs: list[dict[str, Any] | str], runtime: str | None = None) -> list[dict[str, Any]]:
    """Each run (its ``code``; optionally ``env``, and ``cached: False`` for plain JAX without any cache) in a
    fresh fork, in order; their reports."""
    request = {"cache": str(cache), "runs": [{"code": r} if isinstance(r, str) else r for r in runs]}
    env = {"PATH": "/usr/bin:/bin", "HOME": str(cache.parent), "PYTHONPATH": str(REPO), "PYTHONHASHSEED": "0",
           "XLA_FLAGS": "--xla_force_host_platform_device_count=8", "JAX_PLATFORMS": "cpu"}
    for name in ("OPENBLAS_CORETYPE", "OPENBLAS_L2_SIZE"):
        if name in os.environ:
            env[name] = os.environ[name]
    result = subprocess.run([python_of(runtime), "-c", FORKING_RUNS], input=json.dumps(request), cwd=REPO, env=env,
                            capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, result.stderr[-3000:]
    reports = json.loads(result.stdout)
    for report in reports:
        assert "error" not in report, report["error"]
    return reports
