"""Which JAX runtimes a backend offers, and the one a run asks for: the server's view of sandbox/runtimes/.

Workers list their runtimes in their hello (jaxplay/worker_protocol.py); a
worker from before runtimes offers only its own JAX, which this module
describes as its default runtime. A run names a runtime by its JAX version
(``"runtime": "0.4.38"``) or none, for each worker's default. A name no
connected worker of the backend can run is refused before the run is queued,
with the versions that are offered; a runtime whose install or probe failed
is listed with its ``problem`` so /api/backends and /readyz say which and why.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Any

from jaxplay import browser_protocol as bp
from jaxplay import run_flags
from jaxplay import worker_protocol as wp


def runtimes_of(hello: wp.WorkerHello) -> list[wp.WorkerRuntime]:
    """The runtimes a worker offers; its own JAX (the default) first."""
    if hello.runtimes:
        return sorted(hello.runtimes, key=lambda r: not r.default)
    return [wp.WorkerRuntime(name=hello.jax_version, jax_version=hello.jax_version,
                             jaxlib_version=hello.jaxlib_version, default=True, libraries=hello.libraries,
                             problem=None)]


def runtime_of(hello: wp.WorkerHello, name: str) -> wp.WorkerRuntime | None:
    """The runtime ``name`` ("": the default) if this worker can run programs on it."""
    for runtime in runtimes_of(hello):
        if (runtime.name == name or (not name and runtime.default)) and not runtime.problem:
            return runtime
    return None


def offers(hello: wp.WorkerHello, name: str) -> bool:
    return runtime_of(hello, name) is not None


def version_key(name: str) -> tuple[int, ...]:
    return tuple(int(part) if part.isdigit() else -1 for part in re.split(r"[.+_-]", name))


def describe(hellos: Iterable[wp.WorkerHello]) -> list[dict[str, Any]]:
    """A backend's runtimes for /api/backends, newest first: each with the workers that can run it,
    ``default`` when it is a worker's own JAX, and ``problem`` when no worker can run it."""
    merged: dict[str, dict[str, Any]] = {}
    for hello in hellos:
        for runtime in runtimes_of(hello):
            entry = merged.setdefault(runtime.name, {
                "name": runtime.name, "jax_version": runtime.jax_version, "jaxlib_version": runtime.jaxlib_version,
                "default": False, "libraries": {}, "workers": 0, "problem": None})
            entry["default"] |= runtime.default
            if runtime.problem:
                entry["problem"] = entry["problem"] or runtime.problem
                continue
            entry["workers"] += 1
            entry["libraries"] = entry["libraries"] or runtime.libraries
            if not entry["jaxlib_version"]:
                entry["jaxlib_version"] = runtime.jaxlib_version
    for entry in merged.values():
        if entry["workers"]:
            entry["problem"] = None  # some worker runs it
    return sorted(merged.values(), key=lambda e: version_key(e["name"]), reverse=True)


def failed(backends: list[dict[str, Any]]) -> dict[str, dict[str, str]]:
    """``{backend: {runtime: problem}}`` for the runtimes no worker can run (/readyz)."""
    found: dict[str, dict[str, str]] = {}
    for backend in backends:
        for runtime in backend.get("runtimes", ()):
            if runtime["problem"]:
                found.setdefault(backend["name"], {})[runtime["name"]] = runtime["problem"]
    return found


def resolve(hellos: list[wp.WorkerHello], backend: str, requested: str | None) -> str:
    """The runtime a run gets: "" (each worker's default) when none is named, else the name if a
    connected worker of ``backend`` runs it; otherwise a ProtocolError naming the offered ones."""
    if requested is None or not hellos:
        return requested or ""  # no worker yet: the run waits, as runs without a runtime do
    if any(offers(hello, requested) for hello in hellos):
        return requested
    listed = describe(hellos)
    ready = [e["name"] + (" (default)" if e["default"] else "") for e in listed if not e["problem"]]
    broken = next((e for e in listed if e["name"] == requested and e["problem"]), None)
    why = (f"JAX {requested} cannot run programs on {backend} now: {broken['problem']}" if broken
           else f"JAX {requested} is not offered on {backend}")
    raise bp.ProtocolError(f"{why}. Choose one of: {', '.join(ready) or 'none'}.", reason="unknown_runtime")


def refusal(hellos: list[wp.WorkerHello], backend: str, name: str) -> str | None:
    """Why no connected worker will ever run a queued run on ``name`` now, or None when one may."""
    if not name or not hellos:
        return None
    try:
        resolve(hellos, backend, name)
    except bp.ProtocolError as exc:
        return str(exc)
    return None


def started_fields(hello: wp.WorkerHello, name: str) -> dict[str, Any]:
    """What the ``started`` event says of the runtime that runs it."""
    runtime = runtime_of(hello, name) or runtimes_of(hello)[0]
    return {"runtime": runtime.name, "jax_version": runtime.jax_version, "jaxlib_version": runtime.jaxlib_version,
            "default_runtime": runtime.default}


def flags_for_runtime(hellos: list[wp.WorkerHello], backend: str, name: str, flags: run_flags.RunFlags | dict[str, Any] | None
                      ) -> run_flags.RunFlags:
    """``flags`` (RunFlags, or a plain dict as any client sends it) checked against the allow-list and against
    the XLA of every connected worker's runtime ``name`` ("": each one's default) that could run it:
    ``run_flags.FlagError`` names the first flag one of them does not know."""
    checked = run_flags.validate(flags)
    if checked:
        for hello in hellos:
            runtime = runtime_of(hello, name)
            if runtime is not None:
                run_flags.check_runtime(checked, runtime.jaxlib_version or runtime.jax_version, backend)
        run_flags.check_runtime(checked, None, backend)
    return checked
