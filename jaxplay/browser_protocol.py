"""Browser <-> server messages on ``/ws``: the single source of truth.

docs/protocol.md describes these for people; frontend/src/wire/protocol.ts mirrors
them for the page, and tests/unit/test_protocol_mirror.py holds the two to the
same messages and fields. Client messages are parsed here into typed objects and
every problem becomes a ``ProtocolError`` whose text says what to change.
Server events are plain JSON objects of the shapes the ``*Event`` types below
declare; the server's own are built by the ``*_event`` functions, so the same
shape is produced whether a run was executed, cached or rejected, and the
sandbox's (output, errors, values) travel through the worker as they are.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from enum import StrEnum
from typing import Any, ClassVar, Literal, NotRequired, TypedDict, cast, get_args

from jaxplay import json_input
from jaxplay.run_flags import FlagError
from jaxplay.run_flags import validate as validate_flags

MAX_RUN_ID_CHARS = 128
RUNTIME_NAME = re.compile(r"^[0-9][0-9A-Za-z.+_-]{0,39}$")


class RunStatus(StrEnum):
    OK = "ok"
    ERROR = "error"
    TIMEOUT = "timeout"
    CANCELLED = "cancelled"
    CRASHED = "crashed"
    REJECTED = "rejected"


# Why a run was rejected: the ``reason`` of its ``done`` and the label of ``jaxplay_runs_rejected_total``, all
# known up front so that every series exists from the start. "other": a refusal that names none (a bug).
REJECTION_REASONS = ("invalid_message", "code_too_large", "duplicate_id", "connection_limit", "client_limit",
                     "timeout_too_long", "unknown_backend", "unknown_runtime", "no_worker", "queue_full",
                     "shutting_down", "broker_unreachable", "broker_out_of_memory", "bad_flags", "other")


class ProtocolError(ValueError):
    """A client message we cannot accept; ``run_id`` is set when one was readable.

    ``reason`` is a short fixed word (``REJECTION_REASONS``) for the ``done`` and the metrics.
    """

    def __init__(self, message: str, run_id: str | None = None, reason: str = "invalid_message") -> None:
        super().__init__(message)
        self.run_id = run_id
        self.reason = reason


def text_bytes(text: str, field: str, run_id: str | None = None) -> int:
    """Bytes of ``text`` in UTF-8. A lone surrogate (``"\\ud800"``: valid JSON, but half a character, so no
    text, and no database stores it) is refused here, at the boundary, with what to change."""
    try:
        return len(text.encode("utf-8"))
    except UnicodeEncodeError as exc:
        raise ProtocolError(f"Field '{field}' holds half of a UTF-16 surrogate pair (\\u{ord(text[exc.start]):04x} "
                            f"at character {exc.start}), which is not text: send valid Unicode.", run_id) from None


class RunFlags(TypedDict):
    """A run's JAX options (``config``) and XLA flags (``xla``), names to values, as a client sends them."""
    config: NotRequired[dict[str, bool | int | str]]
    xla: NotRequired[dict[str, bool | int | str]]


@dataclass(frozen=True)
class ClientRun:
    type: ClassVar[str] = "run"
    id: str
    code: str
    backend: str | None = None
    timeout_s: float | None = None
    inspect: bool = True
    fresh: bool = False
    profile: bool = False
    runtime: str | None = None  # a JAX version the backend offers (/api/backends); None: the default
    compare: bool = False  # one of the Compare panel's runs (one per JAX version): counted as such
    # JAX options and XLA flags, checked against the allow-list (jaxplay/run_flags.py) and written canonically.
    flags: RunFlags | None = None


@dataclass(frozen=True)
class ClientCancel:
    type: ClassVar[str] = "cancel"
    id: str


MAX_PASSES_KEY_CHARS = 32
MAX_FN_NAME_CHARS = 512


