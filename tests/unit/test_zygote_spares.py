"""What the zygote says when a run's keeper is killed from outside, and how soon it replaces a spare
killed while it waited.

Before: a keeper killed by a signal was reported as the run's own signal ("The Python process ended
abruptly (signal 9)", blaming the program); and each spare killed from outside counted towards the
back-off meant for spares that cannot be prepared, so a seat whose spares an operator (or the OOM
killer) had killed a few times, however far apart, waited 2 s, then 5 s, for its next spare.
"""

from __future__ import annotations

import os
import signal
import socket
import sys
import time
from collections.abc import Iterator

import pytest

from jaxplay.sandbox.engine import run_outcome, zygote
from jaxplay.sandbox.engine import zygote_protocol as zp
from jaxplay.sandbox.engine.spare import Spare


@pytest.fixture
def made() -> Iterator[tuple[zygote.Zygote, socket.socket]]:
    worker_end, zygote_end = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    made = zygote.Zygote(zygote_end, {}, isolated=False)
    try:
        yield made, worker_end
    finally:  # the zygote set this process's SIGCHLD handling for itself
        signal.set_wakeup_fd(-1)
        signal.signal(signal.SIGCHLD, signal.SIG_DFL)
        for fd in (made.wake_r, made.wake_w):
            os.close(fd)
        worker_end.close()
        zygote_end.close()


def _keeper(exit_code: int | None) -> int:
    """A child standing for a keeper: it exits with ``exit_code`` (a mirrored end), or waits to be killed."""
    program = "import time; time.sleep(60)" if exit_code is None else f"import os; os._exit({exit_code})"
    return os.posix_spawn(sys.executable, [sys.executable, "-c", program], os.environ)


def _running(made: zygote.Zygote, pid: int) -> None:
    control, init_end = socket.socketpair()
    init_end.close()
    made.running = ("r1", Spare(pid, control, None, warm=True))


def _reaped(made: zygote.Zygote, worker_end: socket.socket, pid: int) -> dict:
    os.waitid(os.P_PID, pid, os.WEXITED | os.WNOWAIT)  # gone, not yet reaped
    made.reap()
    message, _ = zp.receive(worker_end)
    assert message is not None
    return message


def test_a_keeper_killed_from_outside_is_said_so_not_blamed_on_the_program(made) -> None:
    the_zygote, worker_end = made
    pid = _keeper(None)
    _running(the_zygote, pid)
    os.kill(pid, signal.SIGKILL)
    exited = _reaped(the_zygote, worker_end, pid)
    assert exited["killed_from_outside"] is True and exited["signal"] == signal.SIGKILL
    result = run_outcome.outcome(exited, None, 10.0, 30.0, False, None, 1 << 30, oom_counted=True)  # type: ignore[arg-type]
    assert str(result.status) == "crashed"
    assert "killed from outside it (by the host, not by your program)" in result.message


def test_a_run_killed_by_a_signal_inside_is_still_the_programs_end(made) -> None:
    the_zygote, worker_end = made
    pid = _keeper(128 + signal.SIGKILL)  # the keeper mirrors its run's SIGKILL as 128+9
    _running(the_zygote, pid)
    exited = _reaped(the_zygote, worker_end, pid)
    assert "killed_from_outside" not in exited and exited["signal"] == signal.SIGKILL


def _spare_killed(made: zygote.Zygote, lived_s: float) -> float:
    """How long the zygote waits before forking the next spare, once a spare that lived ``lived_s`` died."""
    control, init_end = socket.socketpair()
    init_end.close()
    made.spare = Spare(0, control, None, warm=True, forked_at=time.monotonic() - lived_s)
    made.replace_dead_spare()
    assert made.next_spare_at is not None
    return made.next_spare_at - time.monotonic()


def test_spares_killed_after_they_were_prepared_are_replaced_at_once_every_time(made) -> None:
    the_zygote, _ = made
    waits = [_spare_killed(the_zygote, lived_s=zygote.SPARE_PREPARED_AFTER_S + 1) for _ in range(5)]
    assert max(waits) <= 0.05, waits  # before: 0, 0.5, 2, 5, 5 s


def test_spares_that_die_young_are_replaced_ever_later(made) -> None:
    the_zygote, _ = made
    waits = [_spare_killed(the_zygote, lived_s=0.0) for _ in range(4)]
    assert waits[0] <= 0.05 and waits[1] > 0.3 and waits[3] > 4, waits  # a spare that cannot be prepared
