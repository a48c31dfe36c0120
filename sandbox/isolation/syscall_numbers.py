"""System call numbers by name: (x86_64, aarch64), None where the architecture has no such call.

From Linux's uapi headers: asm/unistd_64.h for x86_64 and asm-generic/unistd.h (64-bit, as arm64
builds it) for aarch64, Linux 6.1, plus the calls added since (451 on: one number on every
architecture). ``python -m jaxplay.sandbox.isolation.syscall_numbers`` prints the table again from
the headers installed here (Debian ``linux-libc-dev``); a unit test checks that the two agree.
"""

from __future__ import annotations

import re
from pathlib import Path

X86_64_HEADER = Path("/usr/include/x86_64-linux-gnu/asm/unistd_64.h")
GENERIC_HEADER = Path("/usr/include/asm-generic/unistd.h")

NUMBERS: dict[str, tuple[int | None, int | None]] = {
    "read": (0, 63), "write": (1, 64), "open": (2, None), "close": (3, 57), "stat": (4, None), "fstat": (5, 80),
    "lstat": (6, None), "poll": (7, None), "lseek": (8, 62), "mmap": (9, 222), "mprotect": (10, 226),
    "munmap": (11, 215), "brk": (12, 214), "rt_sigaction": (13, 134), "rt_sigprocmask": (14, 135),
    "rt_sigreturn": (15, 139), "ioctl": (16, 29), "pread64": (17, 67), "pwrite64": (18, 68), "readv": (19, 65),
    "writev": (20, 66), "access": (21, None), "pipe": (22, None), "select": (23, None), "sched_yield": (24, 124),
    "mremap": (25, 216), "msync": (26, 227), "mincore": (27, 232), "madvise": (28, 233), "shmget": (29, 194),
    "shmat": (30, 196), "shmctl": (31, 195), "dup": (32, 23), "dup2": (33, None), "pause": (34, None),
    "nanosleep": (35, 101), "getitimer": (36, 102), "alarm": (37, None), "setitimer": (38, 103), "getpid": (39, 172),
    "sendfile": (40, 71), "socket": (41, 198), "connect": (42, 203), "accept": (43, 202), "sendto": (44, 206),
    "recvfrom": (45, 207), "sendmsg": (46, 211), "recvmsg": (47, 212), "shutdown": (48, 210), "bind": (49, 200),
    "listen": (50, 201), "getsockname": (51, 204), "getpeername": (52, 205), "socketpair": (53, 199),
    "setsockopt": (54, 208), "getsockopt": (55, 209), "clone": (56, 220), "fork": (57, None), "vfork": (58, None),
    "execve": (59, 221), "exit": (60, 93), "wait4": (61, 260), "kill": (62, 129), "uname": (63, 160),
    "semget": (64, 190), "semop": (65, 193), "semctl": (66, 191), "shmdt": (67, 197), "msgget": (68, 186),
    "msgsnd": (69, 189), "msgrcv": (70, 188), "msgctl": (71, 187), "fcntl": (72, 25), "flock": (73, 32),
    "fsync": (74, 82), "fdatasync": (75, 83), "truncate": (76, 45), "ftruncate": (77, 46), "getdents": (78, None),
    "getcwd": (79, 17), "chdir": (80, 49), "fchdir": (81, 50), "rename": (82, None), "mkdir": (83, None),
    "rmdir": (84, None), "creat": (85, None), "link": (86, None), "unlink": (87, None), "symlink": (88, None),
    "readlink": (89, None), "chmod": (90, None), "fchmod": (91, 52), "chown": (92, None), "fchown": (93, 55),
    "lchown": (94, None), "umask": (95, 166), "gettimeofday": (96, 169), "getrlimit": (97, 163),
    "getrusage": (98, 165), "sysinfo": (99, 179), "times": (100, 153), "ptrace": (101, 117), "getuid": (102, 174),
    "syslog": (103, 116), "getgid": (104, 176), "setuid": (105, 146), "setgid": (106, 144), "geteuid": (107, 175),
    "getegid": (108, 177), "setpgid": (109, 154), "getppid": (110, 173), "getpgrp": (111, None), "setsid": (112, 157),
    "setreuid": (113, 145), "setregid": (114, 143), "getgroups": (115, 158), "setgroups": (116, 159),
    "setresuid": (117, 147), "getresuid": (118, 148), "setresgid": (119, 149), "getresgid": (120, 150),
    "getpgid": (121, 155), "setfsuid": (122, 151), "setfsgid": (123, 152), "getsid": (124, 156), "capget": (125, 90),
    "capset": (126, 91), "rt_sigpending": (127, 136), "rt_sigtimedwait": (128, 137), "rt_sigqueueinfo": (129, 138),
    "rt_sigsuspend": (130, 133), "sigaltstack": (131, 132), "utime": (132, None), "mknod": (133, None),
    "uselib": (134, None), "personality": (135, 92), "ustat": (136, None), "statfs": (137, 43), "fstatfs": (138, 44),
    "sysfs": (139, None), "getpriority": (140, 141), "setpriority": (141, 140), "sched_setparam": (142, 118),
    "sched_getparam": (143, 121), "sched_setscheduler": (144, 119), "sched_getscheduler": (145, 120),
    "sched_get_priority_max": (146, 125), "sched_get_priority_min": (147, 126), "sched_rr_get_interval": (148, 127),
    "mlock": (149, 228), "munlock": (150, 229), "mlockall": (151, 230), "munlockall": (152, 231),
    "vhangup": (153, 58), "modify_ldt": (154, None), "pivot_root": (155, 41), "_sysctl": (156, None),
    "prctl": (157, 167), "arch_prctl": (158, None), "adjtimex": (159, 171), "setrlimit": (160, 164),
    "chroot": (161, 51), "sync": (162, 81), "acct": (163, 89), "settimeofday": (164, 170), "mount": (165, 40),
    "umount2": (166, 39), "swapon": (167, 224), "swapoff": (168, 225), "reboot": (169, 142),
    "sethostname": (170, 161), "setdomainname": (171, 162), "iopl": (172, None), "ioperm": (173, None),
    "create_module": (174, None), "init_module": (175, 105), "delete_module": (176, 106),
    "get_kernel_syms": (177, None), "query_module": (178, None), "quotactl": (179, 60), "nfsservctl": (180, 42),
    "getpmsg": (181, None), "putpmsg": (182, None), "afs_syscall": (183, None), "tuxcall": (184, None),
    "security": (185, None), "gettid": (186, 178), "readahead": (187, 213), "setxattr": (188, 5),
    "lsetxattr": (189, 6), "fsetxattr": (190, 7), "getxattr": (191, 8), "lgetxattr": (192, 9), "fgetxattr": (193, 10),
    "listxattr": (194, 11), "llistxattr": (195, 12), "flistxattr": (196, 13), "removexattr": (197, 14),
    "lremovexattr": (198, 15), "fremovexattr": (199, 16), "tkill": (200, 130), "time": (201, None),
    "futex": (202, 98), "sched_setaffinity": (203, 122), "sched_getaffinity": (204, 123),
    "set_thread_area": (205, None), "io_setup": (206, 0), "io_destroy": (207, 1), "io_getevents": (208, 4),
    "io_submit": (209, 2), "io_cancel": (210, 3), "get_thread_area": (211, None), "lookup_dcookie": (212, 18),
    "epoll_create": (213, None), "epoll_ctl_old": (214, None), "epoll_wait_old": (215, None),
    "remap_file_pages": (216, 234), "getdents64": (217, 61), "set_tid_address": (218, 96),
    "restart_syscall": (219, 128), "semtimedop": (220, 192), "fadvise64": (221, 223), "timer_create": (222, 107),
    "timer_settime": (223, 110), "timer_gettime": (224, 108), "timer_getoverrun": (225, 109),
    "timer_delete": (226, 111), "clock_settime": (227, 112), "clock_gettime": (228, 113), "clock_getres": (229, 114),
    "clock_nanosleep": (230, 115), "exit_group": (231, 94), "epoll_wait": (232, None), "epoll_ctl": (233, 21),
    "tgkill": (234, 131), "utimes": (235, None), "vserver": (236, None), "mbind": (237, 235),
    "set_mempolicy": (238, 237), "get_mempolicy": (239, 236), "mq_open": (240, 180), "mq_unlink": (241, 181),
    "mq_timedsend": (242, 182), "mq_timedreceive": (243, 183), "mq_notify": (244, 184), "mq_getsetattr": (245, 185),
    "kexec_load": (246, 104), "waitid": (247, 95), "add_key": (248, 217), "request_key": (249, 218),
    "keyctl": (250, 219), "ioprio_set": (251, 30), "ioprio_get": (252, 31), "inotify_init": (253, None),
    "inotify_add_watch": (254, 27), "inotify_rm_watch": (255, 28), "migrate_pages": (256, 238), "openat": (257, 56),
    "mkdirat": (258, 34), "mknodat": (259, 33), "fchownat": (260, 54), "futimesat": (261, None),
    "newfstatat": (262, 79), "unlinkat": (263, 35), "renameat": (264, 38), "linkat": (265, 37),
    "symlinkat": (266, 36), "readlinkat": (267, 78), "fchmodat": (268, 53), "faccessat": (269, 48),
    "pselect6": (270, 72), "ppoll": (271, 73), "unshare": (272, 97), "set_robust_list": (273, 99),
    "get_robust_list": (274, 100), "splice": (275, 76), "tee": (276, 77), "sync_file_range": (277, 84),
    "vmsplice": (278, 75), "move_pages": (279, 239), "utimensat": (280, 88), "epoll_pwait": (281, 22),
    "signalfd": (282, None), "timerfd_create": (283, 85), "eventfd": (284, None), "fallocate": (285, 47),
    "timerfd_settime": (286, 86), "timerfd_gettime": (287, 87), "accept4": (288, 242), "signalfd4": (289, 74),
    "eventfd2": (290, 19), "epoll_create1": (291, 20), "dup3": (292, 24), "pipe2": (293, 59),
    "inotify_init1": (294, 26), "preadv": (295, 69), "pwritev": (296, 70), "rt_tgsigqueueinfo": (297, 240),
    "perf_event_open": (298, 241), "recvmmsg": (299, 243), "fanotify_init": (300, 262), "fanotify_mark": (301, 263),
    "prlimit64": (302, 261), "name_to_handle_at": (303, None), "open_by_handle_at": (304, None),
    "clock_adjtime": (305, 266), "syncfs": (306, 267), "sendmmsg": (307, 269), "setns": (308, 268),
    "getcpu": (309, 168), "process_vm_readv": (310, 270), "process_vm_writev": (311, 271), "kcmp": (312, 272),
    "finit_module": (313, 273), "sched_setattr": (314, 274), "sched_getattr": (315, 275), "renameat2": (316, 276),
    "seccomp": (317, 277), "getrandom": (318, 278), "memfd_create": (319, 279), "kexec_file_load": (320, 294),
    "bpf": (321, 280), "execveat": (322, 281), "userfaultfd": (323, 282), "membarrier": (324, 283),
    "mlock2": (325, 284), "copy_file_range": (326, 285), "preadv2": (327, 286), "pwritev2": (328, 287),
    "pkey_mprotect": (329, 288), "pkey_alloc": (330, 289), "pkey_free": (331, 290), "statx": (332, 291),
    "io_pgetevents": (333, 292), "rseq": (334, 293), "pidfd_send_signal": (424, 424), "io_uring_setup": (425, 425),
    "io_uring_enter": (426, 426), "io_uring_register": (427, 427), "open_tree": (428, 428), "move_mount": (429, 429),
    "fsopen": (430, 430), "fsconfig": (431, 431), "fsmount": (432, 432), "fspick": (433, 433),
    "pidfd_open": (434, 434), "clone3": (435, 435), "close_range": (436, 436), "openat2": (437, 437),
    "pidfd_getfd": (438, 438), "faccessat2": (439, 439), "process_madvise": (440, 440), "epoll_pwait2": (441, 441),
    "mount_setattr": (442, 442), "quotactl_fd": (443, 443), "landlock_create_ruleset": (444, 444),
    "landlock_add_rule": (445, 445), "landlock_restrict_self": (446, 446), "memfd_secret": (447, 447),
    "process_mrelease": (448, 448), "futex_waitv": (449, 449), "set_mempolicy_home_node": (450, 450),
}
# Added after Linux 6.1: the same number on x86_64 and aarch64.
NEWER = ("cachestat", "fchmodat2", "map_shadow_stack", "futex_wake", "futex_wait", "futex_requeue", "statmount",
         "listmount", "lsm_get_self_attr", "lsm_set_self_attr", "lsm_list_modules", "mseal")