@dataclass(frozen=True)
class ClientPasses:
    """Show XLA's passes of compilation ``key`` (``"<fn_id>.<compile_index>"``) of function ``fn``
    of a run of ``code``: the program runs again, in a fresh sandbox, until that compilation."""
    type: ClassVar[str] = "passes"
    id: str
    code: str
    key: str
    fn: str
    backend: str | None = None
    runtime: str | None = None  # the JAX of the run whose compilation Inspect shows
    flags: RunFlags | None = None  # that run's flags: its compilations are XLA's under them


# --- workshop rooms (server/rooms/hub.py) ---------------------------------------

MAX_ROOM_FIELD_CHARS = 64
MAX_DECK_SNIPPETS = 200
DeckAction = Literal["next", "prev", "goto", "set"]
DECK_ACTIONS: tuple[DeckAction, ...] = get_args(DeckAction)


@dataclass(frozen=True)
class RoomJoin:
    """Follow a room; with the presenter ``secret``, present it."""
    type: ClassVar[str] = "room_join"
    room: str
    secret: str | None = None


@dataclass(frozen=True)
class RoomLeave:
    type: ClassVar[str] = "room_leave"


@dataclass(frozen=True)
class RoomEdit:
    """The presenter's editor: the whole program (or None when only the selection moved); at least one of the two."""
    type: ClassVar[str] = "room_edit"
    code: str | None = None
    selection: tuple[int, int] | None = None  # (anchor, head), character offsets


@dataclass(frozen=True)
class RoomDeck:
    type: ClassVar[str] = "room_deck"
    action: DeckAction
    position: int | None = None
    snippets: tuple[str, ...] | None = None


RoomMessage = RoomJoin | RoomLeave | RoomEdit | RoomDeck
ClientMessage = ClientRun | ClientCancel | ClientPasses | RoomMessage


def parse_client_message(text: str | bytes | None, *, max_code_bytes: int) -> ClientMessage:
    if not isinstance(text, str):
        raise ProtocolError("Binary frames are not accepted: send each message as a JSON text frame.",
                            readable_run_id(frame_text(text)))
    try:
        raw = json_input.loads(text)
    except json.JSONDecodeError as exc:
        raise ProtocolError(f"Malformed JSON ({exc.msg} at position {exc.pos}): send one JSON object per frame.",
                            readable_run_id(text)) from None
    except ValueError as exc:
        raise ProtocolError(f"Malformed JSON ({exc}): send one JSON object per frame.", readable_run_id(text)) from None
    if not isinstance(raw, dict):
        raise ProtocolError("Each message must be a JSON object with a 'type' field.")
    run_id = raw.get("id") if isinstance(raw.get("id"), str) else None
    kind = raw.get("type")
    if kind == "run":
        return _parse_run(raw, run_id, max_code_bytes)
    if kind == "cancel":
        return ClientCancel(id=_run_id(raw, run_id))
    if kind == "passes":
        return _parse_passes(raw, run_id, max_code_bytes)
    if isinstance(kind, str) and kind.startswith("room_"):
        return _parse_room(kind, raw, max_code_bytes)
    raise ProtocolError(f"Unknown message type {kind!r}: use 'run', 'cancel' or 'passes' (or a room message: "
                        "'room_join', 'room_leave', 'room_edit', 'room_deck').", run_id)


def max_frame_bytes(max_code_bytes: int) -> int:
    """The largest frame a browser may send on ``/ws``: a run or ``room_edit`` whose code is at the limit with
    every byte escaped (a control character is six bytes of JSON, ``\\u0001``), plus room for the other
    fields. A frame just over the code limit is still read and refused by its id; a larger one closes the
    socket unread (1009, "message too big"), so no client makes the server hold a frame bigger than this."""
    return 6 * max_code_bytes + (64 << 10)


RUN_MESSAGE_TYPES = ("run", "passes")  # the messages that start a run, each ended by its ``done``


def frame_text(data: bytes | None) -> str | None:
    """A binary frame read as the text it would have been (a script's), so that a run in it can be answered.
    Bytes that are not UTF-8 read as U+FFFD: one stray byte elsewhere must not hide a readable id."""
    return data.decode("utf-8", errors="replace") if data is not None else None


