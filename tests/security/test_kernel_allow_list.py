"""Inside a real run, the kernel answers only the calls the allow-list names, with the documented errno.

Each call the fourth hostile pass found still working is tried with arguments that succeed on an
unfiltered kernel (a read-only ``modify_ldt``, a zero-length ``move_pages``, ...), so a result other
than the filter's errno means the filter let it through. What programs need is tried beside them.
Run on the worker's own JAX and on the newest test runtime (``live_on_runtime``).
"""

from __future__ import annotations

import pytest

from tests.conftest import done_of, output_text

pytestmark = pytest.mark.attack("kernel surface")

PROBE = r"""
import ctypes, errno, mmap, os, socket
libc = ctypes.CDLL(None, use_errno=True)
libc.syscall.restype = ctypes.c_long
x86 = os.uname().machine == "x86_64"
NR = {  # (x86_64, aarch64)
    "personality": (135, 92), "modify_ldt": (154, None), "vmsplice": (278, 75), "memfd_secret": (447, 447),
    "mbind": (237, 235), "set_mempolicy": (238, 237), "migrate_pages": (256, 238), "move_pages": (279, 239),
    "kcmp": (312, 272), "process_madvise": (440, 440), "pidfd_open": (434, 434), "clone3": (435, 435),
    "ioctl": (16, 29), "prctl": (157, 167),
}
def raw(name, *args):
    number = NR[name][0 if x86 else 1]
    if number is None:
        return "absent"
    args = [ctypes.c_void_p(a) if isinstance(a, int) and a > 0x7fffffff else a for a in args]
    result = libc.syscall(number, *args)
    return "ok" if result >= 0 else errno.errorcode[ctypes.get_errno()]
def report(name, outcome):
    print(f"{name}: {outcome}")
page = mmap.mmap(-1, 4096)
address = ctypes.addressof(ctypes.c_char.from_buffer(page))
buffer = ctypes.create_string_buffer(64)
mask = ctypes.c_ulong(1)  # node 0
report("personality READ_IMPLIES_EXEC", raw("personality", 0x0400000))
report("personality PER_LINUX32", raw("personality", 0x0008))
raw("personality", 0)  # back to PER_LINUX where it went through
report("modify_ldt", raw("modify_ldt", 0, buffer, 16))
read_end, write_end = os.pipe()
iov = (ctypes.c_void_p * 2)(ctypes.addressof(buffer), 1)
report("vmsplice", raw("vmsplice", write_end, iov, 1, 0))
report("memfd_secret", raw("memfd_secret", 0))
report("mbind", raw("mbind", address, 4096, 0, 0, 0, 0))
report("set_mempolicy", raw("set_mempolicy", 0, 0, 0))
report("migrate_pages", raw("migrate_pages", 0, 2, ctypes.byref(mask), ctypes.byref(mask)))
status = ctypes.c_int(0)
report("move_pages", raw("move_pages", 0, 0, 0, 0, ctypes.byref(status), 0))
report("kcmp", raw("kcmp", os.getpid(), os.getpid(), 1, 0, 0))
pidfd = libc.syscall(NR["pidfd_open"][0 if x86 else 1], os.getpid(), 0)
report("process_madvise", raw("process_madvise", pidfd, iov, 0, 20, 0))
report("clone3", raw("clone3", 0, 0))
report("unknown call", "ok" if libc.syscall(1000) >= 0 else errno.errorcode[ctypes.get_errno()])
def make(family, kind, protocol=0):
    try:
        socket.socket(family, kind, protocol).close()
        return "ok"
    except OSError as exc:
        return errno.errorcode[exc.errno]
report("socket AF_VSOCK", make(40, socket.SOCK_STREAM))
report("socket NETLINK_XFRM", make(socket.AF_NETLINK, socket.SOCK_RAW, 6))
report("socket NETLINK_NETFILTER", make(socket.AF_NETLINK, socket.SOCK_RAW, 12))
report("socket AF_UNIX", make(socket.AF_UNIX, socket.SOCK_STREAM))
report("socket AF_UNIX datagram", make(socket.AF_UNIX, socket.SOCK_DGRAM))
report("socket AF_INET", make(socket.AF_INET, socket.SOCK_STREAM))
report("socket AF_INET6", make(socket.AF_INET6, socket.SOCK_DGRAM))
report("socket NETLINK_ROUTE", make(socket.AF_NETLINK, socket.SOCK_RAW, 0))
left, right = socket.socketpair()
left.send(b"x")
report("socketpair", "ok" if right.recv(1) == b"x" else "broken")
report("ioctl TCGETS", raw("ioctl", read_end, 0x5401, buffer))
report("ioctl TIOCSTI", raw("ioctl", read_end, 0x5412, buffer))
report("ioctl NVIDIA RM", raw("ioctl", read_end, 0xC030462B, buffer))
report("prctl PR_SET_NAME", raw("prctl", 15, ctypes.c_char_p(b"probe"), 0, 0, 0))
report("prctl PR_SET_MM", raw("prctl", 35, 8, 0, 0, 0))
"""

# What the filter answers (docs/security.md, "The kernel a run can reach"): ENOSYS for a call not on the
# list, EPERM for a value an allowed call may not take; the kernel's own answer for what passes.
EXPECTED = {
    "personality READ_IMPLIES_EXEC": "ENOSYS", "personality PER_LINUX32": "ENOSYS", "modify_ldt": "ENOSYS",
    "vmsplice": "ENOSYS", "memfd_secret": "ENOSYS", "mbind": "ENOSYS", "set_mempolicy": "ENOSYS",
    "migrate_pages": "ENOSYS", "move_pages": "ENOSYS", "kcmp": "ENOSYS", "process_madvise": "ENOSYS",
    "clone3": "ENOSYS", "unknown call": "ENOSYS",
    "socket AF_VSOCK": "EPERM", "socket NETLINK_XFRM": "EPERM", "socket NETLINK_NETFILTER": "EPERM",
    "socket AF_UNIX": "ok", "socket AF_UNIX datagram": "ok", "socket AF_INET": "ok", "socket AF_INET6": "ok",
    "socket NETLINK_ROUTE": "ok", "socketpair": "ok",
    "ioctl TCGETS": "ENOTTY", "ioctl TIOCSTI": "EPERM", "ioctl NVIDIA RM": "ENOTTY",  # ENOTTY: the pipe's answer
    "prctl PR_SET_NAME": "ok", "prctl PR_SET_MM": "EPERM",
}


def test_calls_off_the_allow_list_and_refused_arguments_fail_with_the_documented_errno(live_on_runtime) -> None:
    # On the worker's own JAX and on the newest runtime, whose Python (another install, started through
    # sandbox/runtimes/launch.py) must install the same filter before the run's code.
    events = live_on_runtime.run(PROBE)
    assert done_of(events)["status"] == "ok", output_text(events, "stderr")
    found = dict(line.split(": ", 1) for line in output_text(events).strip().splitlines())
    if found.get("modify_ldt") == "absent":  # aarch64 has no modify_ldt
        found["modify_ldt"] = "ENOSYS"
    wrong = [f"{name}: {found.get(name)}, not {wanted}" for name, wanted in EXPECTED.items()
             if found.get(name) != wanted]
    assert not wrong, "\n".join(wrong)
