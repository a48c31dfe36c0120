"""A classic BPF evaluator for seccomp programs, so tests can ask the built filter what it answers.

It runs the instructions ``sandbox/isolation/seccomp.py`` emits (loads of ``struct seccomp_data``
words, conditional jumps, ``ja``, ``and``, ``ret``) the way the kernel does, on a call's number,
architecture and arguments; anything else raises.
"""

from __future__ import annotations

import struct

from jaxplay.sandbox.isolation import seccomp

ERRNO_MASK = 0xFFFF


def seccomp_data(nr: int, arch: int, args: tuple[int, ...] = ()) -> bytes:
    full = (tuple(args) + (0,) * 6)[:6]
    return struct.pack("<iIQ6Q", nr, arch, 0, *(a & 0xFFFFFFFFFFFFFFFF for a in full))


def evaluate(program: list[tuple[int, int, int, int]], data: bytes) -> int:
    """The filter's return value for one call."""
    accumulator, pc = 0, 0
    while True:
        code, jt, jf, k = program[pc]
        if code == seccomp.LD_W_ABS:
            accumulator = struct.unpack_from("<I", data, k)[0]
        elif code == seccomp.AND:
            accumulator &= k
        elif code == seccomp.RET:
            return k
        elif code == seccomp.JA:
            pc += k
        elif code in (seccomp.JEQ, seccomp.JGT, seccomp.JGE, seccomp.JSET):
            taken = {seccomp.JEQ: accumulator == k, seccomp.JGT: accumulator > k, seccomp.JGE: accumulator >= k,
                     seccomp.JSET: bool(accumulator & k)}[code]
            pc += jt if taken else jf
        else:
            raise ValueError(f"instruction {code:#x} at {pc} is not one the filter uses")
        pc += 1


def answer(machine: str, name_or_number: str | int, *args: int, recording: bool = False) -> str:
    """``allow``, an errno name (``ENOSYS``), as the built filter answers the call on ``machine``."""
    import errno

    from jaxplay.sandbox.isolation.syscall_numbers import NUMBERS

    column, arch = seccomp.ARCHES[machine]
    number = name_or_number if isinstance(name_or_number, int) else NUMBERS[name_or_number][column]
    assert number is not None, f"{name_or_number} has no number on {machine}"
    result = evaluate(seccomp.program(machine, recording), seccomp_data(number, arch, args))
    if result == seccomp.RET_ALLOW:
        return "allow"
    assert result & ~ERRNO_MASK == seccomp.RET_ERRNO, hex(result)
    return errno.errorcode[result & ERRNO_MASK]
