"""Server <-> worker messages on ``/worker``, and the run's types on its way to a sandbox: the single source of truth.

A worker dials the server and speaks first::

    worker -> server  hello     {token, name, backend, device_kind, device_count, jax_version, jaxlib_version,
                                 slots, platform_version, device_memory_bytes, libraries, device_peak, runtimes}
    server -> worker  welcome   {}                      or refused {message}, then close
    server -> worker  job       {run_id, code, timeout_s, options, runtime}
    server -> worker  cancel    {run_id}
    worker -> server  event     {run_id, event}         an event for the browser, no 'id' (jaxplay/run_events.py)
    worker -> server  finished  {run_id, status, elapsed_ms, message?, read_session_cache}
    worker -> server  slots     {busy, total, oom_kills, crashes}   after welcome and on every change
    worker -> server  draining  {grace_s}               told to stop: send it no new job; it leaves once
                                                        its runs end, or ends them after grace_s

One run, lowered step by step: each step is a frozen dataclass made from the
one before it, and JSON is written and read, and checked, only at a wire::

    bp.ClientRun, bp.ClientPasses  what the page sent (jaxplay/browser_protocol.py)
      -> RunRequest                what the browser asked, its backend and runtime resolved and its
                                   deadline set (server/browser_socket.py); the result cache keys on
                                   it. Between replicas it waits in Redis in a job
                                   (server/runs/broker_jobs.py)
      -> ServerJob                 what the worker is sent: JobOptions, the request's RunOptions and the
                                   name of its browser session's compile cache (server/runs/scheduler.py)
      -> SandboxRun                what the run's process gets through its spare's door: the job's
                                   options and what the worker adds, the memory, process and artifact
                                   limits, whether the session's cache may be read, and the device's
                                   peak (sandbox/engine/warm_sandbox.py; read in sandbox/engine/spare.py
                                   and run_process.py)

``slots`` is the worker's own view of its seats for the server's metrics:
``oom_kills`` and ``crashes`` count since the worker process started.

``runtimes`` lists the JAX versions the worker offers (sandbox/runtimes/);
the one with ``default`` is the worker's own JAX (the hello's
``jax_version``), and one with a ``problem`` cannot run programs (its
install or its probe failed). A job's ``runtime`` names one of them (""
for the default); any other is ``finished`` with status ``rejected``.

``draining`` is sent once, when the worker is told to stop (SIGTERM, or Ctrl+C):
the server gives it no new job (a job already on its way still runs), and the
worker closes the connection once its runs have ended. Runs still going after
``grace_s``, or at a second signal, end as ``crashed`` saying the worker stopped.

``finished`` is the worker's last word on a run; the server turns it into the
browser's ``done``. ``read_session_cache`` says the run could load compile-cache
entries that earlier runs of its browser session wrote (code JAX executes):
the server then never answers another session with its result. Messages are
JSON text frames named by who sends them.
"""

from __future__ import annotations

import json
import math
import types
from dataclasses import MISSING, dataclass, field, fields, is_dataclass
from functools import cache
from typing import Any, TypeVar, Union, get_args, get_origin, get_type_hints

from jaxplay import json_input, run_events
from jaxplay.run_events import RunEvent
from jaxplay.run_flags import FlagSetting, RunFlags

PROTOCOL_VERSION = 1
REFUSED_CLOSE_CODE = 4401
MAX_FIELD_CHARS = 1 << 10
MAX_RUNTIMES = 64
MAX_RUNTIME_NAME_CHARS = 40
# What a field's ``metadata`` may say of how it travels: left out of the JSON while it holds its default
# (the JSON then stays what peers of earlier versions sent), or None sent as {} (they expect an object).
OMITTED_AT_DEFAULT = {"wire": "omitted_at_default"}
NONE_AS_EMPTY = {"wire": "none_as_empty"}

# --- the run, from the browser's request to its sandbox --------------------------


@dataclass(frozen=True)
class PassesTarget:
    """The compilation whose XLA pass pipeline a ``passes`` request shows: ``key`` "<fn_id>.<compile_index>"."""
    key: str
    fn: str
    # Wall-clock seconds the dump itself (its compiles, reading the dumps back) may take, on top of the
    # program's run up to that compilation (--passes-work-limit-s); 0: the capture's own bound.
    work_limit_s: float = field(default=0.0, metadata=OMITTED_AT_DEFAULT)


