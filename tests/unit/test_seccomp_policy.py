"""The run's seccomp filter is an allow-list built from the recorded calls, and refuses as documented.

The built BPF program is asked directly (tests/bpf_evaluator.py runs it as the kernel would);
tests/security/test_kernel_allow_list.py asks the kernel inside a real run.
"""

from __future__ import annotations

import subprocess
import sys

import pytest

from jaxplay.sandbox.isolation import seccomp, syscall_numbers, syscall_policy, syscalls_seen
from tests.bpf_evaluator import answer

MACHINES = ("x86_64", "aarch64")


@pytest.fixture
def recordings(monkeypatch: pytest.MonkeyPatch):
    """The recorded calls, replaceable by a test; the policy's caches forget what they computed."""
    def replace(value: dict) -> None:
        monkeypatch.setattr(syscalls_seen, "RECORDINGS", value)
        syscall_policy.allowed_calls.cache_clear()
        syscall_policy.recorded_rules.cache_clear()

    yield replace
    syscall_policy.allowed_calls.cache_clear()
    syscall_policy.recorded_rules.cache_clear()


def test_the_filter_is_built_from_the_recording(recordings) -> None:
    """What the recording file lists is allowed; a call it does not list (and no addition names) is not."""
    assert syscalls_seen.RECORDINGS, "sandbox/isolation/syscalls_seen.py is empty: run scripts/record-syscalls"
    for recording in syscalls_seen.RECORDINGS.values():
        for call in recording["calls"]:
            if call not in syscall_policy.NEVER_ALLOWED:
                assert answer("x86_64", call, 1, 0x5401) == "allow" or call in syscall_policy.argument_rules(), call
    assert answer("x86_64", "splice") == "ENOSYS" and answer("x86_64", "ioctl", 3, 0x1234) == "EPERM"
    base = next(iter(syscalls_seen.RECORDINGS.values()))
    recordings({"a runtime": {**base, "calls": [*base["calls"], "splice"], "ioctl": [*base["ioctl"], 0x1234]}})
    assert answer("x86_64", "splice") == "allow" and answer("aarch64", "splice") == "allow"
    assert answer("x86_64", "ioctl", 3, 0x1234) == "allow"
    recordings({})
    assert answer("x86_64", "splice") == "ENOSYS"


def test_the_calls_named_in_the_issue_fail_even_when_recorded(recordings) -> None:
    base = next(iter(syscalls_seen.RECORDINGS.values()))
    every_call = [*base["calls"], *syscall_policy.NEVER_ALLOWED, "personality"]
    recordings({"greedy": {**base, "calls": every_call, "personality": [0x0400000, 0x0008, 0xFFFFFFFF],
                           "socket": [(40, 0), (16, 6), (16, 12), (1, 0)]}})
    for machine in MACHINES:
        for call in ("modify_ldt", "vmsplice", "memfd_secret", "mbind", "set_mempolicy", "migrate_pages",
                     "move_pages", "kcmp", "process_madvise"):
            if syscall_numbers.NUMBERS[call][seccomp.ARCHES[machine][0]] is not None:
                assert answer(machine, call) == "ENOSYS", (machine, call)
        assert answer(machine, "personality", 0x0400000) == "EPERM"  # READ_IMPLIES_EXEC
        assert answer(machine, "personality", 0x0008) == "EPERM"  # PER_LINUX32
        assert answer(machine, "personality", 0xFFFFFFFF) == "allow"  # the query, as recorded
        assert answer(machine, "socket", 40, 1, 0) == "EPERM"  # AF_VSOCK
        assert answer(machine, "socket", 16, 3, 6) == "EPERM"  # NETLINK_XFRM
        assert answer(machine, "socket", 16, 3, 12) == "EPERM"  # NETLINK_NETFILTER
        assert answer(machine, "socket", 1, 1, 0) == "allow"


@pytest.mark.parametrize("machine", MACHINES)
def test_each_refusal_reads_as_the_errno_rule_says(machine: str) -> None:
    for call in syscall_policy.REFUSED_AS_UNPRIVILEGED:
        if syscall_numbers.NUMBERS[call][seccomp.ARCHES[machine][0]] is not None:
            assert answer(machine, call) == "EPERM", call
    assert answer(machine, "clone3") == "ENOSYS"  # glibc falls back to clone on ENOSYS only
    assert answer(machine, 1000) == "ENOSYS" and answer(machine, 460) == "ENOSYS"  # beyond the table, unlisted
    assert answer(machine, "clone", 0x3D0F00) == "allow"  # a thread
    assert answer(machine, "clone", 0x10000000 | 17) == "EPERM"  # CLONE_NEWUSER
    assert answer(machine, "clone", (0x10000000 << 32) | 17) == "allow"  # high bits: the kernel ignores them
    assert answer(machine, "socket", 16, 3, 0) == "allow"  # netlink route: the interface list
    assert answer(machine, "prctl", 15) == "allow" and answer(machine, "prctl", 35) == "EPERM"  # PR_SET_MM
    if machine == "x86_64":
        assert answer(machine, 0x40000000 | 39) == "EPERM"  # an x32 call


