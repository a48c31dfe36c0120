"""Host state a run reads by routes the result cache's second-run rule does not see, and that still agree.

The rule (docs/sharing.md, "Who a cached result answers") shares a result once a
second run agreed, offsets each run's monotonic and boot-time clocks, and has the
kernel watch the host's slowly changing files (sandbox/capture/host_state_reads.py).
Each program below reads the same kind of host state by a system call or a file
that no watch covers, and prints something that two runs a moment apart agree
on: the result is replayed to other browser sessions, although a run later (or
on another host) would show something else. They state what should hold and fail
today (strict xfail): no small fix covers a system call that JAX itself makes
(XLA asks ``sysinfo`` for the host's memory), so each needs the kernel's word,
as the file watch gives for ``/proc/loadavg``.
"""

from __future__ import annotations

import time
import uuid

import pytest

from tests.conftest import done_of, output_text
from tests.live.faults import cache_entries

LIBC = "import ctypes\nlibc = ctypes.CDLL(None, use_errno=True)\n"
SYSINFO = LIBC + """
class Sysinfo(ctypes.Structure):
    _fields_ = [("uptime", ctypes.c_long), ("loads", ctypes.c_ulong * 3), ("rest", ctypes.c_char * 256)]
info = Sysinfo()
libc.sysinfo(ctypes.byref(info))
"""
UNSEEN_ROUTES = {
    # The figures of the watched /proc/loadavg, through a system call: no file is opened.
    "the load average through sysinfo": SYSINFO + "print('busy' if info.loads[0] / 65536 > 1000 else 'calm')",
    # times() counts clock ticks since the host booted: the run's time namespace does not offset it.
    "the host's uptime through times": LIBC + "libc.times.restype = ctypes.c_long\n"
                                              "print('up a minute' if libc.times(None) > 6000 else 'just booted')",
    # The free space of the host's disk under a read-only bind (statfs), not the run's own tmpfs.
    "the host disk's free space through statfs": "import shutil\nprint(shutil.disk_usage('/usr').free > 0)",
    # Host-wide counters in /proc/stat (not watched: every process reads it to count processors).
    "the host's fork count in /proc/stat": "print([int(line.split()[1]) > 1 for line in open('/proc/stat')"
                                           " if line.startswith('processes')])",
    # The run's own CPU time, from its main thread's file: /proc/<pid>/stat is watched, .../task/<pid>/stat not.
    "the run's CPU time through /proc/self/task": "import os\nfields = open(f'/proc/self/task/{os.getpid()}/stat')"
                                                  ".read().rsplit(')', 1)[1].split()\nprint(int(fields[11]) < 10**9)",
    # The host's identity for this boot (watched: .../random/uuid; not: boot_id).
    "the host's boot id": "print(open('/proc/sys/kernel/random/boot_id').read())",
}


def run_then_settle(live, code: str) -> list[dict]:
    """``code`` run by a new browser session, then a moment for the server to write what the run made of the
    cache (after its done), so the next run is judged against it. Not an assertion: a run the cache refuses
    writes nothing, and the test must then pass (the strict xfail turns it into the fix's news)."""
    before = cache_entries(live)
    events = live.run(code)
    deadline = time.monotonic() + 10
    while cache_entries(live) <= before and time.monotonic() < deadline:
        time.sleep(0.1)
    return events


@pytest.mark.attack("result cache")
@pytest.mark.xfail(strict=True, reason="host state read by a system call, or a file no watch covers, agrees between "
                                       "two runs a moment apart and is shared (reported, not fixed)")
@pytest.mark.parametrize("route", sorted(UNSEEN_ROUTES))
def test_host_state_read_by_an_unwatched_route_is_never_replayed_to_another_session(live, route):
    code = f"# {uuid.uuid4().hex}\n{UNSEEN_ROUTES[route]}"
    runs = [run_then_settle(live, code), run_then_settle(live, code), live.run(code)]
    for events in runs:
        assert done_of(events)["status"] == "ok", events[-3:]
    assert output_text(runs[0]).strip()
    assert [done_of(events).get("cached") for events in runs] == [None, None, None], output_text(runs[2])


@pytest.mark.attack("result cache")
def test_times_follows_the_hosts_clock_not_the_runs_offset_one(live):
    """What makes the times() route agree: each run's boot-time clock is offset by a random amount of its own
    (12 days to 8.5 years), so two runs' readings differ, but the tick count times() returns is the host's
    (the kernel applies no time namespace to it): two runs a moment apart read the same ten minutes."""
    code = LIBC + """
libc.times.restype = ctypes.c_long
class Timespec(ctypes.Structure):
    _fields_ = [("seconds", ctypes.c_long), ("nanoseconds", ctypes.c_long)]
boot = Timespec()
libc.clock_gettime(7, ctypes.byref(boot))  # CLOCK_BOOTTIME
print(boot.seconds // 600, libc.times(None) // (100 * 600))
"""
    readings = []
    for _ in range(2):
        events = live.run(code, fresh=True)
        assert done_of(events)["status"] == "ok", events[-3:]
        readings.append(output_text(events).split())
    (boot_a, ticks_a), (boot_b, ticks_b) = readings
    # Ten-minute counts: the runs' own clocks lie days to years apart; the host's agree (or, across a
    # ten-minute boundary, differ by one).
    assert abs(int(boot_a) - int(boot_b)) > 1  # the run's own clock
    assert abs(int(ticks_a) - int(ticks_b)) <= 1  # the host's
