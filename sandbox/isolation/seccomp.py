"""A seccomp filter for the run's process: the kernel calls no Python program needs are refused.

The namespaces and dropped capabilities already make these calls powerless
or refused. The filter takes the code behind them out of reach too: a
kernel bug in ``io_uring``, ``bpf``, ``userfaultfd``, ``keyctl``, nested
user namespaces or the mount API stops being reachable at all. Those are
the paths most local privilege escalations of recent years went through.

A denylist, not an allowlist. JAX, XLA, CUDA and the libraries users import
need a wide and changing set of calls, and an allowlist would break them in
ways that look like their bugs. Refused calls fail with EPERM, as they would
for an unprivileged process, so programs see an ordinary error. ``clone3``
fails with ENOSYS, so glibc falls back to ``clone``, whose flags the filter
can read: a thread or a fork passes, and a new namespace does not.

Installed in the run's own process, before any thread exists and after
``no_new_privs`` (sandbox/isolation/namespaces.py). Its children inherit it. Syscall
numbers are from Linux's uapi headers (asm/unistd_64.h for x86_64,
asm-generic/unistd.h for aarch64).
"""

from __future__ import annotations

import ctypes
import errno
import os
import struct

# name: (x86_64, aarch64); None where the architecture has no such call.
DENIED: dict[str, tuple[int | None, int | None]] = {
    "ptrace": (101, 117), "process_vm_readv": (310, 270), "process_vm_writev": (311, 271),
    "pidfd_getfd": (438, 438),
    "keyctl": (250, 219), "add_key": (248, 217), "request_key": (249, 218),
    "bpf": (321, 280), "perf_event_open": (298, 241), "userfaultfd": (323, 282),
    "io_uring_setup": (425, 425), "io_uring_enter": (426, 426), "io_uring_register": (427, 427),
    "unshare": (272, 97), "setns": (308, 268),
    "mount": (165, 40), "umount2": (166, 39), "pivot_root": (155, 41), "chroot": (161, 51),
    "open_tree": (428, 428), "move_mount": (429, 429), "fsopen": (430, 430), "fsconfig": (431, 431),
    "fsmount": (432, 432), "fspick": (433, 433), "mount_setattr": (442, 442),
    "open_by_handle_at": (304, 265), "name_to_handle_at": (303, 264),
    "kexec_load": (246, 104), "kexec_file_load": (320, 294),
    "init_module": (175, 105), "finit_module": (313, 273), "delete_module": (176, 106),
    "acct": (163, 89), "swapon": (167, 224), "swapoff": (168, 225), "reboot": (169, 142),
    "settimeofday": (164, 170), "clock_settime": (227, 112), "clock_adjtime": (305, 266), "adjtimex": (159, 171),
    "iopl": (172, None), "ioperm": (173, None), "uselib": (134, None),
    "quotactl": (179, 60), "lookup_dcookie": (212, 18), "vhangup": (153, 58), "syslog": (103, 116),
    "fanotify_init": (300, 262),
}
CLONE = (56, 220)
CLONE3 = (435, 435)
ARCHES = {"x86_64": (0, 0xC000003E), "aarch64": (1, 0xC00000B7)}  # column in the tables, AUDIT_ARCH_*
X32_SYSCALL_BIT = 0x40000000
# CLONE_NEWNS | NEWCGROUP | NEWUTS | NEWIPC | NEWUSER | NEWPID | NEWNET
NAMESPACE_FLAGS = 0x00020000 | 0x02000000 | 0x04000000 | 0x08000000 | 0x10000000 | 0x20000000 | 0x40000000

LD_W_ABS, JEQ, JGE, JSET, RET = 0x20, 0x15, 0x35, 0x45, 0x06
RET_ALLOW, RET_ERRNO = 0x7FFF0000, 0x00050000
OFFSET_NR, OFFSET_ARCH, OFFSET_ARG0 = 0, 4, 16  # struct seccomp_data; arg0's low word (little-endian)
PR_SET_SECCOMP, SECCOMP_MODE_FILTER = 22, 2


def program(machine: str) -> list[tuple[int, int, int, int]]:
    """The BPF program for ``machine``: (code, jt, jf, k) instructions."""
    column, audit_arch = ARCHES[machine]
    denied = sorted({numbers[column] for numbers in DENIED.values() if numbers[column] is not None})
    body: list[tuple[str, int, str | None, str | None]] = [  # (op, k, jump-if-true, jump-if-false)
        ("ld", OFFSET_ARCH, None, None),
        ("jeq", audit_arch, None, "deny"),
        ("ld", OFFSET_NR, None, None),
    ]
    if machine == "x86_64":
        body.append(("jge", X32_SYSCALL_BIT, "deny", None))  # x32 numbers would dodge every check below
    body.append(("jeq", CLONE3[column], "enosys", None))
    body += [("jeq", number, "deny", None) for number in denied]
    body += [("jeq", CLONE[column], None, "allow"), ("ld", OFFSET_ARG0, None, None),
             ("jset", NAMESPACE_FLAGS, "deny", "allow")]
    labels = {"allow": len(body), "deny": len(body) + 1, "enosys": len(body) + 2}
    codes = {"ld": LD_W_ABS, "jeq": JEQ, "jge": JGE, "jset": JSET}

    def offset(index: int, target: str | None) -> int:
        return 0 if target is None else labels[target] - index - 1

    instructions = [(codes[op], offset(i, jt), offset(i, jf), k) for i, (op, k, jt, jf) in enumerate(body)]
    instructions += [(RET, 0, 0, RET_ALLOW), (RET, 0, 0, RET_ERRNO | errno.EPERM),
                     (RET, 0, 0, RET_ERRNO | errno.ENOSYS)]
    assert all(jt < 256 and jf < 256 for _, jt, jf, _ in instructions)
    return instructions


def install() -> None:
    """Filter this process (and its future threads and children) for good. OSError if the kernel refuses."""
    machine = os.uname().machine
    if machine not in ARCHES:
        raise OSError(0, f"seccomp: no filter for the {machine} architecture")
    instructions = program(machine)
    packed = b"".join(struct.pack("HBBI", *instruction) for instruction in instructions)
    filters = ctypes.create_string_buffer(packed, len(packed))

    class SockFprog(ctypes.Structure):
        _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.c_void_p)]

    fprog = SockFprog(len(instructions), ctypes.addressof(filters))
    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl.argtypes = [ctypes.c_int, ctypes.c_ulong, ctypes.c_void_p, ctypes.c_ulong, ctypes.c_ulong]
    if libc.prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, ctypes.addressof(fprog), 0, 0) != 0:
        code = ctypes.get_errno()
        raise OSError(code, f"seccomp: {os.strerror(code)}")
