"""Reading strace's logs of a sandbox: only filtered processes count, with the arguments the filter checks."""

from __future__ import annotations

from pathlib import Path

from jaxplay.sandbox.isolation import strace_log

# The run's process (host pid 100): its calls before the filter are the zygote's code and do not count.
RUN = """\
getpid()                                = 4 /* 100 in strace's PID NS */
socket(0x10, 0x3|0x80000, 0x9)          = 5
prctl(0x16, 0x2, {len=60, filter=0x7f3c04ee30f0}) = 0
clone3({flags=0x3d0f00, child_tid=0x7f3c0afff990, parent_tid=0x7f3c0afff990, exit_signal=0, stack=0x7f3c0a7ff000, \
stack_size=0x7fff80, tls=0x7f3c0afff6c0}, 88) = -1 ENOSYS (Function not implemented)
clone(child_stack=0x7f3c0affef70, flags=0x3d0f00, parent_tid=[3 /* 101 in strace's PID NS */], tls=0x7f3c0afff6c0, \
child_tidptr=0x7f3c0afff990) = 3 /* 101 in strace's PID NS */
socket(0x1, 0x1|0x80800, 0)             = 3
socket(0x10, 0x3|0x80000, 0)            = 5
ioctl(3, 0x5401, 0x7ffd8c0e2a40)        = -1 ENOTTY (Inappropriate ioctl for device)
prctl(0xf, 0x7f3c0b000000)              = 0
--- SIGCHLD {si_signo=SIGCHLD, si_code=CLD_EXITED, si_pid=7, si_uid=1000, si_status=0} ---
vfork()                                 = 102
pause(
"""
THREAD = """\
futex(0x7f3c0afff990, 0x80, 0x2, NULL)  = 0
socketpair(0x1, 0x5|0x80000, 0, [3, 4]) = 0
exit(0)                                 = ?
+++ exited with 0 +++
"""
CHILD = """\
execve("/bin/echo", ["/bin/echo", "hi"], 0x7ffd8c0e2b58 /* 9 vars */) = 0
personality(0xffffffff)                 = 0
exit_group(0)                           = ?
"""
ZYGOTE = """\
mount("tmpfs", "/tmp", "tmpfs", 0, "size=536870912") = 0
clone(child_stack=NULL, flags=0x1200011, child_tidptr=0x7f3c215d6e50) = 100
"""


def test_only_the_filtered_processes_and_what_they_start_afterwards_count(tmp_path: Path) -> None:
    for pid, text in {100: RUN, 101: THREAD, 102: CHILD, 99: ZYGOTE}.items():
        (tmp_path / f"trace.{pid}").write_text(text)
    seen = strace_log.read_folder(tmp_path, refused_by_name={"clone3", "mount"})
    assert seen.filtered_tasks == 3
    assert seen.calls == {"clone", "socket", "ioctl", "prctl", "vfork", "pause", "futex", "socketpair", "exit",
                          "execve", "personality", "exit_group"}
    assert seen.refused == {"clone3"}  # attempted, refused by the recording filter: not on the list
    assert seen.socket == {(1, 0), (16, 0)}  # the netlink socket with protocol 9 came before the filter
    assert seen.socketpair == {1} and seen.ioctl == {0x5401} and seen.prctl == {0xF}
    assert seen.personality == {0xFFFFFFFF} and seen.clone == {0x3D0F00}


def test_a_call_strace_has_no_name_for_is_named_by_the_table(tmp_path: Path) -> None:
    (tmp_path / "trace.7").write_text("prctl(0x16, 0x2, {len=9, filter=0x1}) = 0\nsyscall_0x1bf(0, 0) = -1 ENOSYS\n")
    assert strace_log.read_folder(tmp_path, set()).calls == {"memfd_secret"}
