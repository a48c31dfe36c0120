"""Running the in-sandbox runner in a plain subprocess, for unit and fidelity tests.

The runner writes its events to fd 3; ``events_on_fd3`` puts a file there in the child.
"""

from __future__ import annotations

import os
from collections.abc import Callable


def events_on_fd3(fd: int) -> Callable[[], None]:
    """A preexec_fn putting ``fd`` on fd 3 for the child (inheritable even if it already is fd 3)."""
    def move() -> None:
        if fd == 3:
            os.set_inheritable(3, True)
        else:
            os.dup2(fd, 3)
    return move


FORKING_RUNNER = r"""
import json, os, sys
import jax, jax.numpy  # imported once, as the zygote does; each program runs in a fork of this process
from jaxplay.sandbox.output import events
from jaxplay import worker_protocol as wp
from jaxplay.sandbox.engine import runner

programs = json.load(sys.stdin)
results = []
for code in programs:
    read_fd, write_fd = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(read_fd)
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, 1)
        os.dup2(devnull, 2)
        runner.reopen_std_streams()
        events.open_channel(write_fd)
        os._exit(runner.execute(code, wp.SandboxRun()))
    os.close(write_fd)
    with os.fdopen(read_fd, "rb") as pipe:
        lines = pipe.read().splitlines()
    os.waitpid(pid, 0)
    results.append([json.loads(line) for line in lines])
json.dump(results, sys.__stdout__)
"""


def run_programs(programs: list[str], cwd: str, timeout: float = 300) -> list[list[dict]]:
    """Each program's events, run by the real runner in a fork of one process that imported JAX."""
    import json
    import subprocess
    import sys

    result = subprocess.run([sys.executable, "-c", FORKING_RUNNER], input=json.dumps(programs), cwd=cwd,
                            capture_output=True, text=True, timeout=timeout, check=True)
    return json.loads(result.stdout)