def readable_run_id(text: str | None) -> str | None:
    """The id of a frame that cannot be parsed, if it reads as a run's (``type`` "run" or "passes", an ``id``
    that is a non-empty string, even an overlong one): the reply is then that run's ``done``, so the client's
    run ends. (Echoing an overlong id once costs no more than the frame that carried it.)"""
    if text is None:
        return None
    fields = json_input.top_level_strings(text, ("type", "id"))
    run_id = fields.get("id")
    return run_id if fields.get("type") in RUN_MESSAGE_TYPES and run_id else None


def _short_string(raw: dict[str, Any], name: str, kind: str, required: bool) -> str | None:
    value = raw.get(name)
    if value is None and not required:
        return None
    if not isinstance(value, str) or not value or len(value) > MAX_ROOM_FIELD_CHARS:
        raise ProtocolError(f"'{kind}': field '{name}' must be a string of 1 to {MAX_ROOM_FIELD_CHARS} characters.")
    return value


def _parse_room(kind: str, raw: dict[str, Any], max_code_bytes: int) -> RoomMessage:
    if kind == "room_join":
        return RoomJoin(room=str(_short_string(raw, "room", kind, True)),
                        secret=_short_string(raw, "secret", kind, False))
    if kind == "room_leave":
        return RoomLeave()
    if kind == "room_edit":
        code = raw.get("code")
        if code is not None:
            if not isinstance(code, str):
                raise ProtocolError("'room_edit': field 'code' must be the editor's text, or left out.")
            if text_bytes(code, "code") > max_code_bytes:
                raise ProtocolError(f"'room_edit': the code is over the limit of {max_code_bytes} bytes.")
        selection = raw.get("selection")
        if selection is not None:
            if (not isinstance(selection, list) or len(selection) != 2
                    or not all(isinstance(x, int) and not isinstance(x, bool) and x >= 0 for x in selection)):
                raise ProtocolError("'room_edit': field 'selection' must be [anchor, head], two offsets >= 0.")
            selection = (selection[0], selection[1])
        if code is None and selection is None:
            raise ProtocolError("'room_edit' needs 'code', 'selection' or both.")
        return RoomEdit(code=code, selection=selection)
    if kind == "room_deck":
        action = raw.get("action")
        if action not in DECK_ACTIONS:
            raise ProtocolError(f"'room_deck': field 'action' must be one of {', '.join(DECK_ACTIONS)}.")
        position = raw.get("position")
        position_given = isinstance(position, int) and not isinstance(position, bool) and position >= 0
        if action == "goto" and not position_given:
            raise ProtocolError("'room_deck' with action 'goto' needs 'position', a slide index >= 0.")
        if action == "set" and position is not None and not position_given:
            raise ProtocolError("'room_deck' with action 'set': field 'position' must be a slide index >= 0, "
                                "or left out (the first slide).")
        snippets = raw.get("snippets")
        if action == "set":
            if (not isinstance(snippets, list) or len(snippets) > MAX_DECK_SNIPPETS
                    or not all(isinstance(x, str) and 0 < len(x) <= MAX_ROOM_FIELD_CHARS for x in snippets)):
                raise ProtocolError(f"'room_deck' with action 'set' needs 'snippets', a list of at most "
                                    f"{MAX_DECK_SNIPPETS} snippet ids.")
            snippets = tuple(snippets)
        return RoomDeck(action=action, position=position if action in ("goto", "set") else None,
                        snippets=snippets if action == "set" else None)
    raise ProtocolError(f"Unknown room message {kind!r}: use 'room_join', 'room_leave', 'room_edit' or 'room_deck'.")


def _run_id(raw: dict[str, Any], run_id: str | None) -> str:
    if run_id is None:
        raise ProtocolError("Field 'id' is required and must be a string chosen by the client.")
    if not run_id or len(run_id) > MAX_RUN_ID_CHARS:  # an overlong id is still answered, so its run ends
        raise ProtocolError(f"Field 'id' must be 1 to {MAX_RUN_ID_CHARS} characters.", run_id or None)
    text_bytes(run_id, "id", run_id)  # it travels on, to Redis and rooms: text only
    return run_id


