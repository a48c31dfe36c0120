"""The run's seccomp filter: an allow-list of the kernel calls programs were seen to make, as BPF.

What the filter allows, and how each refusal reads, is ``syscall_policy``; this module turns it into a
classic BPF program and installs it. The program, for each call::

    foreign architecture, x32 numbers        -> EPERM (they would dodge every check below)
    a call whose arguments are checked       -> its block: ALLOW, or EPERM for a refused value
      (ioctl first: the hot one, reached in a few instructions)
    any other call                            -> a binary search over the numbers: ALLOW, EPERM or ENOSYS

No check of a plain call loads an argument, so since Linux 5.11 the kernel answers every plain
allowed call from its per-filter cache without running the program at all; the rest take a few
dozen instructions.

Installed in the run's own process before any thread exists, after ``no_new_privs``
(sandbox/isolation/namespaces.py); its threads and children inherit it. The zygote of a sandbox
started to record calls (``scripts/record-syscalls``) installs ``recording`` filters instead: the
refusals by name alone, every other call allowed, so that what programs call when nothing
else is in their way shows in the trace.
"""

from __future__ import annotations

import ctypes
import errno
import functools
import os
import struct
from dataclasses import dataclass

from jaxplay.sandbox.isolation import syscall_policy as policy
from jaxplay.sandbox.isolation.syscall_numbers import NUMBERS

ARCHES = {"x86_64": (0, 0xC000003E), "aarch64": (1, 0xC00000B7)}  # column in NUMBERS, AUDIT_ARCH_*
X32_SYSCALL_BIT = 0x40000000

LD_W_ABS, JEQ, JGT, JGE, JSET, JA, AND, RET = 0x20, 0x15, 0x25, 0x35, 0x45, 0x05, 0x54, 0x06
RET_ALLOW, RET_ERRNO = 0x7FFF0000, 0x00050000
OFFSET_NR, OFFSET_ARCH, OFFSET_ARGS = 0, 4, 16  # struct seccomp_data; an argument's low word (little-endian)
PR_SET_SECCOMP, SECCOMP_MODE_FILTER = 22, 2

ALLOW, EPERM, ENOSYS = RET_ALLOW, RET_ERRNO | errno.EPERM, RET_ERRNO | errno.ENOSYS

recording = False  # set by a zygote started with --record-syscalls (sandbox/syscall_recording.py)


@dataclass(frozen=True)
class Op:
    """One instruction with symbolic jumps: ``jt``/``jf`` name a label (None: the next instruction)."""
    code: int
    k: int = 0
    jt: str | None = None
    jf: str | None = None
    label: str | None = None  # this instruction's own label


class Assembler:
    def __init__(self) -> None:
        self.ops: list[Op] = []
        self._names = 0

    def new_label(self, hint: str) -> str:
        self._names += 1
        return f"{hint}.{self._names}"

    def emit(self, code: int, k: int = 0, jt: str | None = None, jf: str | None = None,
             label: str | None = None) -> None:
        self.ops.append(Op(code, k, jt, jf, label))

    def instructions(self) -> list[tuple[int, int, int, int]]:
        """(code, jt, jf, k) with every jump resolved; ValueError if a conditional jump is too far (255)."""
        where = {op.label: i for i, op in enumerate(self.ops) if op.label is not None}

        def offset(i: int, label: str | None) -> int:
            if label is None:
                return 0
            distance = where[label] - i - 1
            if distance < 0:
                raise ValueError(f"backward jump to {label}")
            return distance

        out = []
        for i, op in enumerate(self.ops):
            if op.code == JA:
                out.append((JA, 0, 0, offset(i, op.jt)))
                continue
            jt, jf = offset(i, op.jt), offset(i, op.jf)
            if jt > 255 or jf > 255:
                raise ValueError(f"jump too far at {i}: {jt}, {jf}")
            out.append((op.code, jt, jf, op.k))
        return out


def program(machine: str, recording_calls: bool = False) -> list[tuple[int, int, int, int]]:
    """The BPF program for ``machine``: (code, jt, jf, k) instructions."""
    column, audit_arch = ARCHES[machine]
    rules = policy.argument_rules(recording_calls)
    asm = Assembler()
    asm.emit(LD_W_ABS, OFFSET_ARCH)
    asm.emit(JEQ, audit_arch, jt="nr")
    asm.emit(RET, EPERM)
    asm.emit(LD_W_ABS, OFFSET_NR, label="nr")
    if machine == "x86_64":
        asm.emit(JGE, X32_SYSCALL_BIT, jf="calls.0")
        asm.emit(RET, EPERM)
    checked = [(NUMBERS[name][column], rule) for name, rule in rules.items() if NUMBERS[name][column] is not None]
    for i, (number, rule) in enumerate(checked):
        asm.emit(JEQ, number, jf=f"calls.{i + 1}", label=f"calls.{i}")
        _argument_block(asm, rule)
    asm.emit(JA, jt="tree", label=f"calls.{len(checked)}")
    actions = _actions(column, recording_calls, set(rules))
    _search(asm, _intervals(actions, ALLOW if recording_calls else ENOSYS), "tree")
    return asm.instructions()


