"""What each /mcp tool answers: the structured content, typed (the SDK publishes these as output schemas).

Every tool also answers a short text form (answers.py) for assistants that
read only text. Fields that can be large (output, IR) are bounded; a field
cut short says so in ``cut`` with the sizes, never silently.
"""

from __future__ import annotations

from typing import Any

from typing_extensions import TypedDict  # pydantic (the SDK's output schemas) needs it before Python 3.12


class ErrorAnswer(TypedDict):
    ename: str
    message: str
    line: int | None  # in the program as sent, 1-based
    hint: str | None


class RunAnswer(TypedDict):
    status: str  # ok, error, timeout, oom, crashed, cancelled, rejected (docs/protocol.md, "done")
    message: str | None  # the server's word on a status other than ok
    elapsed_ms: float | None
    cached: bool  # answered from the result cache (the same program ran before)
    backend: str | None
    runtime: str | None  # the JAX version it ran on
    devices: str | None  # e.g. "8 x cpu"
    flags: str | None  # the JAX options and XLA flags it ran with, e.g. "jax_enable_x64=true --xla_...=1"
    stdout: str
    stderr: str
    error: ErrorAnswer | None
    value: str | None  # the program's final expression as text, as the page's Output shows it
    cut: list[str]  # what was left out, and how much
    notices: list[str]
    link: str | None  # the program with this recorded run: opens in the browser on it
    link_note: str | None  # why there is no link, when there is none


class CompiledFunction(TypedDict):
    function: str
    key: str  # "<function id>.<compilation index>": each recompilation is one more
    line: int | None
    signature: str | None
    jaxpr: str
    stablehlo: str
    hlo: str
    cost: dict[str, Any] | None  # XLA's cost analysis: flops, bytes accessed, ...
    memory: dict[str, Any] | None  # XLA's memory analysis, in bytes
    recompile_reason: str | None  # why JAX compiled this function again (None for its first compilation)


class InspectAnswer(TypedDict):
    run: RunAnswer
    functions: list[CompiledFunction]
    cut: list[str]


class ArrayLayout(TypedDict):
    line: int | None
    shape: list[int]
    dtype: str | None
    sharding: str  # its sharding's type
    spec: str  # its PartitionSpec, as JAX writes it
    mesh: dict[str, Any] | None
    layout: str  # which device holds which block, as text


class ShardingAnswer(TypedDict):
    run: RunAnswer
    arrays: list[ArrayLayout]


class RuntimeRun(TypedDict):
    runtime: str
    status: str
    stdout: str
    error: ErrorAnswer | None
    value: str | None
    link: str | None


class IRDifference(TypedDict):
    function: str
    artifact: str  # jaxpr, stablehlo or hlo
    runtimes: list[str]  # the two runtimes compared
    diff: str  # a unified diff, bounded


class CompareAnswer(TypedDict):
    runs: list[RuntimeRun]
    same_output: bool
    differences: list[IRDifference]
    same_ir: list[str]  # "function: artifact" alike on every runtime
    cut: list[str]


class ShareAnswer(TypedDict):
    id: str
    url: str
    embed_url: str
    with_run: bool
    run: RunAnswer | None


class RuntimeOffer(TypedDict):
    name: str
    jax_version: str | None
    jaxlib_version: str | None
    default: bool


class BackendOffer(TypedDict):
    name: str
    default: bool
    device_kind: str | None
    device_count: int | None
    jax_version: str | None
    runtimes: list[RuntimeOffer]
    libraries: dict[str, str]
    workers: int
    queued: int


class OfferAnswer(TypedDict):
    backends: list[BackendOffer]
    default_backend: str | None
