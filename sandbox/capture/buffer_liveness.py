"""When each of XLA's buffers is alive, over the program's schedule: the data of the memory view.

Time is a position in the *flattened* schedule, as XLA's own live-range
analysis (``HloLiveRange``) counts it: the entry computation's instructions
in scheduled order, with the computations a ``call``, ``while`` or
``conditional`` runs laid out just before that instruction. Fusions and the
small computations of ``reduce``/``sort``/``map`` run inside one instruction
and have no time of their own (their buffers are thread-local).

A logical buffer (an array XLA gave memory) is born at its defining
instruction and lives until the last instruction that reads it, following
it through the instructions that pass it on without copying: ``tuple`` and
``get-tuple-element`` (by index), ``bitcast``, ``optimization-barrier``,
and into and out of called computations (parameters and roots, a loop's
body back to its start). Entry parameters live for the whole program, and
what reaches the entry's root lives to its end.

What occupies memory is a slice of an allocation: buffers XLA put at the
same offset of the same allocation with overlapping or touching lifetimes
are one array updated in place, so they are merged into one ``LiveBuffer``.
Totals come from the allocations alone, by the rule XLA's
``memory_analysis()`` applies, so they agree with it byte for byte.
"""

from __future__ import annotations

from collections import defaultdict, deque
from dataclasses import dataclass, field
from typing import Literal

from jaxplay.sandbox.capture.buffer_proto import SEQUENTIAL_CALLERS, Allocation, BufferAssignment, Instruction, Module

Kind = Literal["argument", "aliased", "output", "temp"]
KINDS: tuple[Kind, ...] = ("argument", "aliased", "output", "temp")
SAME_INDEX_FORWARDERS = frozenset({"bitcast", "optimization-barrier", "domain"})
PRED_TYPE = 1
# A pathological module must not stall the run: the walk gives up past this many steps.
MAX_WALK_STEPS = 4_000_000


class TooLarge(RuntimeError):
    """The module is too large to walk within the budget."""


@dataclass
class LiveBuffer:
    kind: Kind
    size: int
    start: int
    end: int  # inclusive
    allocation: int
    offset: int
    instruction_id: int | None  # what defined it (the first of merged in-place updates)
    shape_index: tuple[int, ...] = ()
    parameter_number: int | None = None
    logical_ids: list[int] = field(default_factory=list)  # XLA's logical buffers merged into this one


@dataclass
class Totals:
    argument: int = 0
    output: int = 0
    alias: int = 0
    temp: int = 0
    constant: int = 0
    thread_local: int = 0


@dataclass
class Liveness:
    positions: list[int]  # instruction id at each position of the flattened schedule
    buffers: list[LiveBuffer]
    totals: Totals
    # Positions where buffers of one allocation overlap in memory while both alive: 0 when the walk is right.
    overlaps: int = 0
    # XLA's heap simulator's peak and the logical buffers it placed, per trace (the 0.4-0.6 runtimes only)
    heap_simulator: list[tuple[int, set[int]]] = field(default_factory=list)


def allocation_kind(allocation: Allocation) -> Kind | None:
    """argument / aliased (a donated argument reused for an output) / output / temp; None: not in the totals."""
    if allocation.is_thread_local:
        return None
    if allocation.is_entry_computation_parameter:
        return "aliased" if allocation.maybe_live_out else "argument"
    if allocation.maybe_live_out:
        return "output"
    if allocation.is_constant:
        return None
    return "temp"


def totals_of(assignment: BufferAssignment) -> Totals:
    """The sizes ``memory_analysis()`` reports, from the allocations (XLA's PopulateBufferStatsFromAllocations)."""
    totals = Totals()
    for allocation in assignment.allocations:
        if allocation.is_thread_local:
            totals.thread_local += allocation.size
            continue
        if allocation.is_entry_computation_parameter:
            totals.argument += allocation.size
            if allocation.maybe_live_out:
                totals.alias += allocation.size
        if allocation.maybe_live_out:
            totals.output += allocation.size
        if not allocation.is_entry_computation_parameter and not allocation.maybe_live_out:
            if allocation.is_constant:
                totals.constant += allocation.size
            else:
                totals.temp += allocation.size
    return totals