@pytest.mark.parametrize("machine", MACHINES)
def test_terminal_ioctls_that_inject_or_change_line_disciplines_are_refused(machine: str) -> None:
    assert answer(machine, "ioctl", 0, 0x5401) == "allow"  # TCGETS: isatty
    for request in (0x5412, 0x5423, 0x541C, 0x541D):  # TIOCSTI, TIOCSETD, TIOCLINUX, TIOCCONS
        assert answer(machine, "ioctl", 0, request) == "EPERM", hex(request)


@pytest.mark.parametrize("machine", MACHINES)
def test_the_gpu_and_tpu_drivers_requests_pass(machine: str) -> None:
    """CUDA's requests on /dev/nvidia* (RM escapes of type 'F', UVM's plain numbers) and the TPU drivers'."""
    nv_rm_alloc = 0xC0000000 | (0x30 << 16) | (ord("F") << 8) | 0x2B  # _IOWR('F', NV_ESC_RM_ALLOC, 48 bytes)
    nv_card_info = 0xC0000000 | (0x600 << 16) | (ord("F") << 8) | 200  # _IOWR('F', NV_ESC_CARD_INFO, ...)
    vfio_map_dma = 0x40000000 | (32 << 16) | (ord(";") << 8) | 113  # _IOW(VFIO_TYPE, VFIO_BASE + 13, ...)
    gasket_set_eventfd = 0x40000000 | (8 << 16) | (0xDC << 8) | 1  # _IOW(GASKET_IOCTL_BASE, 1, ...)
    for request in (nv_rm_alloc, nv_card_info, 0x30000001, 0x30000002, 1, 37, 75, vfio_map_dma, gasket_set_eventfd):
        assert answer(machine, "ioctl", 5, request) == "allow", hex(request)
    assert answer(machine, "ioctl", 5, 201) == "EPERM"  # UVM's test requests


@pytest.mark.parametrize("machine", MACHINES)
def test_the_recording_filter_refuses_only_by_name(machine: str) -> None:
    assert answer(machine, "splice", recording=True) == "allow"
    assert answer(machine, "socket", 40, 1, 0, recording=True) == "allow"
    assert answer(machine, 1000, recording=True) == "allow"
    assert answer(machine, "clone3", recording=True) == "ENOSYS"
    assert answer(machine, "bpf", recording=True) == "EPERM"
    assert answer(machine, "clone", 0x10000000 | 17, recording=True) == "EPERM"


def test_the_program_fits_the_kernel_and_every_allowed_call_has_a_number() -> None:
    for machine in MACHINES:
        assert len(seccomp.program(machine)) < 4096
    for call in syscall_policy.allowed_calls():
        assert call in syscall_numbers.NUMBERS, call


@pytest.mark.skipif(not syscall_numbers.X86_64_HEADER.exists() or not syscall_numbers.GENERIC_HEADER.exists(),
                    reason="Linux's uapi headers are not installed (Debian linux-libc-dev)")
def test_the_number_table_agrees_with_the_kernel_headers() -> None:
    table = syscall_numbers.table_from_headers()
    assert {name: syscall_numbers.NUMBERS[name] for name in table} == table


@pytest.mark.skipif(sys.platform != "linux", reason="seccomp is Linux's")
def test_the_kernel_takes_the_filter() -> None:
    """Installed for real in a child: an allowed call works, an unlisted one is ENOSYS, a refused one EPERM."""
    probe = """
import ctypes, errno, os
from jaxplay.sandbox.isolation import seccomp
libc = ctypes.CDLL(None, use_errno=True)
libc.prctl(38, 1, 0, 0, 0)  # PR_SET_NO_NEW_PRIVS, as the run's process has it
seccomp.install()
def raw(number, *args):
    return "ok" if libc.syscall(number, *args) >= 0 else errno.errorcode[ctypes.get_errno()]
x86 = os.uname().machine == "x86_64"
print(os.getpid() > 0, raw(1000), raw(101 if x86 else 117, 0, 0, 0, 0))
"""
    result = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    words = result.stdout.split()
    assert words[:3] == ["True", "ENOSYS", "EPERM"], result.stdout
