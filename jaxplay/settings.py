"""The one set of settings, shared by the CLI, the server, the worker and the docs.

Every field has a default, help text and a ``JAXPLAY_<NAME>`` environment
variable; ``jaxplay serve`` and ``jaxplay worker`` expose the same fields as
flags (see ``jaxplay_cli/commands.py``), and docs/settings.md lists them.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any

ENV_PREFIX = "JAXPLAY_"


def user_data_dir(environ: Mapping[str, str] | None = None) -> Path:
    """The default data folder: ``$XDG_DATA_HOME/jaxplay``, else ``~/.local/share/jaxplay``.

    Never inside the package or the checkout: a sandbox may read those.
    """
    environ = os.environ if environ is None else environ
    base = environ.get("XDG_DATA_HOME", "")
    # The XDG spec says to ignore a relative XDG_DATA_HOME.
    root = Path(base) if base and Path(base).is_absolute() else Path.home() / ".local" / "share"
    return root / "jaxplay"


def setting(default: Any, help: str, *, flag: bool = True) -> Any:
    """A settings field: its default and the sentence the CLI and docs show."""
    return field(default=default, metadata={"help": help, "flag": flag})


@dataclass(frozen=True)
class Settings:
    host: str = setting("127.0.0.1", "Address the server listens on.")
    port: int = setting(8000, "Port the server listens on.")
    data_dir: Path = setting(user_data_dir(), "Folder for the server's SQLite database.")
    local_workers: int = setting(1, "Local worker processes `serve` starts (0 for none).")
    worker_token: str = setting(
        "",
        "Shared secret remote workers must present; empty means only the "
        "server's own local workers can join.",
        flag=False,
    )
    slots: int = setting(2, "Runs a worker executes at once (one sandbox each).")
    cpu_devices: int = setting(8, "Virtual CPU devices each CPU run sees.")
    sandbox: str = setting("bwrap", "Sandbox for user code: 'bwrap' or 'none' (unsafe, development only).")
    run_timeout_s: float = setting(30.0, "Wall-clock limit of a run, in seconds; a run may ask for less.")
    memory_limit_mb: int = setting(4096, "Memory a run may use, in MiB.")
    output_limit_bytes: int = setting(1 << 20, "Bytes of stdout+stderr a run may send before truncation.")
    artifact_limit_bytes: int = setting(2 << 20, "Bytes of one IR artifact (jaxpr, HLO) before truncation.")
    max_code_bytes: int = setting(256 * 1024, "Largest program a run may carry, in bytes.")
    max_runs_per_connection: int = setting(4, "Runs one browser connection may have in flight.")
    queue_limit: int = setting(200, "Runs waiting per backend before new ones are rejected.")
    cache_limit_mb: int = setting(256, "Size of the result cache (recorded runs answered again at once), in MiB; "
                                       "0 turns the cache off.")
    max_recorded_run_bytes: int = setting(10 << 20, "Largest recorded run a shared snippet may carry, in bytes.")
    log_level: str = setting("info", "Log level of the jaxplay loggers.")

    def replace(self, **changes: Any) -> Settings:
        return dataclasses.replace(self, **changes)

    @classmethod
    def from_env(cls, environ: dict[str, str] | None = None, **overrides: Any) -> Settings:
        """Defaults, then ``JAXPLAY_*`` variables, then explicit overrides."""
        environ = os.environ if environ is None else environ
        values: dict[str, Any] = {}
        for f in fields(cls):
            raw = environ.get(ENV_PREFIX + f.name.upper())
            if raw is not None:
                values[f.name] = coerce(f.type, raw, f.name)
        values.update({k: v for k, v in overrides.items() if v is not None})
        return cls(**values)


def coerce(type_name: Any, raw: str, name: str) -> Any:
    kind = type_name if isinstance(type_name, str) else type_name.__name__
    try:
        if kind == "int":
            return int(raw)
        if kind == "float":
            return float(raw)
        if kind == "Path":
            return Path(raw)
    except ValueError as exc:
        raise ValueError(f"{ENV_PREFIX}{name.upper()}={raw!r} is not a valid {kind}") from exc
    return raw


def field_help() -> list[tuple[str, str, Any]]:
    """(name, help, default) for every setting: what docs and the CLI print."""
    return [(f.name, f.metadata["help"], f.default) for f in fields(Settings)]