def _argument_block(asm: Assembler, rule: policy.ArgumentRule) -> None:
    """Check one argument's low word (the kernel reads each checked argument as a 32-bit int); a value
    the rule does not allow is refused with EPERM: the call exists, this use of it is not permitted."""
    allow, refuse = asm.new_label("allow"), asm.new_label("refuse")
    offset = OFFSET_ARGS + 8 * rule.argument
    asm.emit(LD_W_ABS, offset)
    if rule.forbidden_bits:
        asm.emit(JSET, rule.forbidden_bits, jt=refuse)
    if rule.any_other:
        asm.emit(RET, ALLOW)
    nested: list[tuple[str, policy.ArgumentRule]] = []
    for value in sorted(rule.values):
        asm.emit(JEQ, value, jt=allow)
    for value, inner in sorted(rule.nested.items()):
        label = asm.new_label("nested")
        nested.append((label, inner))
        asm.emit(JEQ, value, jt=label)
    for low, high in rule.ranges:
        after = asm.new_label("range")
        asm.emit(JGE, low, jf=after)
        asm.emit(JGT, high, jf=allow)
        asm.emit(LD_W_ABS, offset, label=after)  # a landing place; reloads the same word
    for mask, value in rule.masked:
        asm.emit(AND, mask)
        asm.emit(JEQ, value, jt=allow)
        asm.emit(LD_W_ABS, offset)
    asm.emit(RET, EPERM, label=refuse)
    for label, inner in nested:
        asm.emit(LD_W_ABS, OFFSET_ARGS + 8 * inner.argument, label=label)
        for value in sorted(inner.values):
            asm.emit(JEQ, value, jt=allow)
        asm.emit(RET, EPERM)
    asm.emit(RET, ALLOW, label=allow)


def _actions(column: int, recording_calls: bool, checked: set[str]) -> dict[int, int]:
    """Each numbered call's answer (calls with argument blocks are answered before the search)."""
    actions: dict[int, int] = {}
    for name, numbers in NUMBERS.items():
        number = numbers[column]
        if number is None or name in checked:
            continue
        if name in policy.REFUSED_AS_UNPRIVILEGED:
            actions[number] = EPERM
        elif name in policy.ABSENT_ALWAYS:
            actions[number] = ENOSYS
        elif recording_calls or name in policy.allowed_calls():
            actions[number] = ALLOW
    return actions


def _intervals(actions: dict[int, int], unlisted: int) -> list[tuple[int, int]]:
    """(first number, answer) of each run of equal answers from 0 on; a number not in ``actions``
    (none of ours, or beyond the table) gets ``unlisted``."""
    intervals: list[tuple[int, int]] = []
    for number in range(max(actions) + 2):
        action = actions.get(number, unlisted)
        if not intervals or intervals[-1][1] != action:
            intervals.append((number, action))
    return intervals


def _search(asm: Assembler, intervals: list[tuple[int, int]], label: str) -> None:
    """A binary search over the intervals' first numbers; each leaf returns its answer."""
    if len(intervals) == 1:
        asm.emit(RET, intervals[0][1], label=label)
        return
    middle = len(intervals) // 2
    right, left = asm.new_label("ge"), asm.new_label("lt")
    asm.emit(JGE, intervals[middle][0], jf=left, label=label)  # true: the next instruction, a long jump
    asm.emit(JA, jt=right)
    _search(asm, intervals[:middle], left)
    _search(asm, intervals[middle:], right)


@functools.cache
def _packed(machine: str, recording_calls: bool) -> tuple[bytes, int]:
    instructions = program(machine, recording_calls)
    return b"".join(struct.pack("HBBI", *instruction) for instruction in instructions), len(instructions)


def prepare() -> None:
    """Build this machine's program now (in the zygote), so that every spare it forks has it ready."""
    if os.uname().machine in ARCHES:
        _packed(os.uname().machine, recording)


def install() -> None:
    """Filter this process (and its future threads and children) for good. OSError if the kernel refuses."""
    machine = os.uname().machine
    if machine not in ARCHES:
        raise OSError(0, f"seccomp: no filter for the {machine} architecture")
    packed, count = _packed(machine, recording)
    filters = ctypes.create_string_buffer(packed, len(packed))

    class SockFprog(ctypes.Structure):
        _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.c_void_p)]

    fprog = SockFprog(count, ctypes.addressof(filters))
    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl.argtypes = [ctypes.c_int, ctypes.c_ulong, ctypes.c_void_p, ctypes.c_ulong, ctypes.c_ulong]
    if libc.prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, ctypes.addressof(fprog), 0, 0) != 0:
        code = ctypes.get_errno()
        raise OSError(code, f"seccomp: {os.strerror(code)}")
