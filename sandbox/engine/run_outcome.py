"""How a run ended, in the words the worker reports: the status from the kernel's exit, never the program's.

``WarmSandbox`` (sandbox/engine/warm_sandbox.py) gathers what it knows of a run's end: the
exit status the run's init read from the kernel (``exited`` from the zygote,
or the init's own ``ended`` on the spare's door, as ``status_of`` reads it),
whether the sandbox killed it (deadline, cancel), the cgroup's OOM counter, and
what the relay saw (an ``error`` event). ``outcome`` turns that into the
``RunResult`` the worker sends as ``finished``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from jaxplay.browser_protocol import RunStatus
from jaxplay.sandbox.caches import mounts as cache_mounts
from jaxplay.sandbox.isolation.limits import format_bytes
from jaxplay.sandbox.output.relay import OutputRelay


@dataclass
class RunResult:
    status: RunStatus
    elapsed_ms: float
    message: str | None = None
    out_of_memory: bool = False  # the cgroup's OOM killer ended it (counted in the worker's metrics)
    # The run could load what earlier runs of its session wrote into the compile cache (code JAX executes):
    # the server never serves its result to another session.
    read_session_cache: bool = False


def status_of(ended: dict[str, Any] | None) -> dict[str, int | None] | None:
    """The init's ``ended`` as an exit: the status it mirrors (a signal as 128+N), None if it is no such word."""
    if ended is None or ended.get("type") != "ended" or type(ended.get("status")) is not int:
        return None
    status = ended["status"]
    return {"returncode": None, "signal": status - 128} if status > 128 else {"returncode": status, "signal": None}


def outcome(exited: dict[str, Any], ended_by: RunStatus | None, elapsed_ms: float, timeout_s: float,
            out_of_memory: bool, relay: OutputRelay, memory_limit_bytes: int, oom_counted: bool) -> RunResult:
    """How a run ended. ``oom_counted``: the sandbox's cgroup counts OOM kills, so a SIGKILL it did not count
    came from elsewhere (the run itself, say) and is not blamed on memory."""
    if ended_by is RunStatus.TIMEOUT:
        return RunResult(ended_by, elapsed_ms, f"The run exceeded its time limit of {timeout_s:g} s and was stopped.")
    if ended_by is RunStatus.CANCELLED:
        return RunResult(ended_by, elapsed_ms, "Stopped at your request.")
    if exited.get("refused"):
        return RunResult(RunStatus.CRASHED, elapsed_ms, f"The worker refused the run: {exited['refused']}.")
    if out_of_memory:
        message = (f"Out of memory: the run used more than its limit of {format_bytes(memory_limit_bytes)} and was "
                   "stopped. Use smaller arrays or fewer intermediate copies.")
        if not relay.error_sent:
            relay.send({"type": "error", "ename": "MemoryError", "message": message, "line": None, "traceback": ""})
        return RunResult(RunStatus.ERROR, elapsed_ms, message, out_of_memory=True)
    if exited.get("killed_from_outside"):
        return RunResult(RunStatus.CRASHED, elapsed_ms, "The sandbox process that held the run was killed from outside "
                         "it (by the host, not by your program); the run was lost. Run it again.")
    code, signal_number = exited.get("returncode"), exited.get("signal")
    if code == 0:
        return RunResult(RunStatus.OK, elapsed_ms)
    if code == 1 and relay.error_sent:
        return RunResult(RunStatus.ERROR, elapsed_ms)
    how = f"signal {signal_number}" if signal_number else f"exit code {code}"
    hint = " It was killed, most likely for running out of memory." if signal_number == 9 and not oom_counted else ""
    return RunResult(RunStatus.CRASHED, elapsed_ms, f"The Python process ended abruptly ({how}).{hint}")


def unsaved_notice(count: int) -> dict[str, Any]:
    return {"type": "notice", "level": "info",
            "message": f"{count} newly compiled function(s) were not kept in your session's compile cache: one run "
                       f"may keep at most {cache_mounts.SAVE_BUDGET_FILES} files and "
                       f"{format_bytes(cache_mounts.SAVE_BUDGET_BYTES)}. Later runs compile them again; compile fewer "
                       "distinct functions in one run to keep them all."}
