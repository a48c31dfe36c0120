"""What a run may ask of the kernel: the allow-list, the argument checks, and how each refusal reads.

The allow-list is what real programs were seen to call in the sandbox, on every runtime offered
(``syscalls_seen``, written by ``scripts/record-syscalls``), plus the additions below, each with its
reason, minus the calls refused whatever a program does. The filter itself is ``seccomp``.

How a refusal reads (errno):

- ENOSYS for every call not on the list: the answer of a kernel built without that call, and the
  one every library is written to expect when it probes a newer call (glibc falls back from
  ``clone3`` to ``clone``, from ``faccessat2`` to ``faccessat``, from ``close_range`` to closing
  in a loop; ``rseq``, ``memfd_secret`` and the NUMA calls are simply not used). ``clone3`` is
  refused this way even while recording: glibc falls back only on ENOSYS, and ``clone``'s flags
  are an argument the filter can read (``clone3`` passes them in memory it cannot).
- EPERM for the calls named in ``REFUSED_AS_UNPRIVILEGED``: the kernel itself gives an
  unprivileged process EPERM for them (or may, by a sysctl), so that is what programs that probe
  them are written to handle.
- EPERM for an allowed call with a refused argument value (a socket family, a netlink protocol,
  ``clone``'s namespace flags, an ``ioctl`` request, a ``prctl`` option, a ``personality``): the
  call exists, this use of it is not permitted.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from jaxplay.sandbox.isolation import syscalls_seen

# The kernel refuses these to a process without capabilities, or may by a sysctl: programs that probe
# them expect EPERM. They stay refused while recording, so no recording can put them on the list.
REFUSED_AS_UNPRIVILEGED: dict[str, str] = {
    **dict.fromkeys(("ptrace", "process_vm_readv", "process_vm_writev", "pidfd_getfd"),
                    "another process's memory (yama's ptrace_scope refuses with EPERM)"),
    **dict.fromkeys(("keyctl", "add_key", "request_key"), "the kernel keyrings"),
    **dict.fromkeys(("bpf", "perf_event_open", "userfaultfd"),
                    "eBPF, perf and userfaultfd (unprivileged_bpf_disabled, perf_event_paranoid, "
                    "unprivileged_userfaultfd)"),
    **dict.fromkeys(("io_uring_setup", "io_uring_enter", "io_uring_register"), "io_uring (io_uring_disabled)"),
    **dict.fromkeys(("unshare", "setns"), "new or other namespaces"),
    **dict.fromkeys(("mount", "umount2", "pivot_root", "chroot", "open_tree", "move_mount", "fsopen", "fsconfig",
                     "fsmount", "fspick", "mount_setattr"), "the mount API"),
    **dict.fromkeys(("open_by_handle_at", "name_to_handle_at"), "file handles (CAP_DAC_READ_SEARCH)"),
    **dict.fromkeys(("kexec_load", "kexec_file_load", "init_module", "finit_module", "delete_module", "reboot"),
                    "the running kernel itself (CAP_SYS_BOOT, CAP_SYS_MODULE)"),
    **dict.fromkeys(("acct", "swapon", "swapoff", "quotactl", "vhangup", "syslog", "lookup_dcookie",
                     "fanotify_init"), "host administration (CAP_SYS_ADMIN and others)"),
    **dict.fromkeys(("settimeofday", "clock_settime", "clock_adjtime", "adjtimex"), "the clock (CAP_SYS_TIME)"),
    **dict.fromkeys(("iopl", "ioperm", "uselib"), "port I/O and a.out loading (CAP_SYS_RAWIO)"),
}

# Answered ENOSYS whatever a recording saw (see the module's opening).
ABSENT_ALWAYS: dict[str, str] = {
    "clone3": "glibc falls back to clone only on ENOSYS, and clone's flags are an argument the filter reads",
}

# Never on the list, whatever a recording saw: kernel code no playground program needs, reachable
# through calls that ordinary programs do not make. A program that probes them gets ENOSYS.
NEVER_ALLOWED: dict[str, str] = {
    "modify_ldt": "16-bit segments: the code behind several kernel escapes",
    "vmsplice": "user pages spliced into pipes: the path of 2008's vmsplice root exploit and 2020's "
                "copy-on-write leak",
    "memfd_secret": "memory hidden from the kernel's own direct map",
    **dict.fromkeys(("mbind", "set_mempolicy", "set_mempolicy_home_node", "migrate_pages", "move_pages"),
                    "NUMA placement of this and other processes' pages: libnuma and hwloc read ENOSYS as no NUMA"),
    "kcmp": "comparing other processes' kernel objects",
    "process_madvise": "advice on another process's memory",
    "process_mrelease": "another process's memory",
}

AF_UNIX, AF_INET, AF_NETLINK, AF_INET6, AF_VSOCK = 1, 2, 16, 10, 40
NETLINK_ROUTE, NETLINK_XFRM, NETLINK_NETFILTER = 0, 6, 12
# CLONE_NEWNS | NEWCGROUP | NEWUTS | NEWIPC | NEWUSER | NEWPID | NEWNET
NAMESPACE_FLAGS = 0x00020000 | 0x02000000 | 0x04000000 | 0x08000000 | 0x10000000 | 0x20000000 | 0x40000000
PERSONALITY_QUERY, PER_LINUX = 0xFFFFFFFF, 0

# Argument values refused whatever a recording saw.
NEVER_SOCKET_FAMILIES = {AF_VSOCK: "AF_VSOCK: the host's and hypervisor's sockets"}
NEVER_NETLINK_PROTOCOLS = {NETLINK_XFRM: "IPsec state", NETLINK_NETFILTER: "nf_tables, the most exploited netlink"}


# Reasoned additions: calls and argument values no recording here can show, each with its reason. A
# program using a standard-library function the corpus does not happen to call must still work, on
# another C library or Python version, and on an accelerator host. The generic call behind each
# x86_64-only one (openat for open, ppoll for poll, clone for fork) is here too: recordings are made
# on x86_64, and aarch64's C library calls those.
_STANDARD_LIBRARY = (
    "Python's os, shutil, time, signal, socket, select, resource and mmap functions, and the C library "
    "under them (or another version of it): an ordinary unprivileged call on the process's own files, "
    "memory, children or clocks")
ADDED_CALLS: dict[str, str] = dict.fromkeys((
    # files and folders
    "open", "creat", "read", "write", "readv", "writev", "pread64", "pwrite64", "preadv", "pwritev", "preadv2",
    "pwritev2", "lseek", "close", "close_range", "dup", "dup2", "dup3", "pipe", "pipe2", "fcntl", "flock", "fsync",
    "fdatasync", "syncfs", "ftruncate", "truncate", "fallocate", "fadvise64", "sendfile", "copy_file_range",
    "stat", "lstat", "fstat", "newfstatat", "statx", "statfs", "fstatfs", "access", "faccessat", "faccessat2",
    "getdents64", "getcwd", "chdir", "fchdir", "mkdir", "mkdirat", "rmdir", "unlink", "unlinkat", "rename",
    "renameat", "renameat2", "link", "linkat", "symlink", "symlinkat", "readlink", "readlinkat", "chmod", "fchmod",
    "fchmodat", "chown", "fchown", "lchown", "fchownat", "mknod", "mknodat", "sync", "umask", "utimensat",
    "openat", "memfd_create", "getxattr", "lgetxattr", "fgetxattr", "listxattr",
    "llistxattr", "flistxattr", "setxattr", "lsetxattr", "fsetxattr", "removexattr", "lremovexattr",
    "fremovexattr",
    # memory
    "mmap", "munmap", "mprotect", "mremap", "madvise", "msync", "brk", "mincore",
    # processes and threads
    "execve", "fork", "vfork", "wait4", "waitid", "exit", "exit_group", "kill", "tkill", "tgkill", "pidfd_open",
    "pidfd_send_signal", "getpid", "getppid", "gettid", "getuid", "geteuid", "getgid", "getegid", "getresuid",
    "getresgid", "getgroups", "setsid", "setpgid", "getpgid", "getpgrp", "getsid", "set_tid_address",
    "set_robust_list", "rseq", "futex", "sched_yield", "sched_getaffinity", "sched_setaffinity",
    "sched_getparam", "sched_getscheduler", "sched_get_priority_max", "sched_get_priority_min", "getpriority",
    "setpriority", "getrusage", "times", "getrlimit", "setrlimit", "prlimit64", "uname", "sysinfo", "getcpu",
    "capget", "arch_prctl", "clone",
    # signals and time
    "rt_sigaction", "rt_sigprocmask", "rt_sigreturn", "rt_sigsuspend", "rt_sigtimedwait", "rt_sigpending",
    "sigaltstack", "pause", "alarm", "setitimer", "getitimer", "nanosleep", "clock_nanosleep", "clock_gettime",
    "clock_getres", "gettimeofday", "time", "timerfd_create", "timerfd_settime", "timerfd_gettime", "getrandom",
    # sockets and waiting (socket and socketpair check their family)
    "socket", "socketpair", "bind", "listen", "accept", "accept4", "connect", "shutdown", "getsockname",
    "getpeername", "getsockopt", "setsockopt", "sendto", "recvfrom", "sendmsg", "recvmsg", "sendmmsg",
    "recvmmsg", "poll", "ppoll", "select", "pselect6", "epoll_create", "epoll_create1", "epoll_ctl",
    "epoll_wait", "epoll_pwait", "epoll_pwait2", "eventfd", "eventfd2",
    # checked by their arguments (see argument_rules)
    "ioctl", "prctl",
), _STANDARD_LIBRARY) | dict.fromkeys(
    ("mlock", "mlock2", "munlock", "mlockall", "munlockall"),
    "pinned host memory for accelerator transfers; RLIMIT_MEMLOCK bounds it") | {
    "mincore": "stack unwinders (libunwind, abseil) check that an address is mapped with it",
}
ADDED_SOCKETS: dict[tuple[int, int], str] = {
    (AF_UNIX, 0): "local sockets (multiprocessing, asyncio, socketpair)",
    (AF_INET, 0): "programs that try the network get the run's empty network namespace's answer",
    (AF_INET6, 0): "the same, for IPv6",
    (AF_NETLINK, NETLINK_ROUTE): "the interface list (socket.if_nameindex, getifaddrs), read-only here",
}
ADDED_IOCTLS: dict[int, str] = {
    0x5401: "TCGETS: isatty, on every open()", 0x5402: "TCSETS: termios", 0x5403: "TCSETSW: termios",
    0x5404: "TCSETSF: termios", 0x5413: "TIOCGWINSZ: the terminal's size", 0x541B: "FIONREAD: bytes waiting",
    0x5421: "FIONBIO: os.set_blocking", 0x5450: "FIONCLEX: os.set_inheritable",
    0x5451: "FIOCLEX: os.set_inheritable", 0x540F: "TIOCGPGRP: a shell's job control",
    0x8933: "SIOCGIFINDEX: socket.if_nametoindex", 0x8910: "SIOCGIFNAME: socket.if_indextoname",
}
ADDED_PRCTL_OPTIONS: dict[int, str] = {
    1: "PR_SET_PDEATHSIG: subprocess helpers", 2: "PR_GET_PDEATHSIG", 3: "PR_GET_DUMPABLE", 4: "PR_SET_DUMPABLE",
    15: "PR_SET_NAME: naming a thread", 16: "PR_GET_NAME", 0x53564D41: "PR_SET_VMA: glibc names its mappings",
    21: "PR_GET_SECCOMP", 23: "PR_CAPBSET_READ: libcap's queries", 47: "PR_CAP_AMBIENT: libcap's queries",
    36: "PR_SET_CHILD_SUBREAPER: process supervisors", 37: "PR_GET_CHILD_SUBREAPER",
    38: "PR_SET_NO_NEW_PRIVS: already set, setting it again changes nothing", 39: "PR_GET_NO_NEW_PRIVS",
    13: "PR_GET_TIMERSLACK", 29: "PR_SET_TIMERSLACK", 41: "PR_SET_THP_DISABLE: allocators", 42: "PR_GET_THP_DISABLE",
}
# Accelerator drivers, from their headers: only the GPU and TPU device nodes a slot exposes answer them.
ACCELERATOR_IOCTL_TYPES: tuple[tuple[int, int], ...] = (
    (0xFF00, ord("F") << 8),  # NVIDIA's /dev/nvidiactl and /dev/nvidiaN: NV_IOCTL_MAGIC 'F' (nv-ioctl-numbers.h)
    (0xFF00, 0xDC00),  # TPU chips' /dev/accelN (gasket): GASKET_IOCTL_BASE 0xDC (gasket_ioctl.h)
    (0xFF00, ord(";") << 8),  # TPU hosts' /dev/vfio: VFIO_TYPE ';' (linux/vfio.h)
)
# /dev/nvidia-uvm: UVM_IOCTL_BASE(i) is i on Linux (uvm_ioctl.h), below its test ioctls at 200; and
# UVM_INITIALIZE, UVM_DEINITIALIZE (uvm_linux_ioctl.h).
ACCELERATOR_IOCTL_RANGES: tuple[tuple[int, int], ...] = ((1, 199), (0x30000001, 0x30000002))


@dataclass(frozen=True)
class ArgumentRule:
    """The values one argument of a call may take; any other is refused with EPERM.

    Only the argument's low 32 bits are read: every argument checked here is an ``int`` or
    ``unsigned int`` to the kernel, which drops the high bits itself."""
    argument: int
    values: frozenset[int] = frozenset()
    nested: Mapping[int, ArgumentRule] = field(default_factory=dict)  # a value allowed if another argument is
    ranges: tuple[tuple[int, int], ...] = ()  # (low, high), both allowed
    masked: tuple[tuple[int, int], ...] = ()  # (mask, value): allowed when value & mask == value's
    forbidden_bits: int = 0  # refused when any of these bits is set
    any_other: bool = False  # every value without a forbidden bit is allowed


def recorded(key: str) -> set[Any]:
    """The union, over every recorded runtime, of one entry of ``syscalls_seen.RECORDINGS``."""
    found: set[Any] = set()
    for recording in syscalls_seen.RECORDINGS.values():
        found.update(tuple(item) if isinstance(item, list) else item for item in recording.get(key, ()))
    return found


@functools.cache
def allowed_calls() -> frozenset[str]:
    """Every call the filter allows (those with an argument rule included)."""
    calls = recorded("calls") | set(ADDED_CALLS)
    return frozenset(calls - set(REFUSED_AS_UNPRIVILEGED) - set(ABSENT_ALWAYS) - set(NEVER_ALLOWED))


def argument_rules(recording: bool = False) -> dict[str, ArgumentRule]:
    """The calls allowed only with some argument values, each with its rule. While recording only
    ``clone``'s namespace flags are checked: the other arguments are what a recording learns."""
    clone = ArgumentRule(0, forbidden_bits=NAMESPACE_FLAGS, any_other=True)
    if recording:
        return {"clone": clone}
    return {name: rule for name, rule in recorded_rules().items() if name in allowed_calls()} | {"clone": clone}


