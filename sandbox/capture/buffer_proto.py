"""XLA's buffer assignment and scheduled HLO module of one compiled function, decoded from jaxlib's protos.

Where they come from, per runtime (checked on CPU for JAX 0.4.38, 0.6.2,
0.10.2 and 0.12.0.1):

- ``compiled.runtime_executable().get_compiled_memory_stats()`` (what
  ``memory_analysis()`` reads) carries the assignment as
  ``serialized_buffer_assignment_proto`` (a ``BufferAssignmentProto``);
  JAX 0.4.x carries ``serialized_hlo_proto`` instead, an ``HloProto`` that
  holds the module and the assignment together;
- ``runtime_executable().hlo_modules()[0].as_serialized_hlo_module_proto()``
  is the optimized, scheduled module (an ``HloModuleProto``) whose
  instruction ids the assignment's logical buffers name.

Only the fields the memory view reads are decoded (numbers from XLA's
``hlo.proto`` and ``xla_data.proto``); anything else is skipped, so a newer
XLA's extra fields change nothing.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from jaxplay.sandbox.capture.proto_wire import WireError, fields, integers, message, number, text

# xla.PrimitiveType -> the short names HLO text uses
PRIMITIVE_NAMES = {1: "pred", 2: "s8", 3: "s16", 4: "s32", 5: "s64", 6: "u8", 7: "u16", 8: "u32", 9: "u64",
                   10: "f16", 11: "f32", 12: "f64", 13: "tuple", 15: "c64", 16: "bf16", 17: "token", 18: "c128",
                   19: "f8e5m2", 20: "f8e4m3fn", 21: "s4", 22: "u4"}
TUPLE_TYPE = 13
MAX_SHAPE_DEPTH = 32


@dataclass
class Shape:
    element_type: int = 0
    dimensions: list[int] = field(default_factory=list)
    tuple_shapes: list[Shape] = field(default_factory=list)

    def at(self, index: tuple[int, ...]) -> Shape | None:
        shape: Shape | None = self
        for i in index:
            shape = shape.tuple_shapes[i] if shape is not None and 0 <= i < len(shape.tuple_shapes) else None
        return shape

    def text(self) -> str:
        if self.element_type == TUPLE_TYPE:
            return "(" + ", ".join(s.text() for s in self.tuple_shapes[:8]) + (", …" if len(self.tuple_shapes) > 8 else "") + ")"
        name = PRIMITIVE_NAMES.get(self.element_type, f"type{self.element_type}")
        return f"{name}[{','.join(str(d) for d in self.dimensions)}]"


@dataclass
class Instruction:
    id: int
    name: str = ""
    opcode: str = ""
    shape_data: memoryview | None = None  # decoded when asked for (``shape``): most are never needed
    parameter_number: int = 0
    tuple_index: int = 0
    operand_ids: list[int] = field(default_factory=list)
    called_computation_ids: list[int] = field(default_factory=list)

    @property
    def shape(self) -> Shape:
        return decode_shape(self.shape_data) if self.shape_data is not None else Shape()


@dataclass
class Computation:
    id: int
    name: str = ""
    root_id: int | None = None
    instructions: list[Instruction] = field(default_factory=list)


@dataclass
class Module:
    name: str = ""
    entry_computation_id: int | None = None
    computations: dict[int, Computation] = field(default_factory=dict)
    # computation id -> instruction ids in the order XLA scheduled them
    schedule: dict[int, list[int]] = field(default_factory=dict)


@dataclass
class LogicalBuffer:
    id: int
    size: int = 0
    instruction_id: int | None = None
    instruction_name: str | None = None  # only JAX 0.4.x still fills it in
    shape_index: tuple[int, ...] = ()


@dataclass
class Assigned:
    logical_buffer_id: int
    offset: int = 0
    size: int = 0


@dataclass
class Allocation:
    index: int
    size: int = 0
    is_thread_local: bool = False
    is_tuple: bool = False
    is_entry_computation_parameter: bool = False
    is_constant: bool = False
    parameter_number: int = 0
    maybe_live_out: bool = False
    color: int = 0
    assigned: list[Assigned] = field(default_factory=list)


@dataclass
class BufferAssignment:
    logical_buffers: dict[int, LogicalBuffer] = field(default_factory=dict)
    allocations: list[Allocation] = field(default_factory=list)
    # XLA's heap simulator's events in order, (kind, logical buffer id, canonical id of a SHARE_WITH);
    # only the JAX 0.4-0.6 runtimes' XLA keeps them
    heap_traces: list[list[tuple[int, int, int]]] = field(default_factory=list)


def decode_shape(data: memoryview, depth: int = 0) -> Shape:
    if depth > MAX_SHAPE_DEPTH:
        raise WireError("a shape nests deeper than any XLA program")
    shape = Shape()
    for num, wire, value in fields(data):
        if num == 2:
            shape.element_type = number(value)
        elif num == 3:
            shape.dimensions.extend(integers(wire, value))
        elif num == 4:
            shape.tuple_shapes.append(decode_shape(message(value), depth + 1))
    return shape


def _instruction(data: memoryview) -> Instruction:
    instruction = Instruction(id=0)
    for num, wire, value in fields(data):
        if num == 1:
            instruction.name = text(value)
        elif num == 2:
            instruction.opcode = text(value)
        elif num == 3:
            instruction.shape_data = message(value)
        elif num == 9:
            instruction.parameter_number = number(value)
        elif num == 13:
            instruction.tuple_index = number(value)
        elif num == 35:
            instruction.id = number(value)
        elif num == 36:
            instruction.operand_ids.extend(integers(wire, value))
        elif num == 38:
            instruction.called_computation_ids.extend(integers(wire, value))
    return instruction


def _computation(data: memoryview, with_instructions: bool = True) -> Computation:
    computation = Computation(id=0)
    for num, _wire, value in fields(data):
        if num == 1:
            computation.name = text(value)
        elif num == 2 and with_instructions:
            computation.instructions.append(_instruction(message(value)))
        elif num == 5:
            computation.id = number(value)
        elif num == 6:
            computation.root_id = number(value)
    return computation


def _schedule(data: memoryview, into: dict[int, list[int]]) -> None:
    for num, _wire, entry in fields(data):
        if num != 1:  # map<int64, InstructionSequence> sequences = 1
            continue
        key: int | None = None
        sequence: list[int] = []
        for part, _w, value in fields(message(entry)):
            if part == 1:
                key = number(value)
            elif part == 2:
                for inner, wire, ids in fields(message(value)):
                    if inner == 1:
                        sequence.extend(integers(wire, ids))
        if key is not None:
            into[key] = sequence


SEQUENTIAL_CALLERS = frozenset({"call", "while", "conditional"})


def decode_module(data: bytes | memoryview) -> Module:
    """The module, with the instructions of the computations that run in sequence: the entry and what its
    ``call``, ``while`` and ``conditional`` instructions run, and so on down. A fusion's, a reduction's or a
    sort's computation runs inside one instruction and owns no memory of its own, so only its name and id
    are read: most of a big module's bytes are never decoded."""
    module = Module()
    blobs: list[memoryview] = []
    for num, _wire, value in fields(data):
        if num == 1:
            module.name = text(value)
        elif num == 3:
            blobs.append(message(value))
        elif num == 6:
            module.entry_computation_id = number(value)
        elif num == 7:
            _schedule(message(value), module.schedule)
    blob_of: dict[int, memoryview] = {}
    for blob in blobs:
        computation = _computation(blob, with_instructions=False)
        module.computations[computation.id] = computation
        blob_of[computation.id] = blob
    if module.entry_computation_id not in module.computations:
        raise WireError("the module names no entry computation it holds")
    pending = [module.entry_computation_id]
    decoded: set[int] = set()
    while pending:
        computation_id = pending.pop()
        if computation_id in decoded or computation_id not in blob_of:
            continue
        decoded.add(computation_id)
        computation = module.computations[computation_id] = _computation(blob_of[computation_id])
        for instruction in computation.instructions:
            if instruction.opcode in SEQUENTIAL_CALLERS:
                pending.extend(instruction.called_computation_ids)
    return module