def _code_and_backend(raw: dict[str, Any], rid: str, max_code_bytes: int) -> tuple[str, str | None]:
    code = raw.get("code")
    if not isinstance(code, str):
        raise ProtocolError("Field 'code' is required and must be a string.", rid)
    check_code_size(code, max_code_bytes, rid)
    backend = raw.get("backend")
    if backend is not None and not isinstance(backend, str):
        raise ProtocolError("Field 'backend' must be a string such as 'cpu', or left out.", rid)
    return code, backend


def check_code_size(code: str, max_code_bytes: int, run_id: str | None = None) -> None:
    """Refuse a program over ``max_code_bytes`` of UTF-8 (or not text at all), naming the limit."""
    size = text_bytes(code, "code", run_id)
    if size > max_code_bytes:
        raise ProtocolError(f"Code is {size} bytes; the limit is {max_code_bytes} bytes ({max_code_bytes // 1024} "
                            "KiB). Shorten the program.", run_id, reason="code_too_large")


def _parse_passes(raw: dict[str, Any], run_id: str | None, max_code_bytes: int) -> ClientPasses:
    rid = _run_id(raw, run_id)
    code, backend = _code_and_backend(raw, rid, max_code_bytes)
    key, fn = raw.get("key"), raw.get("fn")
    if not isinstance(key, str) or not _is_compile_key(key):
        raise ProtocolError("'passes': field 'key' must name a compilation as its 'compiled' event did, e.g. '2.1'.",
                            rid)
    if not isinstance(fn, str) or not fn or len(fn) > MAX_FN_NAME_CHARS:
        raise ProtocolError(f"'passes': field 'fn' must be the function's name (1 to {MAX_FN_NAME_CHARS} "
                            "characters), as its 'compiled' event gave it.", rid)
    return ClientPasses(id=rid, code=code, key=key, fn=fn, backend=backend or None, runtime=_runtime(raw, rid),
                        flags=_flags(raw, rid))


def _runtime(raw: dict[str, Any], rid: str) -> str | None:
    runtime = raw.get("runtime")
    if runtime is not None and (not isinstance(runtime, str) or not RUNTIME_NAME.match(runtime)):
        raise ProtocolError("Field 'runtime' must be a JAX version the backend offers, such as '0.4.38' "
                            "(GET /api/backends lists them), or left out.", rid, reason="unknown_runtime")
    return runtime or None


def _is_compile_key(key: str) -> bool:
    fn_id, dot, index = key.partition(".")
    return (len(key) <= MAX_PASSES_KEY_CHARS and dot == "." and fn_id.isascii() and fn_id.isdigit()
            and index.isascii() and index.isdigit())


def _parse_run(raw: dict[str, Any], run_id: str | None, max_code_bytes: int) -> ClientRun:
    rid = _run_id(raw, run_id)
    code, backend = _code_and_backend(raw, rid, max_code_bytes)
    timeout_s = raw.get("timeout_s")
    if timeout_s is not None:
        if isinstance(timeout_s, bool) or not isinstance(timeout_s, int | float) or not timeout_s > 0:
            raise ProtocolError("Field 'timeout_s' must be a positive number of seconds, or left out.", rid)
    runtime = _runtime(raw, rid)
    flags = {}
    for name in ("inspect", "fresh", "profile", "compare"):
        value = raw.get(name, ClientRun.__dataclass_fields__[name].default)
        if not isinstance(value, bool):
            raise ProtocolError(f"Field '{name}' must be true or false.", rid)
        flags[name] = value
    return ClientRun(id=rid, code=code, backend=backend or None, timeout_s=timeout_s, runtime=runtime or None,
                     flags=_flags(raw, rid), **flags)


def _flags(raw: dict[str, Any], rid: str) -> RunFlags | None:
    """The run's ``flags`` checked against the allow-list and written canonically; None when it sets none."""
    try:
        checked = validate_flags(raw.get("flags"))
    except FlagError as exc:
        raise ProtocolError(str(exc), rid, reason="bad_flags") from None
    return cast(RunFlags, checked.plain()) if checked else None


