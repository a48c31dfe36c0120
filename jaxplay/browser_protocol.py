"""Browser <-> server messages on ``/ws``: the single source of truth.

docs/protocol.md describes these for people; frontend/src/protocol.ts mirrors
them for the page. Client messages are parsed here into typed objects and
every problem becomes a ``ProtocolError`` whose text says what to change.
Server events are plain JSON objects built by the ``*_event`` functions, so
the same shape is produced whether a run was executed, cached or rejected.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from jaxplay import json_input

MAX_RUN_ID_CHARS = 128


class RunStatus(StrEnum):
    OK = "ok"
    ERROR = "error"
    TIMEOUT = "timeout"
    CANCELLED = "cancelled"
    CRASHED = "crashed"
    REJECTED = "rejected"


class ProtocolError(ValueError):
    """A client message we cannot accept; ``run_id`` is set when one was readable."""

    def __init__(self, message: str, run_id: str | None = None) -> None:
        super().__init__(message)
        self.run_id = run_id


@dataclass(frozen=True)
class ClientRun:
    id: str
    code: str
    backend: str | None = None
    timeout_s: float | None = None
    inspect: bool = True
    fresh: bool = False


@dataclass(frozen=True)
class ClientCancel:
    id: str


ClientMessage = ClientRun | ClientCancel


def parse_client_message(text: str | bytes | None, *, max_code_bytes: int) -> ClientMessage:
    if not isinstance(text, str):
        raise ProtocolError("Binary frames are not accepted: send each message as a JSON text frame.")
    try:
        raw = json_input.loads(text)
    except json.JSONDecodeError as exc:
        raise ProtocolError(f"Malformed JSON ({exc.msg} at position {exc.pos}): send one JSON object per frame.") from None
    except ValueError as exc:
        raise ProtocolError(f"Malformed JSON ({exc}): send one JSON object per frame.") from None
    if not isinstance(raw, dict):
        raise ProtocolError("Each message must be a JSON object with a 'type' field.")
    run_id = raw.get("id") if isinstance(raw.get("id"), str) else None
    kind = raw.get("type")
    if kind == "run":
        return _parse_run(raw, run_id, max_code_bytes)
    if kind == "cancel":
        return ClientCancel(id=_run_id(raw, run_id))
    raise ProtocolError(f"Unknown message type {kind!r}: use 'run' or 'cancel'.", run_id)


def _run_id(raw: dict[str, Any], run_id: str | None) -> str:
    if run_id is None:
        raise ProtocolError("Field 'id' is required and must be a string chosen by the client.")
    if not run_id or len(run_id) > MAX_RUN_ID_CHARS:
        raise ProtocolError(f"Field 'id' must be 1 to {MAX_RUN_ID_CHARS} characters.", None)
    return run_id


def _parse_run(raw: dict[str, Any], run_id: str | None, max_code_bytes: int) -> ClientRun:
    rid = _run_id(raw, run_id)
    code = raw.get("code")
    if not isinstance(code, str):
        raise ProtocolError("Field 'code' is required and must be a string.", rid)
    size = len(code.encode("utf-8", "surrogatepass"))
    if size > max_code_bytes:
        raise ProtocolError(
            f"Code is {size} bytes; the limit is {max_code_bytes} bytes ({max_code_bytes // 1024} KiB). "
            "Shorten the program.",
            rid,
        )
    backend = raw.get("backend")
    if backend is not None and not isinstance(backend, str):
        raise ProtocolError("Field 'backend' must be a string such as 'cpu', or left out.", rid)
    timeout_s = raw.get("timeout_s")
    if timeout_s is not None:
        if isinstance(timeout_s, bool) or not isinstance(timeout_s, int | float) or not timeout_s > 0:
            raise ProtocolError("Field 'timeout_s' must be a positive number of seconds, or left out.", rid)
    flags = {}
    for name in ("inspect", "fresh"):
        value = raw.get(name, ClientRun.__dataclass_fields__[name].default)
        if not isinstance(value, bool):
            raise ProtocolError(f"Field '{name}' must be true or false.", rid)
        flags[name] = value
    return ClientRun(id=rid, code=code, backend=backend or None, timeout_s=timeout_s, **flags)


# --- server events --------------------------------------------------------

def queued_event(run_id: str, position: int) -> dict[str, Any]:
    return {"type": "queued", "id": run_id, "position": position}


def started_event(run_id: str, backend: str, devices: dict[str, Any], jax_version: str) -> dict[str, Any]:
    return {"type": "started", "id": run_id, "backend": backend, "devices": devices, "jax_version": jax_version}


def done_event(run_id: str, status: RunStatus, elapsed_ms: float, message: str | None = None, **extra: Any) -> dict[str, Any]:
    event = {"type": "done", "id": run_id, "status": str(status), "elapsed_ms": round(elapsed_ms, 1)}
    if message:
        event["message"] = message
    event.update(extra)
    return event


def rejected(run_id: str, message: str) -> dict[str, Any]:
    return done_event(run_id, RunStatus.REJECTED, 0.0, message)


def notice_event(message: str, run_id: str | None = None) -> dict[str, Any]:
    """A problem with a message that names no run (malformed JSON, binary frames)."""
    return {"type": "notice", "id": run_id, "level": "error", "message": message}
