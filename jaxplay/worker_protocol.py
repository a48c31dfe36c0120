"""Server <-> worker messages on ``/worker``: the single source of truth.

A worker dials the server and speaks first::

    worker -> server  hello     {token, name, backend, device_kind, device_count,
                                 jax_version, jaxlib_version, slots, devices, libraries, device_peak, runtimes}
    server -> worker  welcome   {}                      or refused {message}, then close
    server -> worker  job       {run_id, code, timeout_s, options, runtime}
    server -> worker  cancel    {run_id}
    worker -> server  event     {run_id, event}         an event for the browser, no 'id'
    worker -> server  finished  {run_id, status, elapsed_ms, message?}
    worker -> server  slots     {busy, total, oom_kills, crashes}   after welcome and on every change

``slots`` is the worker's own view of its sandboxes for the server's metrics:
``oom_kills`` and ``crashes`` count since the worker process started.

``runtimes`` lists the JAX versions the worker offers (sandbox/runtimes/): each
``{name, jax_version, jaxlib_version, default, libraries, problem}``; the one with
``default`` is the worker's own JAX (the hello's ``jax_version``), and one with a
``problem`` cannot run programs (its install or its probe failed). A job's
``runtime`` names one of them ("" for the default); any other is ``finished``
with status ``rejected``.

``finished`` is the worker's last word on a run; the server turns it into the
browser's ``done``. Messages are JSON text frames named by who sends them.
"""

from __future__ import annotations

import json
import math
from dataclasses import asdict, dataclass, field, fields
from typing import Any

from jaxplay import json_input

PROTOCOL_VERSION = 1
REFUSED_CLOSE_CODE = 4401


@dataclass(frozen=True)
class WorkerHello:
    token: str
    name: str
    backend: str
    device_kind: str
    device_count: int
    jax_version: str
    jaxlib_version: str
    slots: int
    platform_version: str = ""
    device_memory_bytes: int = 0  # one device's memory (0 on the CPU, where the run's limit applies)
    # {import name: version} of the libraries a run can import (sandbox/engine/libraries.py).
    libraries: dict[str, str] = field(default_factory=dict)
    # The measured peak for rooflines: {flops_per_s, bytes_per_s, how, measured_at, device_kind}, or {}.
    device_peak: dict[str, Any] = field(default_factory=dict)
    # The JAX runtimes it offers (RUNTIME_FIELDS each); empty from a worker that offers only its own JAX.
    runtimes: list[dict[str, Any]] = field(default_factory=list)
    protocol: int = PROTOCOL_VERSION
    type: str = "hello"


@dataclass(frozen=True)
class ServerWelcome:
    type: str = "welcome"


@dataclass(frozen=True)
class ServerRefused:
    message: str
    type: str = "refused"


@dataclass(frozen=True)
class ServerJob:
    run_id: str
    code: str
    timeout_s: float
    options: dict[str, Any] = field(default_factory=dict)
    runtime: str = ""  # a JAX version the worker offers; "" for its default
    type: str = "job"


@dataclass(frozen=True)
class ServerCancel:
    run_id: str
    type: str = "cancel"


@dataclass(frozen=True)
class WorkerEvent:
    run_id: str
    event: dict[str, Any]
    type: str = "event"


@dataclass(frozen=True)
class WorkerFinished:
    run_id: str
    status: str
    elapsed_ms: float
    message: str | None = None
    type: str = "finished"


@dataclass(frozen=True)
class WorkerSlots:
    busy: int
    total: int
    oom_kills: int = 0
    crashes: int = 0
    type: str = "slots"


_BY_TYPE: dict[str, type] = {
    cls.type: cls  # type: ignore[attr-defined]
    for cls in (WorkerHello, ServerWelcome, ServerRefused, ServerJob, ServerCancel, WorkerEvent, WorkerFinished,
                WorkerSlots)
}


# Field types each message must carry: a frame with a wrong type is refused here, so nothing
# downstream (the scheduler, /api/backends) ever sees a count that is a string.
_CHECKS: dict[str, tuple[type, ...]] = {"str": (str,), "int": (int,), "float": (int, float),
                                        "dict[str, Any]": (dict,), "str | None": (str, type(None)),
                                        "dict[str, str]": (dict,), "list[dict[str, Any]]": (list,)}
MAX_FIELD_CHARS = 1 << 10
MAX_RUNTIMES = 64
MAX_RUNTIME_NAME_CHARS = 40
# Each runtime a hello lists: field -> accepted types.
RUNTIME_FIELDS: dict[str, tuple[type, ...]] = {"name": (str,), "jax_version": (str,), "jaxlib_version": (str,),
                                               "default": (bool,), "libraries": (dict,),
                                               "problem": (str, type(None))}


