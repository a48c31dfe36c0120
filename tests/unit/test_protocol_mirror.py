"""The page's mirror of the browser protocol (frontend/src/wire/protocol.ts) against its source of truth
(jaxplay/browser_protocol.py): the same client messages and server events, each with the same fields,
the same optionality and the same types, in both directions.

protocol.ts is read as text: its interfaces, its type aliases, and ``EventMap``. Python's side is read from
the types: a client message's fields are its dataclass fields (one with a default may be left out; a
default of None is the field left out, not a null on the wire), a server event's are its TypedDict's
(``NotRequired`` may be left out). Events the captures add in their own modules (``compiled``,
``sharding``, ...) are not in protocol.ts and not compared here.
"""

from __future__ import annotations

import dataclasses
import enum
import re
import types
import typing
from pathlib import Path
from typing import Any, Literal, NotRequired, get_args, get_origin, get_type_hints

import pytest

from jaxplay import browser_protocol as bp

PROTOCOL_TS = Path(__file__).resolve().parents[2] / "frontend" / "src" / "wire" / "protocol.ts"

Fields = dict[str, tuple[bool, str]]  # name -> (optional, type in TypeScript's words, normalized)


# --- reading protocol.ts -------------------------------------------------------------------------------

COMMENT = re.compile(r'"(?:\\.|[^"\\])*"|/\*.*?\*/|//[^\n]*', re.S)
INTERFACE = re.compile(r"(?:export\s+)?interface\s+(\w+)(?:\s+extends\s+([\w\s,]+?))?\s*\{")
ALIAS = re.compile(r"export\s+type\s+(\w+)\s*=\s*([^;]+);")
OPENERS, CLOSERS = "{[(<", "}])>"


def without_comments(text: str) -> str:
    return COMMENT.sub(lambda m: m.group(0) if m.group(0).startswith('"') else " ", text)


def split_top(text: str, separator: str) -> list[str]:
    """``text`` cut at each ``separator`` outside brackets and strings."""
    parts, depth, start, quoted = [], 0, 0, False
    for i, char in enumerate(text):
        if char == '"':
            quoted = not quoted
        elif quoted:
            continue
        elif char in OPENERS:
            depth += 1
        elif char in CLOSERS and not (char == ">" and text[i - 1] == "="):
            depth -= 1
        elif char == separator and depth == 0:
            parts.append(text[start:i])
            start = i + 1
    parts.append(text[start:])
    return [p.strip() for p in parts if p.strip()]


def closing_brace(text: str, opening: int) -> int:
    depth = 0
    for i in range(opening, len(text)):
        depth += {"{": 1, "}": -1}.get(text[i], 0)
        if depth == 0:
            return i
    raise ValueError("unbalanced braces in protocol.ts")


def ts_members(body: str) -> Fields:
    fields: Fields = {}
    for member in split_top(body, ";"):
        if member.startswith("["):
            continue  # an index signature: fields other modules add (Panel.runFields)
        match = re.fullmatch(r"(\w+)(\?)?\s*:\s*(.+)", member, re.S)
        assert match, f"protocol.ts: cannot read the member {member!r}"
        fields[match.group(1)] = (bool(match.group(2)), ts_type(match.group(3)))
    return fields


def ts_type(text: str) -> str:
    """A TypeScript type written one way: unions sorted, inline objects by key, spaces as below."""
    text = " ".join(text.split())
    members = split_top(text, "|")
    if len(members) > 1:
        return union([ts_type(m) for m in members])
    if text.endswith("[]"):
        return array(ts_type(text[:-2]))
    if text.startswith("(") and text.endswith(")"):
        return ts_type(text[1:-1])
    if text.startswith("["):
        return "[" + ", ".join(ts_type(p) for p in split_top(text[1:-1], ",")) + "]"
    if text.startswith("{"):
        return inline(ts_members(text[1:-1]))
    if text.startswith("Record<"):
        key, value = split_top(text[len("Record<"):-1], ",")
        return f"Record<{ts_type(key)}, {ts_type(value)}>"
    return text


def union(members: list[str]) -> str:
    return " | ".join(sorted(set(members)))


def array(element: str) -> str:
    return f"({element})[]" if " | " in element else f"{element}[]"


def inline(fields: Fields) -> str:
    return "{" + "; ".join(f"{name}{'?' if optional else ''}: {kind}" for name, (optional, kind) in sorted(fields.items())) + "}"


