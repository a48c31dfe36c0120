"""The result cache replays to other people only what a second, independent run showed again.

Each program below reads the clock, the OS's randomness or the host's state by
a route that no hook on Python's names sees (``ctypes``, the vDSO, ``rdtsc``,
``/proc``, a read made for it by a thread pool). Run by one browser session,
then by a second and a third, none of them is ever answered from the cache:
the run proves nothing about itself (server/runs/result_verification.py), each
run's clocks are offset by its own random amount (sandbox/isolation/namespaces.py),
and the kernel says which of the host's slowly changing files a run opened
(sandbox/capture/host_state_reads.py). A deterministic program still is
answered from the cache, once a second run agreed.
"""

from __future__ import annotations

import platform
import uuid

import pytest

from tests.conftest import done_of, output_text
from tests.live.faults import run_until_stored

LIBC = "import ctypes\nlibc = ctypes.CDLL(None, use_errno=True)\n"
ROUTES = {
    "/proc/uptime": "print(open('/proc/uptime').read())",
    "clock_gettime through ctypes": LIBC + """
class Timespec(ctypes.Structure):
    _fields_ = [("seconds", ctypes.c_long), ("nanoseconds", ctypes.c_long)]
for clock in (0, 1, 7):  # realtime, monotonic, boottime
    now = Timespec()
    libc.clock_gettime(clock, ctypes.byref(now))
    print(clock, now.seconds)
""",
    "getrandom through ctypes": LIBC + """
buffer = ctypes.create_string_buffer(16)
libc.getrandom(buffer, 16, 0)
print(buffer.raw.hex())
""",
    "/proc/self/stat start time": "print(open('/proc/self/stat').read().rsplit(')', 1)[1].split()[19])",
    "perf_counter_ns read by a thread pool": """
import time
from concurrent.futures import ThreadPoolExecutor
with ThreadPoolExecutor(1) as pool:  # the read is made by concurrent.futures, not by the program
    print(pool.submit(time.perf_counter_ns).result() // 10**9)
""",
    "/proc/self/status": "print(open('/proc/self/status').read())",
    "/proc/loadavg": "print(open('/proc/loadavg').read().split()[:3])",
    "/proc/loadavg through cat": """
import subprocess
print(subprocess.run(["cat", "/proc/loadavg"], capture_output=True, text=True).stdout.split()[:3])
""",
}
RDTSC = """
import ctypes, mmap
code = bytes([0x0F, 0x31, 0x48, 0xC1, 0xE2, 0x20, 0x48, 0x09, 0xD0, 0xC3])  # rdtsc; rdx << 32 | rax; ret
page = mmap.mmap(-1, mmap.PAGESIZE, prot=mmap.PROT_READ | mmap.PROT_WRITE | mmap.PROT_EXEC)
page.write(code)
rdtsc = ctypes.CFUNCTYPE(ctypes.c_uint64)(ctypes.addressof(ctypes.c_char.from_buffer(page)))
print(rdtsc() >> 20)
"""
if platform.machine() == "x86_64":
    ROUTES["rdtsc"] = RDTSC
DETERMINISTIC = """
import jax, jax.numpy as jnp
f = jax.jit(lambda x: jnp.sin(x) * 2)
print(f(jnp.arange(3.0)))
jnp.ones((2, 2))  # a result: shown as treescope's view
"""


def three_sessions(live, code: str) -> list[list[dict]]:
    """``code`` run by three browser sessions, one after another."""
    return [live.run(code) for _ in range(3)]



@pytest.mark.attack("result cache")
@pytest.mark.parametrize("route", sorted(ROUTES))
def test_what_a_run_read_of_the_clock_randomness_or_host_is_never_replayed_to_another_session(live, route):
    code = f"# {uuid.uuid4().hex}\n{ROUTES[route]}"
    runs = three_sessions(live, code)
    for events in runs:
        assert done_of(events)["status"] == "ok", events[-3:]
        assert "cached" not in done_of(events), (route, output_text(events))
    assert output_text(runs[0]).strip()


@pytest.mark.attack("result cache")
def test_a_deterministic_program_is_replayed_once_a_later_run_agreed(live):
    code = f"# {uuid.uuid4().hex}\n{DETERMINISTIC}"
    first, second = run_until_stored(live, code), run_until_stored(live, code)
    third = live.run(code)
    assert [done_of(events).get("cached") for events in (first, second)] == [None, None]  # each ran
    assert done_of(third).get("cached") is True  # the second agreed with the first: shared
    assert output_text(third) == output_text(first) == "[0.        1.6829419 1.8185948]\n"
    assert [e["type"] for e in third if e["type"] == "display"] == ["display"]



# Text a run writes on its event channel under names the comparison leaves out as measured (the roofline's
# peak, a field named like a time): drawn from getrandom through ctypes, so no hook sees it.
SMUGGLED = LIBC + """
from jaxplay.sandbox.output import events
buffer = ctypes.create_string_buffer(8)
libc.getrandom(buffer, 8, 0)
note = "run " + buffer.raw.hex()
events.emit({"type": "roofline", "peak": {"flops_per_s": 1e9, "bytes_per_s": 1e9, "how": note},
             "functions": [], "left_out": 0})
events.emit({"type": "timing", "label": "step", "calls": 1, "note_ms": note})
print("done")
"""


@pytest.mark.attack("result cache")
def test_text_under_a_measured_name_must_agree_too_before_it_is_replayed(live):
    """Before, the peak and every ``*_ms`` field were left out of the comparison whatever they held: the
    program's text there differed in every run, yet two runs agreed and the third session was answered
    with the first run's text (the page shows the peak's ``how``)."""
    runs = three_sessions(live, f"# {uuid.uuid4().hex}\n{SMUGGLED}")
    for events in runs:
        assert done_of(events)["status"] == "ok", events[-3:]
    notes = [[e["peak"]["how"] for e in events if e["type"] == "roofline"] for events in runs]
    assert all(notes) and notes[0] != notes[1], notes
    assert "cached" not in done_of(runs[2]), notes