class _Program:
    """The module's instructions with their flattened times, users and callers."""

    def __init__(self, module: Module) -> None:
        self.module = module
        self.instructions: dict[int, Instruction] = {}
        self.computation_of: dict[int, int] = {}
        for computation in module.computations.values():
            for instruction in computation.instructions:
                self.instructions[instruction.id] = instruction
                self.computation_of[instruction.id] = computation.id
        self.users: dict[int, list[tuple[int, int]]] = defaultdict(list)  # operand id -> (user id, operand number)
        for instruction in self.instructions.values():
            for number, operand in enumerate(instruction.operand_ids):
                self.users[operand].append((instruction.id, number))
        self.callers: dict[int, int] = {}  # sequentially called computation -> the instruction calling it
        self.time: dict[int, int] = {}
        self.positions: list[int] = []
        entry = module.entry_computation_id
        assert entry is not None
        self._flatten(entry, set())

    def _sequence(self, computation_id: int) -> list[int]:
        scheduled = self.module.schedule.get(computation_id)
        if scheduled:
            return scheduled
        return [i.id for i in self.module.computations[computation_id].instructions]

    def _flatten(self, computation_id: int, seen: set[int]) -> None:
        seen.add(computation_id)
        for instruction_id in self._sequence(computation_id):
            instruction = self.instructions.get(instruction_id)
            if instruction is None:
                continue
            if instruction.opcode in SEQUENTIAL_CALLERS:
                callees = [c for c in instruction.called_computation_ids if c in self.module.computations]
                if instruction.opcode == "while":  # XLA lays out a loop's condition before its body
                    callees.sort(key=lambda c: not self.is_condition(c))
                for callee in callees:
                    if callee not in seen:
                        self.callers[callee] = instruction_id
                        self._flatten(callee, seen)
            self.time[instruction_id] = len(self.positions)
            self.positions.append(instruction_id)

    def parameter(self, computation_id: int, number: int) -> int | None:
        for instruction in self.module.computations[computation_id].instructions:
            if instruction.opcode == "parameter" and instruction.parameter_number == number:
                return instruction.id
        return None

    def is_condition(self, computation_id: int) -> bool:
        root = self.module.computations[computation_id].root_id
        shape = self.instructions[root].shape if root in self.instructions else None
        return shape is not None and shape.element_type == PRED_TYPE and not shape.dimensions


def _walk(program: _Program, defined: set[tuple[int, tuple[int, ...]]], start: tuple[int, tuple[int, ...]],
          budget: list[int]) -> int:
    """The last position at which the value defined at ``start`` is held or read."""
    entry = program.module.entry_computation_id
    entry_root = program.module.computations[entry].root_id if entry is not None else None
    last = program.time.get(start[0], 0)
    seen = {start}
    queue = deque([start])

    def hold(holder: tuple[int, tuple[int, ...]]) -> None:
        if holder not in seen and holder not in defined:
            seen.add(holder)
            queue.append(holder)

    while queue:
        budget[0] -= 1
        if budget[0] < 0:
            raise TooLarge(f"the module needs more than {MAX_WALK_STEPS} steps to follow its buffers")
        instruction_id, index = queue.popleft()
        last = max(last, program.time.get(instruction_id, 0))
        if instruction_id == entry_root:
            return len(program.positions) - 1  # an output: alive to the end
        computation = program.computation_of[instruction_id]
        if program.module.computations[computation].root_id == instruction_id and computation in program.callers:
            caller = program.instructions[program.callers[computation]]
            if caller.opcode != "while" or not program.is_condition(computation):
                hold((caller.id, index))
            if caller.opcode == "while" and not program.is_condition(computation):
                body_parameter = program.parameter(computation, 0)
                if body_parameter is not None:
                    hold((body_parameter, index))
        for user_id, operand in program.users.get(instruction_id, ()):
            user = program.instructions[user_id]
            # A call or loop reads its operands inside the computations it runs (through their
            # parameters), which come before its own position; a get-tuple-element reads one element.
            reads = user.opcode not in SEQUENTIAL_CALLERS and (
                user.opcode != "get-tuple-element" or (bool(index) and index[0] == user.tuple_index))
            if reads:
                last = max(last, program.time.get(user_id, 0))
            if user.opcode == "tuple":
                hold((user_id, (operand, *index)))
            elif user.opcode == "get-tuple-element":
                if index and index[0] == user.tuple_index:
                    hold((user_id, index[1:]))
            elif user.opcode in SAME_INDEX_FORWARDERS and operand == 0:
                hold((user_id, index))
            elif user.opcode in SEQUENTIAL_CALLERS:
                callees = [c for c in user.called_computation_ids if c in program.module.computations]
                if user.opcode == "call" and callees:
                    targets = [(callees[0], operand)]
                elif user.opcode == "while":
                    # The loop's result is what its body's root holds; the initial value lives
                    # only until the first pass has read it.
                    targets = [(c, 0) for c in callees]
                else:  # conditional: operand 0 picks the branch, operand k feeds branch k - 1
                    targets = [(callees[operand - 1], 0)] if 0 < operand <= len(callees) else []
                for callee, number in targets:
                    parameter = program.parameter(callee, number)
                    if parameter is not None:
                        hold((parameter, index))
    return last