NUMBERS.update({name: (451 + i, 451 + i) for i, name in enumerate(NEWER)})


def number(name: str, column: int) -> int | None:
    """``name``'s number in ``column`` (0: x86_64, 1: aarch64); None where that architecture lacks it."""
    return NUMBERS[name][column]


def x86_64_from_header(path: Path = X86_64_HEADER) -> dict[str, int]:
    found: dict[str, int] = {}
    for line in path.read_text().splitlines():
        if match := re.match(r"#define __NR_(\w+) (\d+)$", line.strip()):
            found[match[1]] = int(match[2])
    return found


def aarch64_from_header(path: Path = GENERIC_HEADER) -> dict[str, int]:
    """The generic table as a 64-bit arm64 kernel builds it: no 32-bit-only calls, ``sync_file_range``
    (not ``...2``), the ``__NR3264_`` names under their 64-bit names."""
    found: dict[str, int] = {}
    excluded: list[bool] = []  # one per open #if: does this branch leave its calls out?
    for line in (raw.strip() for raw in path.read_text().splitlines()):
        if line.startswith("#if"):
            excluded.append("__BITS_PER_LONG == 32 ||" in line or "|| __BITS_PER_LONG == 32" in line
                            or "__ARCH_WANT_SYNC_FILE_RANGE2" in line)
        elif line.startswith("#else"):
            excluded[-1] = not excluded[-1]
        elif line.startswith("#endif"):
            excluded.pop()
        elif not any(excluded) and (match := re.match(r"#define __NR(3264)?_(\w+) (\d+)$", line)):
            name = "newfstatat" if match[1] and match[2] == "fstatat" else match[2]
            if name not in ("syscalls", "arch_specific_syscall"):
                found[name] = int(match[3])
    return found


def table_from_headers() -> dict[str, tuple[int | None, int | None]]:
    x86, arm = x86_64_from_header(), aarch64_from_header()
    names = sorted(set(x86) | set(arm), key=lambda n: x86.get(n, 10000 + arm.get(n, 0)))
    return {name: (x86.get(name), arm.get(name)) for name in names}


def main() -> None:
    entries = [f"\"{name}\": {numbers}," for name, numbers in table_from_headers().items()]
    line = "   "
    for entry in entries:
        if len(line) + len(entry) + 1 > 118:
            print(line)
            line = "   "
        line += " " + entry
    print(line)


if __name__ == "__main__":
    main()
