"""Protocol Buffers' wire format, read field by field, for the few XLA messages the memory view needs.

jaxlib hands out XLA's buffer assignment and HLO module only as serialized
protos, and ships no Python classes for them (nor does every runtime have
the same ``protobuf``), so the memory view reads the wire format itself:
tags, varints and length-delimited fields, nothing else. Nothing here
trusts its input: a truncated field, a varint longer than ten bytes, a
wire type the format does not have or a message past ``MAX_MESSAGE_BYTES``
raises ``WireError``, and the reader never allocates more than the bytes
it was given.
"""

from __future__ import annotations

from collections.abc import Iterator

MAX_MESSAGE_BYTES = 256 << 20
MAX_VARINT_BYTES = 10
VARINT, FIXED64, LENGTH, FIXED32 = 0, 1, 2, 5

Field = tuple[int, int, int | memoryview]


class WireError(ValueError):
    """The bytes are not a well-formed protobuf message."""


def _varint(data: memoryview, at: int) -> tuple[int, int]:
    value = 0
    for shift in range(0, 7 * MAX_VARINT_BYTES, 7):
        if at >= len(data):
            raise WireError("a varint runs past the end of the message")
        byte = data[at]
        at += 1
        value |= (byte & 0x7F) << shift
        if byte < 0x80:
            return value, at
    raise WireError(f"a varint is longer than {MAX_VARINT_BYTES} bytes")


def fields(message: bytes | memoryview) -> Iterator[Field]:
    """Each field in order: (number, wire type, value); a length-delimited value is a view of its bytes."""
    data = memoryview(message)
    if len(data) > MAX_MESSAGE_BYTES:
        raise WireError(f"message of {len(data)} bytes is over the {MAX_MESSAGE_BYTES}-byte limit")
    at = 0
    end = len(data)
    while at < end:
        key = data[at]  # one byte for every field number under 16: most keys
        if key < 0x80:
            at += 1
        else:
            key, at = _varint(data, at)
        number, wire = key >> 3, key & 7
        if number == 0:
            raise WireError("field number 0")
        if wire == VARINT:
            if at < end and data[at] < 0x80:
                value = data[at]
                at += 1
            else:
                value, at = _varint(data, at)
            yield number, wire, value
        elif wire == LENGTH:
            if at < end and data[at] < 0x80:
                size = data[at]
                at += 1
            else:
                size, at = _varint(data, at)
            if at + size > end:
                raise WireError(f"field {number} claims {size} bytes; the message has {end - at} left")
            yield number, wire, data[at:at + size]
            at += size
        elif wire in (FIXED64, FIXED32):
            width = 8 if wire == FIXED64 else 4
            if at + width > end:
                raise WireError(f"field {number} runs past the end of the message")
            yield number, wire, int.from_bytes(data[at:at + width], "little")
            at += width
        else:  # 3 and 4 (groups) are long gone from proto3; 6 and 7 do not exist
            raise WireError(f"field {number} has wire type {wire}, which these messages never use")


def signed(value: int) -> int:
    """An int64 field's value: negative numbers travel as 64-bit two's complement varints."""
    return value - (1 << 64) if value >= 1 << 63 else value


def integers(wire: int, value: int | memoryview) -> list[int]:
    """A repeated integer field's values from one occurrence: packed (length-delimited) or a single varint."""
    if wire == VARINT and isinstance(value, int):
        return [signed(value)]
    if wire != LENGTH or not isinstance(value, memoryview):
        raise WireError(f"a repeated integer field has wire type {wire}")
    out: list[int] = []
    at = 0
    while at < len(value):
        number, at = _varint(value, at)
        out.append(signed(number))
    return out


def text(value: int | memoryview) -> str:
    if not isinstance(value, memoryview):
        raise WireError("a string field is not length-delimited")
    return bytes(value).decode("utf-8", errors="replace")


def message(value: int | memoryview) -> memoryview:
    if not isinstance(value, memoryview):
        raise WireError("a message field is not length-delimited")
    return value


def number(value: int | memoryview) -> int:
    if not isinstance(value, int):
        raise WireError("an integer field is length-delimited")
    return signed(value)
