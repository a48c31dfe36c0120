"""Linux primitives for a run's own namespaces: unshare, id maps, mounts, dropping capabilities.

Used inside the sandbox by the processes that prepare a run (``sandbox/engine/spare.py``, ``run_process.py``).
Plain ``ctypes`` over libc, because the standard library has no ``unshare``,
``mount`` or ``capset``. Every failure raises ``OSError`` with the call named:
a run that cannot be isolated must not start.

Order matters, and the kernel enforces it: ``unshare(CLONE_NEWUSER)`` is
refused to a multithreaded process, so the run's namespaces are made right
after the fork from the (single-threaded) zygote, before JAX starts threads;
capabilities are per thread, so they are dropped before any thread exists.
"""

from __future__ import annotations

import ctypes
import os
import secrets

CLONE_NEWTIME = 0x00000080
CLONE_NEWNS = 0x00020000
CLONE_NEWUTS = 0x04000000
CLONE_NEWIPC = 0x08000000
CLONE_NEWUSER = 0x10000000
CLONE_NEWPID = 0x20000000
CLONE_NEWNET = 0x40000000
RUN_NAMESPACES = CLONE_NEWUSER | CLONE_NEWNS | CLONE_NEWIPC | CLONE_NEWPID | CLONE_NEWNET | CLONE_NEWUTS
# A run's monotonic and boot-time clocks (and so /proc/uptime and its processes' start times in
# /proc/PID/stat) read this much ahead of the host's, a fresh random amount per run: two runs never
# read the same values from them, however they read them (the vDSO included). The result cache
# relies on it: a run is shared only once a second run agreed with it (server/runs/result_verification.py).
CLOCK_OFFSET_RANGE_S = (1 << 20, 1 << 28)  # about 12 days to 8.5 years

MS_RDONLY = 0x1
MS_NOSUID = 0x2
MS_NODEV = 0x4
MS_NOEXEC = 0x8
MS_REMOUNT = 0x20
MS_BIND = 0x1000
MS_REC = 0x4000
MS_PRIVATE = 0x40000
MNT_DETACH = 0x2

PR_SET_PDEATHSIG = 1
PR_SET_DUMPABLE = 4
PR_CAPBSET_DROP = 24
PR_SET_NO_NEW_PRIVS = 38
PR_CAP_AMBIENT = 47
PR_CAP_AMBIENT_CLEAR_ALL = 4
SYS_CAPSET = {"x86_64": 126, "aarch64": 91}
LINUX_CAPABILITY_VERSION_3 = 0x20080522
LAST_CAP_FALLBACK = 40

_libc = ctypes.CDLL(None, use_errno=True)
_libc.mount.argtypes = [ctypes.c_char_p, ctypes.c_char_p, ctypes.c_char_p, ctypes.c_ulong, ctypes.c_char_p]
_libc.umount2.argtypes = [ctypes.c_char_p, ctypes.c_int]
_libc.prctl.argtypes = [ctypes.c_int, ctypes.c_ulong, ctypes.c_ulong, ctypes.c_ulong, ctypes.c_ulong]


def _check(result: int, what: str) -> None:
    if result != 0:
        errno = ctypes.get_errno()
        raise OSError(errno, f"{what}: {os.strerror(errno)}")


def unshare_run_namespaces(uid: int, gid: int) -> bool:
    """New user, mount, IPC, pid, network and UTS namespaces, keeping the same ids inside, and a time
    namespace whose clocks are offset by a random amount where the kernel has them (Linux >= 5.6).

    The pid and time namespaces apply to this process's children: the next fork is pid 1 there.
    Returns whether the clocks are offset.
    """
    offset_clocks = _libc.unshare(RUN_NAMESPACES | CLONE_NEWTIME) == 0
    if not offset_clocks:
        _check(_libc.unshare(RUN_NAMESPACES), "unshare")
    with open("/proc/self/setgroups", "w") as f:
        f.write("deny")
    with open("/proc/self/uid_map", "w") as f:
        f.write(f"{uid} {uid} 1")
    with open("/proc/self/gid_map", "w") as f:
        f.write(f"{gid} {gid} 1")
    _check(_libc.mount(b"none", b"/", None, MS_REC | MS_PRIVATE, None), "make mounts private")
    if offset_clocks:
        offset_clocks_randomly()
    return offset_clocks