# --- server events --------------------------------------------------------

class RunEvent(TypedDict):
    id: str  # the run's, as the client chose it


class QueuedEvent(RunEvent):
    type: Literal["queued"]
    position: int  # 1 = next to start
    estimated_wait_s: float | None  # from recent runs' durations; None before any run finished on the backend


class StartedEvent(RunEvent):
    type: Literal["started"]
    backend: str
    devices: dict[str, Any]  # {kind, count, worker}
    jax_version: str  # of the runtime that runs it
    # Sent with every run now; a recorded run shared by an older server may lack them.
    jaxlib_version: NotRequired[str]
    sandbox: NotRequired[str]
    runtime: NotRequired[str]
    default_runtime: NotRequired[bool]
    flags: NotRequired[RunFlags]  # the JAX options and XLA flags it runs with, when any


class StdoutEvent(RunEvent):
    type: Literal["stdout"]
    text: str


class StderrEvent(RunEvent):
    type: Literal["stderr"]
    text: str


class ApiVersions(TypedDict):
    removed_in: NotRequired[str]
    added_in: NotRequired[str]


class OutOfMemory(TypedDict):
    """The jitted function an out-of-memory error came from (sandbox/capture/oom_link.py)."""
    fn: str
    line: int | None  # its definition's line in the user's code
    phase: Literal["compile", "execute"]  # XLA ran out compiling it, or allocating for or running it
    key: str | None  # its compilation, as its `compiled` event names it; None when it never compiled
    peak_bytes: int | None  # that compilation's peak (its `memory_view`)
    instruction: str | None  # the HLO instruction at that peak


class ErrorEvent(RunEvent):
    type: Literal["error"]
    ename: str
    message: str
    line: int | None  # 1-based, in the user's code; None when the error is not in it
    traceback: str  # the user's frames only
    hint: NotRequired[str]  # a moved or removed JAX API, or "Did you mean ...?"
    api: NotRequired[str]  # the JAX name this JAX lacks, e.g. "jax.tree_map"
    api_versions: NotRequired[ApiVersions]
    out_of_memory: NotRequired[OutOfMemory]  # an out-of-memory error that a jitted call raised


class DisplayEvent(RunEvent):
    type: Literal["display"]
    mime: str
    data: str  # text, or base64 for images
    role: str  # "result", "display" or "figure"
    notice: NotRequired[str]  # why the value is shown in a smaller form
    width: NotRequired[int]  # CSS pixels, for images
    height: NotRequired[int]
    text: NotRequired[str]  # the value as plain text, beside a richer form (exports, screen readers)
    vouch: NotRequired[str]  # the server's word that a run of this code made it (server/runs/output_vouch.py)


class DoneEvent(RunEvent):
    type: Literal["done"]
    status: RunStatus
    elapsed_ms: float
    message: NotRequired[str]
    read_session_cache: NotRequired[bool]  # it could load compiled code of its session's earlier runs
    cached: NotRequired[bool]  # answered from the result cache ...
    cached_at: NotRequired[str]  # ... which recorded it then (ISO 8601)
    reason: NotRequired[str]  # a rejected run's: why, one of REJECTION_REASONS


class NoticeEvent(TypedDict):
    type: Literal["notice"]
    id: str | None  # None when the message names no run
    level: Literal["error", "warning", "info"]
    message: str
    view: NotRequired[str]  # the tab it is about, e.g. "Inspect"


class ServerDrainingEvent(TypedDict):
    """This server is shutting down (server/ops/shutdown.py, phase 1): runs in flight may finish within
    ``grace_s`` seconds, new runs are refused, then every socket closes (1012, service restart). Sent to
    each open socket then, and to any that opens during the drain: the page says the server is
    restarting and holds new runs until it has reconnected."""
    type: Literal["server_draining"]
    message: str
    grace_s: float


