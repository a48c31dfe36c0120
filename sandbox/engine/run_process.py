"""The run's own process, the third of a spare's: made unprivileged, warmed, then given its run.

Its spare's init (sandbox/engine/spare.py) forks it as the spare is prepared.
At nice 19 it leads a session of its own, drops every capability and installs
the seccomp filter (in a sandbox), starts the JAX backend (unless the spare is
made for a program that configures it) and warms it, then waits on its socket
to the init. The run comes as a message and four fds (its stdout, stderr and
events pipes, the code as a memory file): it returns to normal priority and
runs the program once (``execute``).

Invariants, each relied on elsewhere:

- No capability, and the seccomp filter, before any thread exists: every later
  thread (JAX's, the program's) is filtered too.
- Its session is its own: ``kill(0, ...)`` and ``killpg`` of its own group
  reach the run's processes and nothing else, and without a cpu controller the
  kernel's autogroup shares the CPU between runs (sandbox/isolation/cgroups.py).
- Once prepared it no longer writes to the worker's log (its fd 2 until then),
  and the address-space holder it starts (``address_space_holder``), which
  copies every fd open then, never holds it.
- Its limits, events channel and standard streams are in place before the first
  line of the program runs.
"""

from __future__ import annotations

import gc
import os
import socket
from typing import Any

from jaxplay.sandbox.engine import address_space_holder, warmup
from jaxplay.sandbox.engine import zygote_protocol as zp
from jaxplay.sandbox.isolation import namespaces as ns
from jaxplay.sandbox.isolation import seccomp

SPARE_NICE = 19
SPARE_OOM_SCORE_ADJ = 500  # a spare dies after the run when memory runs out, not before it
RUN_OOM_SCORE_ADJ = 1000


def run_main(sock: socket.socket, warm: bool, isolated: bool) -> int:
    """The run's own process: unprivileged before anything else, then warmed, then the run."""
    os.setsid()  # kill(0, ...) and killpg of its own group reach the run's processes and nothing else
    os.setpriority(os.PRIO_PROCESS, 0, SPARE_NICE)  # preparing must not slow the run that executes beside it
    ns.set_dumpable(True)  # the init is not; the run is an ordinary process (its own /proc is its own)
    if isolated:
        ns.drop_all_capabilities()
        seccomp.install()  # before any thread exists, so every later thread is filtered too
    _set_oom_score_adj(SPARE_OOM_SCORE_ADJ)
    warming = warmup.prepare(initialize_backend=warm)
    from jaxplay.sandbox import capture

    capture.prepare()
    gc.freeze()  # what preparing made lives as long as the run: its collections need not walk it
    if isolated:
        # Prepared: the worker's log (fd 2 until now) is no longer this process's to write, and the holder
        # (which copies every fd open now, and which the run can see) must not hold it.
        null = os.open("/dev/null", os.O_WRONLY)
        os.dup2(null, 2)
        os.close(null)
        address_space_holder.start_holder()  # so that the run's exit, and its status, come at once
    message, fds = zp.receive(sock)
    sock.close()
    if message is None:
        return 0
    restore_priority(os.getpid())  # the warming thread's too: the program waits for it to stop
    warmup.end_warming(warming)
    _set_oom_score_adj(RUN_OOM_SCORE_ADJ)
    return execute(message, fds, backend_started=warm)


def execute(message: dict[str, Any], fds: list[int], backend_started: bool = True) -> int:
    stdout_fd, stderr_fd, events_fd, code_fd = fds
    os.dup2(stdout_fd, 1)
    os.dup2(stderr_fd, 2)
    os.close(stdout_fd)
    os.close(stderr_fd)
    from jaxplay.sandbox.engine import jax_config, runner
    from jaxplay.sandbox.isolation import limits
    from jaxplay.sandbox.output import events

    warmup.reseed_numpy()
    jax_config.apply_environment_at_first_import()
    run = zp.run_of(message)
    limits.apply_in_child(run.memory_limit_bytes if run.memory_rlimit else 0, run.limit_processes)
    events.open_channel(events_fd)
    runner.reopen_std_streams()
    code = zp.read_code(code_fd)
    if run.options.flags:
        from jaxplay.sandbox.engine import run_flags_apply

        refusal = run_flags_apply.apply(run.options.flags, backend_started)
        if refusal is not None:
            events.emit(refusal)
            return 1
    if run.probe:
        from jaxplay.sandbox.engine import probe

        probe.report(run.calibrate)
        return 0
    return runner.execute(code, run)


def restore_priority(pid: int) -> None:
    """Back to normal priority, every thread: the backend's threads were made while niced.

    Raising priority back to nice 0 is allowed because the worker set RLIMIT_NICE
    for the sandbox; where it could not, the run keeps the spare's priority.
    """
    try:
        tids = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return
    for tid in tids:
        try:
            os.setpriority(os.PRIO_PROCESS, int(tid), 0)
        except OSError:
            return


def _set_oom_score_adj(value: int) -> None:
    try:
        with open("/proc/self/oom_score_adj", "w") as f:
            f.write(str(value))
    except OSError:
        pass