def liveness(module: Module, assignment: BufferAssignment) -> Liveness:
    program = _Program(module)
    end_of_program = max(0, len(program.positions) - 1)
    defined = {(b.instruction_id, b.shape_index) for b in assignment.logical_buffers.values()
               if b.instruction_id is not None}
    budget = [MAX_WALK_STEPS]
    buffers: list[LiveBuffer] = []
    for allocation in assignment.allocations:
        kind = allocation_kind(allocation)
        if kind is None:
            continue
        if allocation.is_entry_computation_parameter:
            defining = next((assignment.logical_buffers[a.logical_buffer_id] for a in allocation.assigned
                             if a.logical_buffer_id in assignment.logical_buffers
                             and _is_entry_parameter(program, assignment.logical_buffers[a.logical_buffer_id].instruction_id)),
                            None)
            buffers.append(LiveBuffer(kind, allocation.size, 0, end_of_program, allocation.index, 0,
                                      defining.instruction_id if defining else None,
                                      defining.shape_index if defining else (), allocation.parameter_number,
                                      [a.logical_buffer_id for a in allocation.assigned]))
            continue
        spans: list[LiveBuffer] = []
        for assigned in allocation.assigned:
            logical = assignment.logical_buffers.get(assigned.logical_buffer_id)
            if logical is None or logical.instruction_id not in program.time:
                continue  # defined inside a fusion or a reduction's computation: no time of its own
            begin = program.time[logical.instruction_id]
            end = _walk(program, defined, (logical.instruction_id, logical.shape_index), budget)
            spans.append(LiveBuffer(kind, assigned.size, begin, max(begin, end), allocation.index, assigned.offset,
                                    logical.instruction_id, logical.shape_index, logical_ids=[logical.id]))
        buffers.extend(_merge_in_place(spans))
    traces = [_heap_peak(trace, assignment) for trace in assignment.heap_traces if trace]
    return Liveness(program.positions, buffers, totals_of(assignment), _overlaps(buffers), traces)


def _is_entry_parameter(program: _Program, instruction_id: int | None) -> bool:
    instruction = program.instructions.get(instruction_id) if instruction_id is not None else None
    return (instruction is not None and instruction.opcode == "parameter"
            and program.computation_of[instruction.id] == program.module.entry_computation_id)


def _merge_in_place(spans: list[LiveBuffer]) -> list[LiveBuffer]:
    """Buffers at one slice whose lifetimes overlap or touch are one array updated in place."""
    by_slice: dict[tuple[int, int], list[LiveBuffer]] = defaultdict(list)
    for span in spans:
        by_slice[(span.offset, span.size)].append(span)
    merged: list[LiveBuffer] = []
    for group in by_slice.values():
        group.sort(key=lambda b: (b.start, b.end))
        current = group[0]
        for span in group[1:]:
            if span.start <= current.end:
                current.end = max(current.end, span.end)
                current.logical_ids.extend(span.logical_ids)
            else:
                merged.append(current)
                current = span
        merged.append(current)
    return merged


def _overlaps(buffers: list[LiveBuffer]) -> int:
    """How many pairs of buffers share bytes of an allocation while both are alive (XLA never lets them)."""
    count = 0
    by_allocation: dict[int, list[LiveBuffer]] = defaultdict(list)
    for buffer in buffers:
        by_allocation[buffer.allocation].append(buffer)
    for group in by_allocation.values():
        if len(group) > 2000:
            continue  # quadratic: only checked where it is cheap
        for i, a in enumerate(group):
            for b in group[i + 1:]:
                if a.start <= b.end and b.start <= a.end and a.offset < b.offset + b.size and b.offset < a.offset + a.size:
                    count += 1
    return count


def _heap_peak(trace: list[tuple[int, int, int]], assignment: BufferAssignment) -> tuple[int, set[int]]:
    """The most bytes XLA's heap simulator held at once, and the logical buffers it placed.

    ALLOC takes a buffer's bytes; SHARE_WITH puts a buffer in a canonical one's memory, which is
    given back when the last of them is freed."""
    live = peak = 0
    group_of: dict[int, int] = {}
    holders: dict[int, int] = defaultdict(int)
    for kind, buffer_id, canonical in trace:
        if kind == 0:
            group_of[buffer_id] = buffer_id
            holders[buffer_id] += 1
            live += assignment.logical_buffers[buffer_id].size if buffer_id in assignment.logical_buffers else 0
        elif kind == 2:
            group = group_of.get(canonical, canonical)
            group_of[buffer_id] = group
            holders[group] += 1
        elif kind == 1 and buffer_id in group_of:
            group = group_of[buffer_id]
            holders[group] -= 1
            if holders[group] == 0:
                live -= assignment.logical_buffers[group].size if group in assignment.logical_buffers else 0
        peak = max(peak, live)
    return peak, set(group_of)