@dataclass(frozen=True)
class RunOptions:
    """What the browser asked a run to capture besides its output (the result cache keys on it)."""
    inspect: bool = True
    profile: bool = field(default=False, metadata=OMITTED_AT_DEFAULT)
    passes: PassesTarget | None = field(default=None, metadata=OMITTED_AT_DEFAULT)
    # JAX options and XLA flags (jaxplay/run_flags.py): validated by the server, again by the worker.
    flags: RunFlags = field(default=RunFlags(), metadata=OMITTED_AT_DEFAULT)


# What a request that executes code is for (``RunRequest.kind``; the metrics' ``kind`` label): the program's
# results ("run"), with a profile of the whole run ("profile"), one runtime's column of the page's Compare
# ("compare", Run on all too), or one compilation's XLA pass pipeline ("passes").
RUN_KINDS = ("run", "profile", "compare", "passes")


@dataclass(frozen=True)
class RunRequest:
    """What the browser asked, its backend and runtime resolved: the same whoever executes it."""
    code: str
    backend: str
    timeout_s: float
    options: RunOptions = RunOptions()
    runtime: str = ""  # a JAX version the backend offers; "": each worker's default
    fresh: bool = False  # never answered from the result cache
    # One of the page's Compare runs (its word, for the metrics and the room: it changes nothing that runs).
    compare: bool = field(default=False, metadata=OMITTED_AT_DEFAULT)

    @property
    def kind(self) -> str:
        """What the request is for, one of ``RUN_KINDS``."""
        if self.options.passes is not None:
            return "passes"
        if self.compare:
            return "compare"
        return "profile" if self.options.profile else "run"

    @property
    def runs_the_program(self) -> bool:
        """Its results are the program's (output, compiled functions): a room may relay it, the result
        cache may answer and record it. A ``passes`` request stops at one compilation."""
        return self.options.passes is None


@dataclass(frozen=True)
class JobOptions(RunOptions):
    """The request's options and what the server adds for the worker."""
    # The server's derived name of the browser session's private compile cache (32 hex digits): a worker
    # never learns the session id. None for an address client, which gets none.
    compile_cache: str | None = field(default=None, metadata=OMITTED_AT_DEFAULT)

    @classmethod
    def of(cls, options: RunOptions, compile_cache: str | None) -> JobOptions:
        return cls(**{f.name: getattr(options, f.name) for f in fields(RunOptions)}, compile_cache=compile_cache)


@dataclass(frozen=True)
class DevicePeak:
    """A device's measured peak, the roofs of its rooflines (sandbox/engine/calibration.py)."""
    flops_per_s: float
    bytes_per_s: float
    how: str = field(default="", metadata=OMITTED_AT_DEFAULT)
    measured_at: str = field(default="", metadata=OMITTED_AT_DEFAULT)
    device_kind: str = field(default="", metadata=OMITTED_AT_DEFAULT)

    @property
    def ridge(self) -> float:
        """The arithmetic intensity (FLOP per byte) where the two roofs meet."""
        return self.flops_per_s / self.bytes_per_s


@dataclass(frozen=True)
class SandboxRun:
    """What a run's process is given through its spare's door: the job's options and what the worker adds.

    The worker is trusted code; it checks this at the door all the same (``from_wire``)."""
    options: JobOptions = JobOptions()
    # The session's saved compile-cache entries may be loaded: decided by the worker before the run starts.
    compile_cache_read: bool = False
    memory_limit_bytes: int = 0  # --memory-limit-mb, named in a run's out-of-memory error; 0: not told
    memory_rlimit: bool = False  # no cgroup holds the memory limit: the run's process sets RLIMIT_DATA
    limit_processes: bool = False  # RLIMIT_NPROC inside the sandbox
    artifact_limit_bytes: int | None = None  # of one IR text (--artifact-limit-bytes); None: the capture's own
    device_peak: DevicePeak | None = None  # the worker's measured peak, for rooflines
    probe: bool = False  # the worker's own device probe, not a program
    calibrate: bool = False  # the probe also measures the device's peak


# --- the worker's own messages -------------------------------------------------------