class RoomStateEvent(TypedDict):
    """Everything a member needs to show a room now: on join, reconnect and slide changes."""
    type: Literal["room_state"]
    room: str
    moved_from: NotRequired[str]  # the six-character code the room left for ``room`` (reason "moved")
    reason: Literal["join", "deck", "moved"]
    role: Literal["presenter", "attendee"]
    code: str
    selection: tuple[int, int] | None
    version: int
    deck: list[str]
    position: int
    attendee_timeout_s: float
    presenter_online: bool
    run: list[ServerEvent] | None  # the presenter's latest run's events, or None
    people: int
    ran: int
    errors: int


class RoomEditEvent(TypedDict):
    type: Literal["room_edit"]
    room: str
    version: int
    code: NotRequired[str]  # left out when only the selection moved
    selection: tuple[int, int] | None


class RoomRunEvent(TypedDict):
    type: Literal["room_run"]
    room: str
    event: ServerEvent  # one event of the presenter's run


class RoomCountsEvent(TypedDict):
    type: Literal["room_counts"]
    room: str
    people: int
    ran: int  # of them, how many ran since the presenter last ran or changed slide
    errors: int


class RoomPresenceEvent(TypedDict):
    type: Literal["room_presence"]
    room: str
    presenter_online: bool


class RoomClosedEvent(TypedDict):
    type: Literal["room_closed"]
    room: str
    message: str


# The events every page reads; the capture's own (compiled, sharding, profile, ...) are in docs/protocol.md.
ServerEvent = (QueuedEvent | StartedEvent | StdoutEvent | StderrEvent | ErrorEvent | DisplayEvent | DoneEvent
               | NoticeEvent | ServerDrainingEvent | RoomStateEvent | RoomEditEvent | RoomRunEvent | RoomCountsEvent
               | RoomPresenceEvent | RoomClosedEvent)


def queued_event(run_id: str, position: int, estimated_wait_s: float | None = None) -> QueuedEvent:
    """``estimated_wait_s``: from recent run durations on this backend; None before any run finished."""
    wait = None if estimated_wait_s is None else round(estimated_wait_s, 1)
    return {"type": "queued", "id": run_id, "position": position, "estimated_wait_s": wait}


def started_event(run_id: str, backend: str, devices: dict[str, Any], jax_version: str) -> StartedEvent:
    return {"type": "started", "id": run_id, "backend": backend, "devices": devices, "jax_version": jax_version}


def done_event(run_id: str, status: RunStatus, elapsed_ms: float, message: str | None = None, **extra: Any) -> dict[str, Any]:
    event = {"type": "done", "id": run_id, "status": str(status), "elapsed_ms": round(elapsed_ms, 1)}
    if message:
        event["message"] = message
    event.update(extra)
    return event


def rejected(run_id: str, message: str, reason: str = "other") -> dict[str, Any]:
    return done_event(run_id, RunStatus.REJECTED, 0.0, message, reason=reason)


def notice_event(message: str, run_id: str | None = None) -> NoticeEvent:
    """A problem with a message that names no run (malformed JSON, binary frames)."""
    return {"type": "notice", "id": run_id, "level": "error", "message": message}


def server_draining_event(message: str, grace_s: float) -> ServerDrainingEvent:
    return {"type": "server_draining", "message": message, "grace_s": grace_s}


# --- workshop room events ----------------------------------------------------

def room_edit_event(room: str, version: int, code: str | None, selection: tuple[int, int] | None) -> dict[str, Any]:
    event: dict[str, Any] = {"type": "room_edit", "room": room, "version": version,
                             "selection": list(selection) if selection else None}
    if code is not None:
        event["code"] = code
    return event


def room_run_event(room: str, event: dict[str, Any]) -> dict[str, Any]:
    """One event of the presenter's run, for followers (``event.id`` is the presenter's run id)."""
    return {"type": "room_run", "room": room, "event": event}


def room_counts_event(room: str, people: int, ran: int, errors: int) -> RoomCountsEvent:
    return {"type": "room_counts", "room": room, "people": people, "ran": ran, "errors": errors}


def room_closed_event(room: str, message: str) -> RoomClosedEvent:
    return {"type": "room_closed", "room": room, "message": message}