class TsProtocol:
    def __init__(self, text: str) -> None:
        text = without_comments(text)
        self.bodies: dict[str, tuple[list[str], str]] = {}
        for match in INTERFACE.finditer(text):
            end = closing_brace(text, match.end() - 1)
            bases = [b.strip() for b in (match.group(2) or "").split(",") if b.strip()]
            self.bodies[match.group(1)] = (bases, text[match.end():end])
        self.aliases = {m.group(1): " ".join(m.group(2).split()) for m in ALIAS.finditer(text)}

    def fields(self, name: str) -> Fields:
        bases, body = self.bodies[name]
        merged: Fields = {}
        for base in bases:
            merged.update(self.fields(base))
        merged.update(ts_members(body))
        return merged

    def union_members(self, alias: str) -> list[str]:
        """The interfaces an alias of a union names, through aliases of aliases."""
        names: list[str] = []
        for member in split_top(self.aliases[alias], "|"):
            names += self.union_members(member) if member in self.aliases else [member]
        return names

    def tag(self, name: str) -> str:
        optional, kind = self.fields(name)["type"]
        assert not optional and re.fullmatch(r'"\w+"', kind), f"{name}.type is not one string: {kind}"
        return kind.strip('"')

    def event_map(self) -> dict[str, str]:
        return {key: kind for key, (_, kind) in ts_members(self.bodies["EventMap"][1]).items()}


# --- reading browser_protocol.py -----------------------------------------------------------------------

def py_type(hint: Any, interfaces: set[str]) -> str:
    """A Python annotation in TypeScript's words, written as ``ts_type`` writes them."""
    origin, args = get_origin(hint), get_args(hint)
    if hint is type(None):
        return "null"
    if hint is Any:
        return "unknown"
    if origin in (types.UnionType, typing.Union):
        if set(args) == set(get_args(bp.ServerEvent)):
            return "ServerEvent"
        return union([py_type(a, interfaces) for a in args])
    if origin is Literal:
        return union([f'"{a}"' for a in args])
    if origin is list or (origin is tuple and len(args) == 2 and args[1] is Ellipsis):
        return array(py_type(args[0], interfaces))
    if origin is tuple:
        return "[" + ", ".join(py_type(a, interfaces) for a in args) + "]"
    if origin is dict:
        return f"Record<{py_type(args[0], interfaces)}, {py_type(args[1], interfaces)}>"
    if isinstance(hint, type) and issubclass(hint, enum.Enum):
        return hint.__name__
    if typing.is_typeddict(hint):
        return hint.__name__ if hint.__name__ in interfaces else inline(typeddict_fields(hint, interfaces))
    names = {str: "string", int: "number", float: "number", bool: "boolean"}
    assert hint in names, f"no TypeScript word for {hint!r}"
    return names[hint]


def typeddict_fields(cls: type, interfaces: set[str]) -> Fields:
    # From the hints, not __optional_keys__: under `from __future__ import annotations` Python 3.11's
    # TypedDict cannot see NotRequired in a string annotation and counts every key as required.
    fields: Fields = {}
    for name, hint in get_type_hints(cls, include_extras=True).items():
        optional = get_origin(hint) is NotRequired
        fields[name] = (optional, py_type(get_args(hint)[0] if optional else hint, interfaces))
    return fields


def dataclass_fields(cls: type, interfaces: set[str]) -> Fields:
    hints = get_type_hints(cls)
    fields: Fields = {"type": (False, f'"{cls.type}"')}  # type: ignore[attr-defined]
    for field in dataclasses.fields(cls):
        optional = field.default is not dataclasses.MISSING or field.default_factory is not dataclasses.MISSING
        hint = hints[field.name]
        if field.default is None:  # None stands for "left out": it is not a value the client sends
            hint = typing.Union[tuple(a for a in get_args(hint) if a is not type(None))]  # noqa: UP007
        fields[field.name] = (optional, py_type(hint, interfaces))
    return fields