@dataclass(frozen=True)
class WorkerRuntime:
    """One JAX runtime a worker offers."""
    name: str
    jax_version: str
    jaxlib_version: str
    default: bool
    libraries: dict[str, str]
    problem: str | None


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
    device_peak: DevicePeak | None = field(default=None, metadata=NONE_AS_EMPTY)  # None: it could not measure one
    # The JAX runtimes it offers; empty from a worker that offers only its own JAX.
    runtimes: tuple[WorkerRuntime, ...] = ()
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
    options: JobOptions = JobOptions()
    runtime: str = ""  # a JAX version the worker offers; "" for its default
    type: str = "job"


@dataclass(frozen=True)
class ServerCancel:
    run_id: str
    type: str = "cancel"


@dataclass(frozen=True)
class WorkerEvent:
    run_id: str
    event: RunEvent
    type: str = "event"


@dataclass(frozen=True)
class WorkerFinished:
    run_id: str
    status: str
    elapsed_ms: float
    message: str | None = None
    read_session_cache: bool = False
    type: str = "finished"


@dataclass(frozen=True)
class WorkerSlots:
    busy: int
    total: int
    oom_kills: int = 0
    crashes: int = 0
    type: str = "slots"


@dataclass(frozen=True)
class WorkerDraining:
    grace_s: float  # how long its runs in flight may still take
    type: str = "draining"


_BY_TYPE: dict[str, type] = {
    cls.type: cls  # type: ignore[attr-defined]
    for cls in (WorkerHello, ServerWelcome, ServerRefused, ServerJob, ServerCancel, WorkerEvent, WorkerFinished,
                WorkerSlots, WorkerDraining)
}

# --- JSON at the wire ------------------------------------------------------------------

Message = TypeVar("Message")


def to_wire(value: Any) -> Any:
    """A message, or any part of one, as JSON values (fields by their ``metadata``)."""
    if is_dataclass(value) and not isinstance(value, type):
        wire: dict[str, Any] = {}
        for f in fields(value):
            item = getattr(value, f.name)
            rule = f.metadata.get("wire")
            if rule == OMITTED_AT_DEFAULT["wire"] and item == f.default:
                continue
            wire[f.name] = {} if rule == NONE_AS_EMPTY["wire"] and item is None else to_wire(item)
        return wire
    if isinstance(value, tuple | list):
        return [to_wire(item) for item in value]
    if isinstance(value, dict):
        return {key: to_wire(item) for key, item in value.items()}
    return value


def from_wire(cls: type[Message], raw: Any, where: str | None = None) -> Message:
    """``raw`` (parsed JSON) as a ``cls``, every field type-checked; ValueError names what is wrong."""
    where = where or repr(getattr(cls, "type", cls.__name__))
    if not isinstance(raw, dict):
        raise ValueError(f"{where} must be a JSON object")
    known = {f.name: f for f in fields(cls)}  # type: ignore[arg-type]
    unknown = sorted(set(raw) - set(known))
    if unknown:
        raise ValueError(f"{where} has unknown fields {unknown}")
    hints = _hints(cls)
    values: dict[str, Any] = {}
    for name, f in known.items():
        if name not in raw:
            if f.default is MISSING and f.default_factory is MISSING:
                raise ValueError(f"{where} lacks the field {name!r}")
            continue
        value = raw[name]
        if f.metadata.get("wire") == NONE_AS_EMPTY["wire"] and value == {}:
            value = None
        values[name] = _typed(hints[name], value, f"field {name!r} of {where}")
    return cls(**values)


@cache
def _hints(cls: type) -> dict[str, Any]:
    return get_type_hints(cls)


