"""The events a run sends, by kind: the payload of the worker protocol's ``event`` and what the page reads.

A run's captures (``sandbox/capture/``) write them on its event pipe, the
worker's relay adds the program's output (``stdout``, ``stderr``) and its
own notices, the worker sends each to the server in ``WorkerEvent.event``,
and the server passes it to the page with the run's ``id`` added (the page
also gets the server's own ``queued``, ``started`` and ``done``:
jaxplay/browser_protocol.py). docs/protocol.md describes every field.

Each kind is a TypedDict named for its ``type``, the union's tag. Only
``type`` is required: a program may write an event of an allowed kind on
its own event pipe, and the worker's gate checks its kind, size, depth and
numbers, not its fields (sandbox/output/event_channel.py). The page reads
every other field as optional; the fields listed are those the
playground's own captures send.

``checked`` is the check at the boundary: the server applies it to every
``event`` frame, and the worker's gate admits only the same kinds, so a
frame it passes on is one the server accepts.
"""

from __future__ import annotations

from typing import Literal, Required, TypedDict, Union, get_args, get_type_hints

# A value as JSON has it: what the fields below hold where XLA or the program decides the shape.
JsonValue = Union[str, int, float, bool, None, list["JsonValue"], dict[str, "JsonValue"]]  # noqa: UP007


class StdoutEvent(TypedDict, total=False):
    type: Required[Literal["stdout"]]
    text: str


class StderrEvent(TypedDict, total=False):
    type: Required[Literal["stderr"]]
    text: str


class NoticeEvent(TypedDict, total=False):
    type: Required[Literal["notice"]]
    level: str  # info, warning, error
    message: str
    view: str  # the view it concerns (Inspect ...), when it concerns one


class ErrorEvent(TypedDict, total=False):
    type: Required[Literal["error"]]
    ename: str
    message: str
    line: int | None
    traceback: str
    hint: str
    api: str
    api_versions: dict[str, str]


class CompilingEvent(TypedDict, total=False):
    type: Required[Literal["compiling"]]
    fn_id: int
    fn: str
    line: int | None
    compile_index: int


class CompiledEvent(TypedDict, total=False):
    type: Required[Literal["compiled"]]
    key: str  # "<fn_id>.<compile_index>"
    fn_id: int
    fn: str
    line: int | None
    module: str | None
    compile_index: int
    previous_key: str | None
    signature: str
    arguments: list[dict[str, JsonValue]]
    outputs: str | None
    jaxpr: str
    stablehlo: str
    hlo: str
    source_lines: dict[str, list[list[int]]]
    truncated: dict[str, int]
    artifact_limit_bytes: int
    cost: dict[str, JsonValue] | None
    memory: dict[str, JsonValue] | None
    phases_ms: dict[str, float]
    persistent_cache_hit: bool
    lowered_module_cached: bool
    cache_miss_reason: str | None
    eqn_counts: dict[str, JsonValue] | None
    capture_errors: list[str]
    # Added by the sharding capture (jit_capture.COMPILED_HOOKS).
    collectives: dict[str, int]
    num_devices: int
    in_shardings: list[dict[str, JsonValue]]
    out_shardings: list[dict[str, JsonValue]]


class FnTimingEvent(TypedDict, total=False):
    type: Required[Literal["fn_timing"]]
    final: bool
    functions: list[dict[str, JsonValue]]


class TimingEvent(TypedDict, total=False):
    type: Required[Literal["timing"]]
    label: str
    line: int | None
    loops: int
    repeats: int
    samples_ms: list[float]
    median_ms: float
    warmup_ms: float


class ShardingEvent(TypedDict, total=False):
    type: Required[Literal["sharding"]]
    shape: list[int]
    dtype: str | None
    sharding_type: str
    spec: str
    mesh: dict[str, JsonValue] | None
    devices: list[int]
    shards: list[dict[str, JsonValue]]
    typeof: str | None
    source: dict[str, JsonValue]


class DisplayEvent(TypedDict, total=False):
    type: Required[Literal["display"]]
    mime: str
    data: str
    role: str  # result, display, figure
    notice: str
    width: int
    height: int
    text: str  # the value as plain text, beside a richer form (exports, screen readers)
    vouch: str  # added by the server alone: its word that a run of this code made it (server/runs/output_vouch.py)


class NondeterministicEvent(TypedDict, total=False):
    type: Required[Literal["nondeterministic"]]
    kind: str  # time, randomness, host state (sent by the worker: the kernel saw the run open a host file)
    source: str
    line: int | None


class RooflineEvent(TypedDict, total=False):
    type: Required[Literal["roofline"]]
    peak: dict[str, JsonValue] | None  # the worker's DevicePeak (jaxplay/worker_protocol.py), as the hello sends it
    functions: list[dict[str, JsonValue]]
    left_out: int


class ProfileEvent(TypedDict, total=False):
    type: Required[Literal["profile"]]
    label: str
    line: int | None
    duration_us: float
    tracks: list[dict[str, JsonValue]]
    slices: list[list[JsonValue]]
    trace: dict[str, JsonValue] | None
    notices: list[str]


class PassesEvent(TypedDict, total=False):
    type: Required[Literal["passes"]]
    key: str
    fn: str
    error: str
    pipelines: list[dict[str, JsonValue]]
    passes: list[dict[str, JsonValue]]
    dumps: list[dict[str, JsonValue]]
    limit_bytes: int
    notices: list[str]


RunEvent = (StdoutEvent | StderrEvent | NoticeEvent | ErrorEvent | CompilingEvent | CompiledEvent | FnTimingEvent
            | TimingEvent | ShardingEvent | DisplayEvent | NondeterministicEvent | RooflineEvent | ProfileEvent
            | PassesEvent)

# type -> its TypedDict: every kind a worker may send the server.
BY_TYPE: dict[str, type] = {get_args(get_type_hints(kind)["type"])[0]: kind
                            for kind in get_args(RunEvent)}
# Of those, the ones the worker itself makes (the program's output); a run may send the others.
WORKER_MADE = frozenset({"stdout", "stderr"})


def checked(raw: object) -> RunEvent:
    """``raw`` as a run event: a JSON object tagged with one of the kinds; ValueError otherwise."""
    if not isinstance(raw, dict) or not isinstance(raw.get("type"), str):
        raise ValueError("a run event must be a JSON object with a 'type'")
    if raw["type"] not in BY_TYPE:
        raise ValueError(f"{raw['type'][:40]!r} is not an event a run sends")
    return raw  # type: ignore[return-value]