def _logical_buffer(data: memoryview) -> LogicalBuffer:
    buffer = LogicalBuffer(id=0)
    for num, _wire, value in fields(data):
        if num == 1:
            buffer.id = number(value)
        elif num == 2:
            buffer.size = number(value)
        elif num == 3:
            index: list[int] = []
            for part, wire, item in fields(message(value)):
                if part == 2:
                    buffer.instruction_name = text(item)
                elif part == 3:
                    index.extend(integers(wire, item))
                elif part == 4:
                    buffer.instruction_id = number(item)
            buffer.shape_index = tuple(index)
    return buffer


def _allocation(data: memoryview) -> Allocation:
    allocation = Allocation(index=0)
    flags = {3: "is_thread_local", 5: "is_entry_computation_parameter", 7: "maybe_live_out", 11: "is_tuple",
             12: "is_constant"}
    for num, _wire, value in fields(data):
        if num == 1:
            allocation.index = number(value)
        elif num == 2:
            allocation.size = number(value)
        elif num in flags:
            setattr(allocation, flags[num], bool(number(value)))
        elif num == 6:
            allocation.parameter_number = number(value)
        elif num == 8:
            allocation.color = number(value)
        elif num == 9 and not allocation.is_thread_local:  # scratch inside one instruction: never followed
            assigned = Assigned(logical_buffer_id=0)
            for part, _w, item in fields(message(value)):
                if part == 1:
                    assigned.logical_buffer_id = number(item)
                elif part == 2:
                    assigned.offset = number(item)
                elif part == 3:
                    assigned.size = number(item)
            allocation.assigned.append(assigned)
    return allocation


