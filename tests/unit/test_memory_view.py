"""The memory view's parser and buffer walk: XLA's protos read safely, and lifetimes that add up.

Protos are built here with a small encoder of the wire format (the same
field numbers as XLA's hlo.proto), so every case is exact; real compiled
functions (this venv's JAX) check the walk against ``memory_analysis()``.
"""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
import pytest
from jax import lax

from jaxplay.sandbox.capture import buffer_liveness, buffer_proto, memory_view, proto_wire
from jaxplay.sandbox.capture.proto_wire import WireError

# --- a tiny encoder -----------------------------------------------------------


def varint(value: int) -> bytes:
    value &= (1 << 64) - 1
    out = bytearray()
    while True:
        byte = value & 0x7F
        value >>= 7
        out.append(byte | (0x80 if value else 0))
        if not value:
            return bytes(out)


def num(field: int, value: int) -> bytes:
    return varint(field << 3) + varint(value)


def blob(field: int, data: bytes) -> bytes:
    return varint(field << 3 | 2) + varint(len(data)) + data


def packed(field: int, values: list[int]) -> bytes:
    return blob(field, b"".join(varint(v) for v in values))


def shape(element_type: int, dims: list[int]) -> bytes:
    return num(2, element_type) + packed(3, dims)


def instruction(id_: int, name: str, opcode: str, dims: list[int], operands: list[int] = (), **extra: int) -> bytes:
    data = blob(1, name.encode()) + blob(2, opcode.encode()) + blob(3, shape(11, dims)) + num(35, id_)
    if operands:
        data += packed(36, list(operands))
    for field, value in extra.items():
        data += num({"parameter_number": 9, "tuple_index": 13}[field], value)
    return data


def logical(id_: int, size: int, instruction_id: int) -> bytes:
    return num(1, id_) + num(2, size) + blob(3, num(4, instruction_id))


def allocation(index: int, size: int, buffers: list[tuple[int, int, int]], **flags: int) -> bytes:
    data = num(1, index) + num(2, size)
    numbers = {"thread_local": 3, "parameter": 5, "parameter_number": 6, "live_out": 7, "constant": 12}
    for flag, value in flags.items():
        data += num(numbers[flag], value)
    for buffer_id, offset, length in buffers:
        data += blob(9, num(1, buffer_id) + num(2, offset) + num(3, length))
    return data


# entry(p0: f32[4]) { exp = exp(p0); neg = negate(p0); out = add(exp, neg); ROOT t = tuple(out) }
# scheduled p0, exp, neg, out, t: exp and neg are temporaries (16 bytes each), alive together at neg.
MODULE = (
    blob(1, b"jit_f")
    + blob(3, blob(1, b"main") + num(5, 0) + num(6, 5)
           + blob(2, instruction(1, "p0", "parameter", [4]))
           + blob(2, instruction(2, "exp", "exponential", [4], [1]))
           + blob(2, instruction(3, "neg", "negate", [4], [1]))
           + blob(2, instruction(4, "out", "add", [4], [2, 3]))
           + blob(2, instruction(5, "t", "tuple", [], [4])))
    + num(6, 0)
    + blob(7, blob(1, num(1, 0) + blob(2, packed(1, [1, 2, 3, 4, 5]))))
)
ASSIGNMENT = (
    blob(1, logical(0, 16, 1)) + blob(1, logical(1, 16, 2)) + blob(1, logical(2, 16, 3))
    + blob(1, logical(3, 16, 4)) + blob(1, logical(4, 8, 5))
    + blob(3, allocation(0, 16, [(0, 0, 16)], parameter=1))
    + blob(3, allocation(1, 16, [(3, 0, 16)], live_out=1))
    + blob(3, allocation(2, 8, [(4, 0, 8)], live_out=1))
    + blob(3, allocation(3, 32, [(1, 0, 16), (2, 16, 16)]))
    + blob(3, allocation(4, 4, [], thread_local=1))
)


def test_the_wire_reader_refuses_malformed_messages():
    assert list(proto_wire.fields(num(1, 5) + blob(2, b"ab"))) == [(1, 0, 5), (2, 2, memoryview(b"ab"))]
    assert proto_wire.integers(2, memoryview(varint(3) + varint(-1 & (1 << 64) - 1))) == [3, -1]
    bad = {
        "a varint cut short": b"\x08\x80",
        "a length past the end": varint(2 << 3 | 2) + varint(100) + b"x",
        "a group (wire type 3)": varint(1 << 3 | 3),
        "field number 0": varint(0) + varint(1),
        "an endless varint": b"\x08" + b"\xff" * 11,
        "a fixed64 cut short": varint(1 << 3 | 1) + b"\x00" * 3,
    }
    for data in bad.values():
        with pytest.raises(WireError):
            list(proto_wire.fields(data))
    with pytest.raises(WireError):  # a message where XLA's decoder expects a number
        buffer_proto.decode_module(blob(6, b"\x01"))
    with pytest.raises(WireError):  # a module without the entry computation it names
        buffer_proto.decode_module(num(6, 7))