@functools.cache
def recorded_rules() -> dict[str, ArgumentRule]:
    sockets = recorded("socket") | set(ADDED_SOCKETS)
    families = {family for family, _ in sockets if family != AF_NETLINK} - set(NEVER_SOCKET_FAMILIES)
    netlink = {protocol for family, protocol in sockets if family == AF_NETLINK} - set(NEVER_NETLINK_PROTOCOLS)
    socket_rule = ArgumentRule(0, frozenset(families), {AF_NETLINK: ArgumentRule(2, frozenset(netlink))}
                               if netlink else {})
    pairs = ArgumentRule(0, frozenset(recorded("socketpair") - set(NEVER_SOCKET_FAMILIES)))
    ioctl = ArgumentRule(1, frozenset(recorded("ioctl") | set(ADDED_IOCTLS)), ranges=ACCELERATOR_IOCTL_RANGES,
                         masked=ACCELERATOR_IOCTL_TYPES)
    prctl = ArgumentRule(0, frozenset(recorded("prctl") | set(ADDED_PRCTL_OPTIONS)))
    personality = ArgumentRule(0, frozenset(recorded("personality") & {PERSONALITY_QUERY, PER_LINUX}))
    return {"ioctl": ioctl, "socket": socket_rule, "socketpair": pairs, "prctl": prctl, "personality": personality}