def offset_clocks_randomly() -> None:
    """Set the new time namespace's offsets: only before any process has entered it (the next fork)."""
    low, high = CLOCK_OFFSET_RANGE_S
    seconds = low + secrets.randbelow(high - low)  # the OS's randomness: forks of one zygote differ
    with open("/proc/self/timens_offsets", "w") as f:
        f.write(f"monotonic {seconds} 0\nboottime {seconds} 0\n")


def mount_tmpfs(target: str, size_bytes: int, mode: str = "1777", read_only: bool = False) -> None:
    """A fresh tmpfs; ``read_only``: mounted so from the start (an empty cover over a folder, say)."""
    options = f"size={size_bytes},mode={mode}".encode()
    flags = MS_NOSUID | MS_NODEV | (MS_RDONLY | MS_NOEXEC if read_only else 0)
    _check(_libc.mount(b"tmpfs", target.encode(), b"tmpfs", flags, options), f"mount tmpfs on {target}")


def mount_proc() -> None:
    _check(_libc.mount(b"proc", b"/proc", b"proc", MS_NOSUID | MS_NODEV | MS_NOEXEC, None), "mount /proc")


def bind(source: str, target: str, read_only: bool) -> None:
    _check(_libc.mount(source.encode(), target.encode(), None, MS_BIND | MS_REC, None), f"bind {source} on {target}")
    if read_only:
        remount_read_only(target)


def remount_read_only(target: str) -> None:
    """Read-only, keeping the flags the kernel locked when the mount came from the outer namespace."""
    flags = MS_REMOUNT | MS_BIND | MS_RDONLY | _locked_flags(target)
    _check(_libc.mount(b"none", target.encode(), None, flags, None), f"remount {target} read-only")


def _locked_flags(target: str) -> int:
    with open("/proc/self/mountinfo") as f:
        for line in f:
            fields = line.split()
            if fields[4] == target:
                options = set(fields[5].split(","))
    flags = 0
    for name, bit in (("nosuid", MS_NOSUID), ("nodev", MS_NODEV), ("noexec", MS_NOEXEC)):
        if name in options:
            flags |= bit
    return flags


def mount_overlay(target: str, lower: str, upper: str, work: str) -> None:
    options = f"lowerdir={lower},upperdir={upper},workdir={work},userxattr".encode()
    _check(_libc.mount(b"overlay", target.encode(), b"overlay", MS_NOSUID | MS_NODEV, options), f"overlay on {target}")


def set_parent_death_signal(signal_number: int) -> None:
    _check(_libc.prctl(PR_SET_PDEATHSIG, signal_number, 0, 0, 0), "prctl(PDEATHSIG)")


def set_dumpable(value: bool) -> None:
    """Non-dumpable: processes of the same uid can neither trace it nor read its /proc/PID/mem."""
    _check(_libc.prctl(PR_SET_DUMPABLE, int(value), 0, 0, 0), "prctl(DUMPABLE)")


def drop_all_capabilities() -> None:
    """Empty every capability set of this (single-threaded) process, for good.

    Bounding and ambient sets first (dropping from the bounding set needs
    CAP_SETPCAP, still held), then effective/permitted/inheritable, then
    no_new_privs so no exec can bring any back.
    """
    for cap in range(_last_cap() + 1):
        _check(_libc.prctl(PR_CAPBSET_DROP, cap, 0, 0, 0), f"drop capability {cap} from the bounding set")
    _libc.prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0)  # EINVAL on old kernels: nothing to clear

    class Header(ctypes.Structure):
        _fields_ = [("version", ctypes.c_uint32), ("pid", ctypes.c_int)]

    class Data(ctypes.Structure):
        _fields_ = [("effective", ctypes.c_uint32), ("permitted", ctypes.c_uint32), ("inheritable", ctypes.c_uint32)]

    header = Header(LINUX_CAPABILITY_VERSION_3, 0)
    data = (Data * 2)()
    number = SYS_CAPSET.get(os.uname().machine)
    if number is None:
        raise OSError(0, f"capset: unknown syscall number on {os.uname().machine}")
    _check(_libc.syscall(number, ctypes.byref(header), ctypes.byref(data)), "capset")
    _check(_libc.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0), "prctl(NO_NEW_PRIVS)")


def _last_cap() -> int:
    try:
        with open("/proc/sys/kernel/cap_last_cap") as f:
            return int(f.read())
    except (OSError, ValueError):
        return LAST_CAP_FALLBACK


def effective_capabilities() -> int:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("CapEff:"):
                return int(line.split()[1], 16)
    return 0