def test_a_synthetic_module_decodes_and_its_buffers_live_from_definition_to_last_use():
    module = buffer_proto.decode_module(MODULE)
    assignment = buffer_proto.decode_buffer_assignment(ASSIGNMENT)
    assert module.schedule == {0: [1, 2, 3, 4, 5]}
    assert module.computations[0].instructions[1].operand_ids == [1]
    assert [a.index for a in assignment.allocations] == [0, 1, 2, 3, 4]
    live = buffer_liveness.liveness(module, assignment)
    spans = {(b.kind, b.instruction_id): (b.start, b.end, b.size) for b in live.buffers}
    assert spans == {
        ("argument", 1): (0, 4, 16),  # a parameter: the whole program
        ("temp", 2): (1, 3, 16),      # exp: read by out
        ("temp", 3): (2, 3, 16),      # neg: read by out
        ("output", 4): (3, 4, 16),    # out: reaches the root
        ("output", 5): (4, 4, 8),     # the result tuple
    }
    assert live.overlaps == 0
    totals = live.totals
    assert (totals.argument, totals.output, totals.alias, totals.temp, totals.thread_local) == (16, 24, 0, 32, 4)
    view = memory_view.memory_view(module, assignment)
    assert view["peak"] == {"bytes": 64, "position": 3, "by_kind": {"argument": 16, "aliased": 0, "output": 16, "temp": 32},
                            "instruction": view["schedule"][3]}
    assert view["instructions"][view["peak"]["instruction"]][:2] == ["out", "add"]
    assert sum(b["bytes"] for b in view["at_peak"]) == 64
    assert [b["bytes"] for b in view["at_peak"]] == sorted((b["bytes"] for b in view["at_peak"]), reverse=True)
    assert view["steps"] == [[0, 16, 0, 0, 0], [1, 16, 0, 0, 16], [2, 16, 0, 0, 32], [3, 16, 0, 16, 32], [4, 16, 0, 24, 0]]


def test_binned_steps_keep_the_peak_and_buffer_lists_stay_bounded(monkeypatch):
    buffers = [buffer_liveness.LiveBuffer("temp", 10 + i % 7, i, i + 3, 0, 0, None) for i in range(400)]
    buffers.append(buffer_liveness.LiveBuffer("temp", 5000, 250, 250, 1, 0, None))
    steps, binned = memory_view.steps_of(buffers, 404, max_steps=50)
    assert binned and len(steps) <= 51
    peak = memory_view.peak_of(buffers, 404)
    assert max(sum(step[1:]) for step in steps) == peak.bytes
    assert peak.position == 250 and sum(b.size for b in peak.alive) == peak.bytes
    # Past the limit the smaller buffers are summed, so the listed sizes still add up to the peak.
    monkeypatch.setattr(memory_view, "MAX_PEAK_BUFFERS", 2)
    module = buffer_proto.decode_module(MODULE)
    view = memory_view.memory_view(module, buffer_proto.decode_buffer_assignment(ASSIGNMENT))
    assert len(view["at_peak"]) == 2 and view["at_peak_others"]["count"] == 2
    assert sum(b["bytes"] for b in view["at_peak"]) + view["at_peak_others"]["bytes"] == view["peak"]["bytes"]
    monkeypatch.setattr(memory_view, "MAX_SCHEDULE_POSITIONS", 3)
    assert memory_view.memory_view(module, buffer_proto.decode_buffer_assignment(ASSIGNMENT))["schedule"] is None


def scan_step(xs, w):
    def step(carry, x):
        h = jnp.tanh(carry @ w + x)
        return h, h.sum()
    return lax.scan(step, xs[0], xs)


def mlp_gradient(params, x):
    for w in params:
        x = jnp.tanh(x @ w)
    return x.sum()


@functools.partial(jax.jit, donate_argnums=0)
def donated(x, w):
    y = jnp.tanh(x @ w)
    return (y @ w.T).sum(), jnp.sin(y) * 2 + y


CASES = [
    (jax.jit(scan_step), (jnp.ones((16, 32, 64)), jnp.ones((64, 64)))),
    (jax.jit(jax.grad(mlp_gradient)), ([jnp.ones((128, 128))] * 3, jnp.ones((32, 128)))),
    (donated, (jnp.ones((64, 128)), jnp.ones((128, 128)))),
    (jax.jit(lambda x: lax.cond(x.sum() > 0, lambda v: v @ v, lambda v: -v, x)), (jnp.ones((8, 8)),)),
]


@pytest.mark.parametrize("case", range(len(CASES)))
def test_real_compilations_agree_with_memory_analysis(case):
    fn, args = CASES[case]
    compiled = fn.lower(*args).compile()
    stats = compiled.memory_analysis()
    module, assignment = buffer_proto.from_compiled(compiled)
    live = buffer_liveness.liveness(module, assignment)
    totals = live.totals
    assert (totals.argument, totals.output, totals.alias, totals.temp) == (
        stats.argument_size_in_bytes, stats.output_size_in_bytes, stats.alias_size_in_bytes, stats.temp_size_in_bytes)
    assert live.overlaps == 0
    view = memory_view.memory_view(module, assignment, compiled.as_text())
    peak = view["peak"]["bytes"]
    resident = totals.argument + totals.output - totals.alias  # alive at the end, whatever the schedule
    assert resident <= peak <= resident + totals.temp
    assert sum(b["bytes"] for b in view["at_peak"]) == peak == sum(view["peak"]["by_kind"].values())
    named = [view["instructions"][b["instruction"]] for b in view["at_peak"] if b["instruction"] is not None]
    assert named and all(row[3] is not None for row in named)  # each names its line in the HLO text
    if case == 2:
        aliased = next(b for b in view["at_peak"] if b["kind"] == "aliased")
        assert aliased["parameter"] == 0 and view["instructions"][aliased["reused_by"]][1] == "fusion"