def _typed(hint: Any, value: Any, where: str) -> Any:
    """``value`` checked against ``hint`` (and made a tuple or a dataclass where the hint says so)."""
    origin, args = get_origin(hint), get_args(hint)
    if hint == RunEvent:
        return run_events.checked(value)
    if origin in (Union, types.UnionType):  # X | None: the only unions a message holds besides RunEvent
        if value is None and type(None) in args:
            return None
        (hint,) = [arg for arg in args if arg is not type(None)]
        origin, args = get_origin(hint), get_args(hint)
    if hint is bool:
        if type(value) is not bool:
            raise ValueError(f"{where} must be true or false")
        return value
    if hint in (int, float):
        kinds = (int,) if hint is int else (int, float)
        if isinstance(value, bool) or not isinstance(value, kinds) or not math.isfinite(value):
            raise ValueError(f"{where} must be a finite {hint.__name__}, not {type(value).__name__}")
        return value
    if hint is str:
        if not isinstance(value, str):
            raise ValueError(f"{where} must be a string, not {type(value).__name__}")
        return value
    if origin is tuple:
        if not isinstance(value, list):
            raise ValueError(f"{where} must be a list")
        return tuple(_typed(args[0], item, f"an item of {where}") for item in value)
    if origin is dict:  # dict[str, str]: names to versions
        if not isinstance(value, dict) or not all(isinstance(k, str) and isinstance(v, str) for k, v in value.items()):
            raise ValueError(f"{where} must map names to strings")
        return value
    if is_dataclass(hint):
        return from_wire(hint, value, where)  # type: ignore[type-var]
    raise TypeError(f"no wire form for {hint!r}")  # a message field of a type this module does not read


def encode(message: Any) -> str:
    return json.dumps(to_wire(message), separators=(",", ":"))


def decode(text: str | bytes) -> Any:
    """Parse one frame into its dataclass; ValueError names what is wrong."""
    raw = json_input.loads(text)
    if not isinstance(raw, dict) or raw.get("type") not in _BY_TYPE:
        raise ValueError(f"unknown worker-protocol message: {str(raw)[:200]}")
    message = from_wire(_BY_TYPE[raw["type"]], raw)
    check_limits(message)
    return message


def check_limits(message: Any) -> None:
    """What the field types do not say: counts in range, texts short, a peak of two positive rates."""
    if isinstance(message, WorkerHello):
        _check_hello(message)
    if isinstance(message, ServerJob) and len(message.runtime) > MAX_RUNTIME_NAME_CHARS:
        raise ValueError(f"a job's runtime must be at most {MAX_RUNTIME_NAME_CHARS} characters")
    if isinstance(message, WorkerSlots) and not (0 <= message.busy <= message.total <= 4096
                                                  and message.oom_kills >= 0 and message.crashes >= 0):
        raise ValueError("'slots' must count 0 <= busy <= total <= 4096 slots, and no negative kills or crashes")
    if isinstance(message, WorkerDraining) and message.grace_s < 0:
        raise ValueError("'draining' must give a grace of 0 seconds or more")


def _check_hello(hello: WorkerHello) -> None:
    for f in fields(hello):
        value = getattr(hello, f.name)
        if isinstance(value, str) and len(value) > MAX_FIELD_CHARS:
            raise ValueError(f"field {f.name!r} of 'hello' is longer than {MAX_FIELD_CHARS} characters")
    if not (0 < hello.slots <= 4096 and 0 <= hello.device_count <= 1 << 16):
        raise ValueError("'hello' must offer 1 to 4096 slots and a device count from 0 to 65536")
    if len(hello.runtimes) > MAX_RUNTIMES:
        raise ValueError(f"'hello' may list at most {MAX_RUNTIMES} runtimes")
    for runtime in hello.runtimes:
        if not 0 < len(runtime.name) <= MAX_RUNTIME_NAME_CHARS or len(runtime.problem or "") > MAX_FIELD_CHARS:
            raise ValueError(f"a runtime's name must be 1 to {MAX_RUNTIME_NAME_CHARS} characters")
    peak = hello.device_peak
    if peak is not None:  # shown on every page
        if not (peak.flops_per_s > 0 and peak.bytes_per_s > 0):
            raise ValueError("'hello' field 'device_peak' must hold two positive rates")
        if max(len(peak.how), len(peak.measured_at), len(peak.device_kind)) > MAX_FIELD_CHARS:
            raise ValueError(f"'hello' field 'device_peak' has a text over {MAX_FIELD_CHARS} characters")


# Each type's annotations read once, at import (about 5 ms): a run's process, forked from a zygote that
# imported this module, then checks its SandboxRun at the door without reading them again.
for _message_type in (FlagSetting, RunFlags, PassesTarget, RunOptions, RunRequest, JobOptions, DevicePeak, SandboxRun, WorkerRuntime,
                      *_BY_TYPE.values()):
    _hints(_message_type)
