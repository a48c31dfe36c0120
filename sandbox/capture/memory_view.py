"""Where a compiled function's memory goes: the ``memory_view`` field of its ``compiled`` event.

``add_memory_view(event, compiled)`` is a ``jit_capture.COMPILED_HOOKS``
entry. It decodes XLA's buffer assignment (``buffer_proto``), follows each
buffer over the schedule (``buffer_liveness``) and sends what the page
draws:

- ``totals``: argument, output, alias (donated arguments reused for
  outputs) and temp bytes, from the allocations, equal to
  ``memory_analysis()``; plus constants and thread-local scratch, which it
  leaves out;
- ``steps``: the bytes alive from each position of the schedule on, by kind
  (argument, aliased, output, temp): the chart. Past ``MAX_STEPS`` changes
  the positions are grouped into bins, each keeping its largest total, so
  the peak is never smoothed away;
- ``peak``: the most bytes alive at one position, where, and what is alive
  there (``at_peak``, largest first, each with what made it: an entry of
  ``instructions``, with its line in the HLO text the page shows and the
  line of the program it came from). Past ``MAX_PEAK_BUFFERS`` the rest are
  summed in ``at_peak_others``, so the sizes always add up to the peak;
- ``schedule``: which instruction is at each position, for modules of at
  most ``MAX_SCHEDULE_POSITIONS`` positions (else null).

Everything is bounded, whatever the module's size. Where XLA kept its heap
simulator's trace (the JAX 0.4-0.6 runtimes), ``heap_simulator`` sets its
peak beside this view's for the same buffers: they agree when the walk is
right.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

from jaxplay.sandbox.capture import buffer_proto, hlo_ops
from jaxplay.sandbox.capture.buffer_liveness import KINDS, LiveBuffer, Liveness, liveness

MAX_STEPS = 1500
MAX_PEAK_BUFFERS = 300
MAX_SCHEDULE_POSITIONS = 2000
MAX_NAME_CHARS = 120


@dataclass
class Peak:
    bytes: int
    position: int
    alive: list[LiveBuffer]


def peak_of(buffers: list[LiveBuffer], positions: int) -> Peak:
    """The first position where the most bytes are alive, and the buffers alive there."""
    delta = [0] * (positions + 2)
    for buffer in buffers:
        delta[buffer.start] += buffer.size
        delta[buffer.end + 1] -= buffer.size
    best = best_at = live = 0
    for position in range(positions):
        live += delta[position]
        if live > best:
            best, best_at = live, position
    alive = [b for b in buffers if b.start <= best_at <= b.end]
    alive.sort(key=lambda b: (-b.size, b.start))
    return Peak(best, best_at, alive)


def steps_of(buffers: list[LiveBuffer], positions: int, max_steps: int = MAX_STEPS) -> tuple[list[list[int]], bool]:
    """[[position, argument, aliased, output, temp], ...] at each change; binned past ``max_steps``."""
    deltas: dict[int, list[int]] = {}
    for buffer in buffers:
        column = KINDS.index(buffer.kind)
        deltas.setdefault(buffer.start, [0, 0, 0, 0])[column] += buffer.size
        deltas.setdefault(buffer.end + 1, [0, 0, 0, 0])[column] -= buffer.size
    live = [0, 0, 0, 0]
    steps: list[list[int]] = []
    for position in sorted(deltas):
        if position >= positions:
            break
        live = [a + b for a, b in zip(live, deltas[position], strict=True)]
        steps.append([position, *live])
    if len(steps) <= max_steps:
        return steps, False
    width = -(-positions // max_steps)  # ceil: positions per bin
    binned: dict[int, list[int]] = {}
    carried = [0, 0, 0, 0]
    index = 0
    for first in range(0, positions, width):
        best = carried  # what was alive entering the bin
        while index < len(steps) and steps[index][0] < first + width:
            carried = steps[index][1:]
            if sum(carried) > sum(best):
                best = carried
            index += 1
        binned[first] = best
    return [[first, *values] for first, values in binned.items()], True


class _Names:
    """The instructions the view names, each once: [name, opcode, computation, hlo line, source line]."""

    def __init__(self, liveness_: Liveness, module: buffer_proto.Module, hlo_text: str,
                 hlo_ranges: list[list[int]] | None) -> None:
        self.instructions = {i.id: (i, c.name) for c in module.computations.values() for i in c.instructions}
        self.hlo_lines = hlo_ops.instruction_lines(hlo_text) if hlo_text else {}
        self.source_lines = hlo_ops.op_source_lines(hlo_text, hlo_ranges) if hlo_text else {}
        self.rows: list[list[Any]] = []
        self.index: dict[int, int] = {}

    def of(self, instruction_id: int | None) -> int | None:
        if instruction_id is None or instruction_id not in self.instructions:
            return None
        if instruction_id not in self.index:
            instruction, computation = self.instructions[instruction_id]
            name = instruction.name[:MAX_NAME_CHARS]
            self.index[instruction_id] = len(self.rows)
            self.rows.append([name, instruction.opcode[:MAX_NAME_CHARS], computation[:MAX_NAME_CHARS],
                              self.hlo_lines.get(instruction.name), self.source_lines.get(instruction.name)])
        return self.index[instruction_id]


def _described(buffer: LiveBuffer, names: _Names, reused_by: dict[int, int]) -> dict[str, Any]:
    instruction = names.instructions.get(buffer.instruction_id) if buffer.instruction_id is not None else None
    shape = instruction[0].shape.at(buffer.shape_index) if instruction else None
    described: dict[str, Any] = {
        "bytes": buffer.size, "kind": buffer.kind, "start": buffer.start, "end": buffer.end,
        "instruction": names.of(buffer.instruction_id), "shape": shape.text() if shape else None,
    }
    if buffer.kind in ("argument", "aliased"):
        described["parameter"] = buffer.parameter_number
    if buffer.allocation in reused_by:
        described["reused_by"] = names.of(reused_by[buffer.allocation])
    return described


def memory_view(module: buffer_proto.Module, assignment: buffer_proto.BufferAssignment, hlo_text: str = "",
                hlo_ranges: list[list[int]] | None = None) -> dict[str, Any]:
    live = liveness(module, assignment)
    positions = len(live.positions)
    peak = peak_of(live.buffers, positions)
    steps, binned = steps_of(live.buffers, positions)
    names = _Names(live, module, hlo_text, hlo_ranges)
    # A donated argument's allocation also holds the output XLA wrote into it: name that output too.
    reused_by: dict[int, int] = {}
    for allocation in assignment.allocations:
        if allocation.is_entry_computation_parameter and allocation.maybe_live_out:
            for assigned in allocation.assigned:
                logical = assignment.logical_buffers.get(assigned.logical_buffer_id)
                if logical and logical.instruction_id in names.instructions:
                    if names.instructions[logical.instruction_id][0].opcode != "parameter":
                        reused_by[allocation.index] = logical.instruction_id
                        break
    shown = peak.alive[:MAX_PEAK_BUFFERS]
    rest = peak.alive[MAX_PEAK_BUFFERS:]
    by_kind = dict.fromkeys(KINDS, 0)
    for buffer in peak.alive:
        by_kind[buffer.kind] += buffer.size
    totals = live.totals
    view: dict[str, Any] = {
        "positions": positions,
        "totals": {"argument": totals.argument, "output": totals.output, "alias": totals.alias, "temp": totals.temp,
                   "constant": totals.constant, "thread_local": totals.thread_local},
        "peak": {"bytes": peak.bytes, "position": peak.position, "by_kind": by_kind,
                 "instruction": names.of(live.positions[peak.position]) if positions else None},
        "at_peak": [_described(b, names, reused_by) for b in shown],
        "at_peak_others": {"count": len(rest), "bytes": sum(b.size for b in rest)} if rest else None,
        "steps": steps,
        "steps_binned": binned,
        "schedule": None,
        "instructions": names.rows,
    }
    if positions <= MAX_SCHEDULE_POSITIONS:
        view["schedule"] = [names.of(instruction_id) for instruction_id in live.positions]
    if live.heap_simulator:
        view["heap_simulator"] = [[xla_peak, _peak_among(live.buffers, ids, positions)]
                                  for xla_peak, ids in live.heap_simulator]
    return view


def _peak_among(buffers: list[LiveBuffer], logical_ids: set[int], positions: int) -> int:
    return peak_of([b for b in buffers if logical_ids.intersection(b.logical_ids)], positions).bytes


def add_memory_view(event: dict[str, Any], compiled: Any) -> None:
    """The ``compiled`` event's ``memory_view`` (null, with the reason in ``capture_errors``, when unavailable)."""
    event["memory_view"] = None
    started = time.perf_counter()
    module, assignment = buffer_proto.from_compiled(compiled)
    ranges = (event.get("source_lines") or {}).get("hlo")
    event["memory_view"] = view = memory_view(module, assignment, event.get("hlo") or "", ranges)
    view["build_ms"] = round((time.perf_counter() - started) * 1e3, 3)