def differences(kind: str, python: Fields, typescript: Fields) -> list[str]:
    found = []
    for name in sorted(python.keys() | typescript.keys()):
        if name not in typescript:
            found.append(f"{kind}.{name}: in browser_protocol.py, missing from protocol.ts")
        elif name not in python:
            found.append(f"{kind}.{name}: in protocol.ts, missing from browser_protocol.py")
        elif python[name] != typescript[name]:
            (py_opt, py_kind), (ts_opt, ts_kind) = python[name], typescript[name]
            found.append(f"{kind}.{name}: browser_protocol.py says {py_kind}{' (optional)' * py_opt}, "
                         f"protocol.ts says {ts_kind}{' (optional)' * ts_opt}")
    return found


# --- the comparisons -----------------------------------------------------------------------------------

def client_differences(ts: TsProtocol) -> list[str]:
    interfaces = set(ts.bodies)
    python = {cls.type: cls for cls in get_args(bp.ClientMessage)}
    mirrored = {ts.tag(name): name for name in ts.union_members("ClientMessage")}
    found = [f"client message {tag!r}: only in browser_protocol.py" for tag in sorted(python.keys() - mirrored.keys())]
    found += [f"client message {tag!r}: only in protocol.ts" for tag in sorted(mirrored.keys() - python.keys())]
    for tag in sorted(python.keys() & mirrored.keys()):
        cls, name = python[tag], mirrored[tag]
        if cls.__name__ != name:
            found.append(f"client message {tag!r} is {cls.__name__} in Python, {name} in protocol.ts")
        found += differences(name, dataclass_fields(cls, interfaces), ts.fields(name))
    return found


def event_differences(ts: TsProtocol) -> list[str]:
    interfaces = set(ts.bodies)
    python = {get_args(get_type_hints(cls)["type"])[0]: cls for cls in get_args(bp.ServerEvent)}
    mirrored = ts.event_map()
    found = [f"server event {tag!r}: only in browser_protocol.py" for tag in sorted(python.keys() - mirrored.keys())]
    found += [f"server event {tag!r}: only in protocol.ts" for tag in sorted(mirrored.keys() - python.keys())]
    for tag in sorted(python.keys() & mirrored.keys()):
        cls, name = python[tag], mirrored[tag]
        if cls.__name__ != name:
            found.append(f"server event {tag!r} is {cls.__name__} in Python, {name} in protocol.ts")
        found += differences(name, typeddict_fields(cls, interfaces), ts.fields(name))
    return found


@pytest.fixture(scope="module")
def ts() -> TsProtocol:
    return TsProtocol(PROTOCOL_TS.read_text())


def test_every_client_message_and_field_agrees(ts: TsProtocol):
    assert client_differences(ts) == []


def test_every_server_event_and_field_agrees(ts: TsProtocol):
    assert event_differences(ts) == []


def test_run_statuses_agree(ts: TsProtocol):
    assert sorted(split_top(ts.aliases["RunStatus"], "|")) == sorted(f'"{s.value}"' for s in bp.RunStatus)


def test_the_comparison_sees_every_message(ts: TsProtocol):
    """Guards the reader itself: an empty parse would agree with anything."""
    assert {ts.tag(n) for n in ts.union_members("ClientMessage")} >= {"run", "cancel", "passes", "room_edit"}
    assert {"queued", "started", "stdout", "error", "display", "done", "notice", "room_state"} <= ts.event_map().keys()
    assert ts.fields("ErrorEvent")["api_versions"] == (True, "{added_in?: string; removed_in?: string}")
    assert ts.fields("RoomStateEvent")["run"] == (False, "ServerEvent[] | null")


def test_a_field_on_one_side_only_is_found(ts: TsProtocol):
    """Both directions, on copies: a field only protocol.ts has, and one only the Python has."""
    text = PROTOCOL_TS.read_text()
    widened = TsProtocol(text.replace("export interface StdoutEvent extends RunEventBase {",
                                      "export interface StdoutEvent extends RunEventBase {\n  fd?: number;"))
    assert event_differences(widened) == ["StdoutEvent.fd: in protocol.ts, missing from browser_protocol.py"]
    narrowed = TsProtocol(re.sub(r"\n  fresh\?: boolean;", "", text))
    assert client_differences(narrowed) == ["ClientRun.fresh: in browser_protocol.py, missing from protocol.ts"]
    loosened = TsProtocol(text.replace("  line: number | null;\n  /** The user's frames", "  line?: number;\n  /** The user's frames"))
    assert event_differences(loosened) == [
        "ErrorEvent.line: browser_protocol.py says null | number, protocol.ts says number (optional)"]