def _heap_trace(data: memoryview) -> list[tuple[int, int, int]]:
    events: list[tuple[int, int, int]] = []
    for num, _wire, value in fields(data):
        if num == 1:
            kind = buffer = canonical = 0
            for part, _w, item in fields(message(value)):
                if part == 1:
                    kind = number(item)
                elif part == 2:
                    buffer = number(item)
                elif part == 5:
                    canonical = number(item)
            events.append((kind, buffer, canonical))
    return events


def decode_buffer_assignment(data: bytes | memoryview) -> BufferAssignment:
    assignment = BufferAssignment()
    for num, _wire, value in fields(data):
        if num == 1:
            buffer = _logical_buffer(message(value))
            assignment.logical_buffers[buffer.id] = buffer
        elif num == 3:
            assignment.allocations.append(_allocation(message(value)))
        elif num == 4:
            assignment.heap_traces.append(_heap_trace(message(value)))
    return assignment


def memory_stats(compiled: Any) -> Any:
    """``compiled.memory_analysis()``, asked of XLA once per compilation (it costs as much as the rest of the
    memory view on a big module): the Inspect capture and the memory view share it."""
    stats = getattr(compiled, "_jaxplay_memory_stats", None)
    if stats is None:
        stats = compiled.memory_analysis()
        try:
            compiled._jaxplay_memory_stats = stats
        except AttributeError:
            pass
    return stats


def from_compiled(compiled: Any) -> tuple[Module, BufferAssignment]:
    """The scheduled module and its buffer assignment, from a ``jax.stages.Compiled`` (see the module doc)."""
    executable = compiled.runtime_executable()
    stats = memory_stats(compiled)
    assignment_bytes = getattr(stats, "serialized_buffer_assignment_proto", None)
    module_bytes: bytes | memoryview | None = None
    if not assignment_bytes:
        hlo_proto = getattr(stats, "serialized_hlo_proto", None)
        if not hlo_proto:
            raise LookupError("this jaxlib exposes no buffer assignment for a compiled function")
        for num, _wire, value in fields(hlo_proto):
            if num == 1:
                module_bytes = message(value)
            elif num == 3:
                assignment_bytes = message(value)
    if not assignment_bytes:
        raise LookupError("XLA gave an empty buffer assignment")
    if module_bytes is None:
        modules = executable.hlo_modules()
        if len(modules) != 1:
            raise LookupError(f"the executable holds {len(modules)} HLO modules; the memory view reads one")
        module_bytes = modules[0].as_serialized_hlo_module_proto()
    return decode_module(module_bytes), decode_buffer_assignment(assignment_bytes)