def _validate_runtimes(runtimes: list[Any]) -> None:
    if len(runtimes) > MAX_RUNTIMES:
        raise ValueError(f"'hello' may list at most {MAX_RUNTIMES} runtimes")
    for runtime in runtimes:
        if not isinstance(runtime, dict) or set(runtime) != set(RUNTIME_FIELDS):
            raise ValueError(f"each runtime of 'hello' must have exactly the fields {sorted(RUNTIME_FIELDS)}")
        for name, types in RUNTIME_FIELDS.items():
            if not isinstance(runtime[name], types):
                raise ValueError(f"runtime field {name!r} of 'hello' has the wrong type")
        if not 0 < len(runtime["name"]) <= MAX_RUNTIME_NAME_CHARS or len(str(runtime["problem"])) > MAX_FIELD_CHARS:
            raise ValueError(f"a runtime's name must be 1 to {MAX_RUNTIME_NAME_CHARS} characters")
        if not all(isinstance(k, str) and isinstance(v, str) for k, v in runtime["libraries"].items()):
            raise ValueError("a runtime's libraries must map names to version strings")


def _validate(message: Any) -> None:
    for f in fields(message):
        value = getattr(message, f.name)
        expected = _CHECKS.get(str(f.type))
        if expected is None:
            continue
        if isinstance(value, bool) or not isinstance(value, expected):
            raise ValueError(f"field {f.name!r} of {message.type!r} must be {f.type}, not {type(value).__name__}")
        if isinstance(value, int | float) and not math.isfinite(value):
            raise ValueError(f"field {f.name!r} of {message.type!r} must be finite")
        if isinstance(message, WorkerHello) and isinstance(value, str) and len(value) > MAX_FIELD_CHARS:
            raise ValueError(f"field {f.name!r} of 'hello' is longer than {MAX_FIELD_CHARS} characters")
    if isinstance(message, WorkerHello):
        _validate_runtimes(message.runtimes)
    if isinstance(message, ServerJob) and len(message.runtime) > MAX_RUNTIME_NAME_CHARS:
        raise ValueError(f"a job's runtime must be at most {MAX_RUNTIME_NAME_CHARS} characters")
    if isinstance(message, WorkerHello) and not (0 < message.slots <= 4096 and 0 <= message.device_count <= 1 << 16):
        raise ValueError("'hello' must offer 1 to 4096 slots and a device count from 0 to 65536")
    if isinstance(message, WorkerHello) and message.device_peak:
        _validate_peak(message.device_peak)
    if isinstance(message, WorkerSlots) and not (0 <= message.busy <= message.total <= 4096
                                                  and message.oom_kills >= 0 and message.crashes >= 0):
        raise ValueError("'slots' must count 0 <= busy <= total <= 4096 slots, and no negative kills or crashes")


PEAK_RATES = ("flops_per_s", "bytes_per_s")
PEAK_TEXTS = ("how", "measured_at", "device_kind")


def _validate_peak(peak: dict[str, Any]) -> None:
    """Two positive finite rates and short texts, nothing else: it is shown on every page."""
    if set(peak) - set(PEAK_RATES) - set(PEAK_TEXTS):
        raise ValueError(f"'hello' field 'device_peak' has unknown keys {sorted(set(peak) - set(PEAK_RATES) - set(PEAK_TEXTS))}")
    for name in PEAK_RATES:
        value = peak.get(name)
        if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value) or value <= 0:
            raise ValueError(f"'hello' field 'device_peak.{name}' must be a positive number")
    for name in PEAK_TEXTS:
        if name in peak and (not isinstance(peak[name], str) or len(peak[name]) > MAX_FIELD_CHARS):
            raise ValueError(f"'hello' field 'device_peak.{name}' must be text of at most {MAX_FIELD_CHARS} characters")


def encode(message: Any) -> str:
    return json.dumps(asdict(message), separators=(",", ":"))


def decode(text: str | bytes) -> Any:
    """Parse one frame into its dataclass; ValueError names what is wrong."""
    raw = json_input.loads(text)
    if not isinstance(raw, dict) or raw.get("type") not in _BY_TYPE:
        raise ValueError(f"unknown worker-protocol message: {str(raw)[:200]}")
    cls = _BY_TYPE[raw["type"]]
    try:
        message = cls(**raw)
    except TypeError as exc:
        raise ValueError(f"malformed {raw['type']!r} message: {exc}") from exc
    _validate(message)
    return message

