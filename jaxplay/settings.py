"""The one set of settings, shared by the CLI, the server, the worker and the docs.

Every field has a default, help text and a ``JAXPLAY_<NAME>`` environment
variable, and says which commands take it as a flag and which values it
allows. ``jaxplay/cli/commands.py`` makes the flags from that, and
``jaxplay/settings_doc.py`` writes docs/settings.md from it
(``python -m jaxplay.settings_doc``); tests fail while they disagree.
"""

from __future__ import annotations

import dataclasses
import os
from dataclasses import Field, dataclass, field, fields
from pathlib import Path
from typing import Any

ENV_PREFIX = "JAXPLAY_"
SERVE, WORKER, PURGE_RESULTS, RUNTIMES = "serve", "worker", "purge-results", "runtimes"
BACKUP, RESTORE, STORAGE, TOKENS = "backup", "restore", "storage", "tokens"
# The commands that take settings as flags, in the order the docs list them.
COMMANDS = (SERVE, WORKER, PURGE_RESULTS, RUNTIMES, BACKUP, RESTORE, STORAGE, TOKENS)
# The commands that open the store a server uses (its --data-dir or --database-url).
STORE_COMMANDS = (SERVE, PURGE_RESULTS, BACKUP, RESTORE, STORAGE, TOKENS)
# What a worker decides for itself (its sandboxes, caches, runtimes); `serve` passes it to its local workers.
SERVE_AND_WORKER = (SERVE, WORKER)


def user_dir(variable: str, fallback: str) -> Path:
    """An XDG base directory for jaxplay: never inside the project or the package, which sandboxes see."""
    return Path(os.environ.get(variable) or Path.home() / fallback) / "jaxplay"


def setting(default: Any, help: str, *, commands: tuple[str, ...] = (SERVE,), choices: tuple[str, ...] = (),
            shown_default: str | None = None) -> Any:
    """A settings field: its default; the sentence the CLI and docs show; the commands that take it as a flag
    (none: only its environment variable sets it); the values it allows (none: any of its type); and, where
    the default depends on the machine, how the docs and ``--help`` write it."""
    return field(default=default, metadata={"help": help, "commands": commands, "choices": choices,
                                            "shown_default": shown_default})


@dataclass(frozen=True)
class Settings:
    host: str = setting("127.0.0.1", "Address the server listens on.")
    port: int = setting(8000, "Port the server listens on.")
    data_dir: Path = setting(user_dir("XDG_DATA_HOME", ".local/share"),
                             "Folder for the server's SQLite database and keys (never one a sandbox can read).",
                             commands=STORE_COMMANDS,
                             shown_default="$XDG_DATA_HOME/jaxplay, else ~/.local/share/jaxplay")
    local_workers: int = setting(1, "Local worker processes `serve` starts (0 for none).")
    worker_token: str = setting(
        "",
        "Shared secret remote workers must present; empty means only the "
        "server's own local workers can join.",
        commands=(),
    )
    slots: int = setting(2, "Runs a worker executes at once (one sandbox each).", commands=SERVE_AND_WORKER)
    cpu_devices: int = setting(8, "Virtual CPU devices each CPU run sees.", commands=SERVE_AND_WORKER)
    sandbox: str = setting("bwrap", "Sandbox for user code: 'bwrap' or 'none' (unsafe, development only).",
                           commands=SERVE_AND_WORKER, choices=("bwrap", "none"))
    run_timeout_s: float = setting(30.0, "Wall-clock limit of a run, in seconds; a run may ask for less.")
    passes_work_limit_s: float = setting(10.0, "Wall-clock limit of a 'passes' request's own work (compiling the "
                                               "function again with XLA's per-pass dumps, reading them back), in "
                                               "seconds, within the run's own limit.")
    memory_limit_mb: int = setting(4096, "Memory a run may use, in MiB.", commands=SERVE_AND_WORKER)
    output_limit_bytes: int = setting(1 << 20, "Bytes of stdout+stderr a run may send before truncation.",
                                      commands=SERVE_AND_WORKER)
    artifact_limit_bytes: int = setting(2 << 20, "Bytes of one IR artifact (jaxpr, HLO) before truncation.",
                                        commands=SERVE_AND_WORKER)
    max_code_bytes: int = setting(256 * 1024, "Largest program a run may carry, in bytes.")
    max_runs_per_connection: int = setting(4, "Runs one browser connection may have in flight.")
    queue_limit: int = setting(200, "Runs waiting per backend before new ones are rejected.")
    max_connections_per_client: int = setting(8, "Open /ws connections one client may hold (a browser session; "
                                                 "every connection without the session cookie from one address "
                                                 "is one client).")
    max_runs_per_client: int = setting(8, "Runs one client (browser session) may have waiting or running, over all "
                                          "its connections.")
    max_connections_per_address: int = setting(1000, "Open /ws connections from one network address (an IPv6 /48) "
                                                     "over all its browsers: room for a classroom behind one NAT.")
    max_outbox_mb_per_address: int = setting(256, "MiB that the /ws connections of one network address may have "
                                                  "waiting to be sent, or being sent, over all of them (a "
                                                  "connection that would pass it is closed, and a page reconnects); "
                                                  "each connection alone may have 40.")
    new_sessions_per_address_per_hour: int = setting(1000, "Browser sessions one network address may start an hour "
                                                           "(all at once if need be: a workshop behind one NAT); "
                                                           "beyond it, its new visitors share one client.")
    trusted_proxies: str = setting("", "Reverse proxies (comma-separated addresses or networks, e.g. 10.0.0.0/8) "
                                       "whose forwarded headers name the client and its scheme; empty trusts none.")
    trusted_proxy_header: str = setting("x-forwarded-for", "The header the trusted proxies write: 'x-forwarded-for' "
                                                           "(with X-Forwarded-Proto) or 'forwarded' (RFC 7239).",
                                        choices=("x-forwarded-for", "forwarded"))
    allowed_hosts: str = setting("", "Host names the server answers to (comma-separated; '*.example.org' covers "
                                     "subdomains, '*' any); IP addresses always work. Empty: --host and localhost.")
    snippets_per_address_per_hour: int = setting(1000, "Shared links one network address may create an hour "
                                                       "(all at once if need be: a workshop behind one NAT).")
    snippet_mb_per_address_per_hour: int = setting(256, "MiB of shared links (code and recorded runs) one network "
                                                        "address may create an hour.")
    room_attendee_timeout_s: float = setting(10.0, "Wall-clock limit of a run an attendee starts in a workshop room, "
                                                   "in seconds (a room may set less).")
    room_idle_expiry_s: float = setting(6 * 3600.0, "A workshop room nobody used for this many seconds is deleted.")
    room_joins_per_client_per_hour: int = setting(60, "Room codes one client may try an hour, right ones included "
                                                      "(10 at once; a page's socket 5 at once, then 2 a minute); a "
                                                      "presenter joining with its secret is not counted.")
    room_code_misses_per_client_per_hour: int = setting(30, "Unknown room codes one client may try an hour; beyond "
                                                            "them it may try no code until they come back.")
    room_code_misses_per_address_per_hour: int = setting(300, "Unknown room codes one network address may try an "
                                                              "hour over all its clients; beyond them, only its "
                                                              "clients that missed none this hour may try, once.")
    room_short_codes_until: str = setting("2027-01-01", "The day (UTC, YYYY-MM-DD) from which a room's old "
                                                        "six-character code no longer finds it (a presenter who "
                                                        "opens it with the secret moves the room to a new "
                                                        "10-character code); empty: no end.")
    max_room_followers: int = setting(1000, "People who may follow one workshop room at once.")
    cache_limit_mb: int = setting(256, "Size of the result cache (recorded runs answered again at once), in MiB; "
                                       "0 turns the cache off.")
    mcp: str = setting("on", "The endpoint for coding assistants, /mcp (Model Context Protocol): 'on' serves it to "
                             "the tokens `jaxplay tokens add` issued, 'off' answers 404.", choices=("on", "off"))
    mcp_anonymous: bool = setting(False, "Also serve /mcp without a token: each network is then one client, as a "
                                         "browser without the session cookie is (docs/agents.md).")
    max_recorded_run_bytes: int = setting(10 << 20, "Largest recorded run a shared snippet may carry, in bytes.")
    log_level: str = setting("info", "Log level of the jaxplay loggers.",
                             commands=(SERVE, WORKER, PURGE_RESULTS, BACKUP, RESTORE, STORAGE, TOKENS))
    access_log: bool = setting(True, "Log one line per HTTP request and per websocket connection (logger "
                                     "jaxplay.access, at INFO): client network, method, path without its query "
                                     "string, status, duration; never code or output.")
    worker_host: str = setting("127.0.0.1", "Address of the separate listener for workers (/worker); "
                                            "loopback unless remote workers must reach it.")
    worker_port: int = setting(0, "Port of the workers' listener; 0 means the server's port plus one.")
    compile_cache_dir: Path = setting(user_dir("XDG_CACHE_HOME", ".cache"),
                                      "Folder for a worker's compile caches (shared and per session).",
                                      commands=SERVE_AND_WORKER,
                                      shown_default="$XDG_CACHE_HOME/jaxplay, else ~/.cache/jaxplay")
    compile_cache_session_mb: int = setting(256, "Size of one browser session's private compile cache, in MiB of "
                                                 "disk blocks.", commands=SERVE_AND_WORKER)
    compile_cache_session_files: int = setting(4096, "Files one browser session's private compile cache may hold.",
                                               commands=SERVE_AND_WORKER)
    compile_cache_total_mb: int = setting(8192, "Size of all browser sessions' private compile caches together, in "
                                                "MiB of disk blocks; the least recently used go first.",
                                          commands=SERVE_AND_WORKER)
    compile_cache_idle_s: float = setting(6 * 3600.0, "A session's compile cache is dropped after this many "
                                                      "seconds without a run.", commands=SERVE_AND_WORKER)
    gpu_slots: str = setting("per-gpu", "'per-gpu': one slot (one run at a time) per GPU; 'all': one slot "
                                        "that owns every GPU of the host.",
                             commands=SERVE_AND_WORKER, choices=("per-gpu", "all"))
    gpu_memory_fraction: float = setting(0.9, "Share of a GPU's memory the runs on one GPU may use together.",
                                         commands=SERVE_AND_WORKER)
    runs_per_gpu: int = setting(1, "Runs that share one GPU at once, each in a slot and sandbox of its own with an "
                                   "equal part of --gpu-memory-fraction: more trivial runs a second, less memory each.",
                                commands=SERVE_AND_WORKER)
    cgroups: str = setting("auto", "'auto': cap each slot's memory and processes with a cgroup where the host "
                                   "allows; 'off': use the rlimit fallback only.",
                           commands=SERVE_AND_WORKER, choices=("auto", "off"))
    trust_remote_results: bool = setting(False, "Let remote workers' results fill the result cache that answers "
                                                "other users; off, only the server's own local workers do.")
    allow_cpu_fallback: bool = setting(False, "Serve CPU runs on a host whose GPUs or TPUs JAX cannot use, "
                                              "instead of refusing to start.", commands=SERVE_AND_WORKER)
    metrics: str = setting("loopback", "Who may read GET /metrics: 'off', 'loopback' (only this host, not "
                                       "through a proxy) or 'token' (a bearer token, JAXPLAY_METRICS_TOKEN).",
                           choices=("off", "loopback", "token"))
    metrics_token: str = setting("", "Bearer token /metrics requires when --metrics token.", commands=())
    expected_backends: str = setting("", "Backends (comma-separated, e.g. 'cpu,gpu') that /readyz requires a "
                                         "connected worker for (local workers are required to join whatever "
                                         "backend their host offers).")
    default_backend: str = setting("", "The backend a run that names none runs on, and the page picks first; "
                                       "empty: 'cpu' where a cpu worker is connected, else the first backend "
                                       "that has one (on a GPU-only host, 'gpu').")
    shutdown_grace_s: float = setting(45.0, "Told to stop (SIGTERM, Ctrl+C), how long a server or worker lets its "
                                            "runs in flight finish before ending them, in seconds; a second signal "
                                            "ends them at once. Keep it above --run-timeout-s.",
                                      commands=SERVE_AND_WORKER)
    broker: str = setting("", "redis://[USER:PASSWORD@]HOST:PORT/DB (rediss:// for TLS) to share queues and "
                              "workers between several `serve` replicas; empty keeps everything in this process.")
    database_url: str = setting("", "Where snippets and the result cache live: sqlite:///PATH or "
                                    "postgresql://USER@HOST/DB; empty means SQLite in --data-dir.",
                                commands=STORE_COMMANDS)
    runtimes: str = setting("", "JAX versions a worker offers besides its own JAX, comma-separated (e.g. "
                                "'0.4.38,0.6.2'), each installed with `jaxplay runtimes add`; 'all' offers every "
                                "installed one.", commands=SERVE_AND_WORKER)
    runtimes_dir: Path = setting(user_dir("XDG_DATA_HOME", ".local/share") / "runtimes",
                                 "Folder of the installed JAX runtimes, one Python environment each.",
                                 commands=(SERVE, WORKER, RUNTIMES),
                                 shown_default="$XDG_DATA_HOME/jaxplay/runtimes, else ~/.local/share/jaxplay/runtimes")
    default_runtime: str = setting("newest", "The JAX a run that names none gets: 'newest' (the newest JAX the "
                                             "worker offers, its own among them), 'own' (the worker's own JAX), or "
                                             "one of the versions --runtimes lists.", commands=SERVE_AND_WORKER)
    runtime_idle_s: float = setting(600.0, "A runtime other than the worker's own stops its sandboxes after this "
                                           "many seconds without a run, and starts them again at its next run.",
                                    commands=SERVE_AND_WORKER)

    @property
    def worker_listen_port(self) -> int:
        return self.worker_port or self.port + 1

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


def kind_of(f: Field[Any]) -> str:
    """A field's type by name: 'int', 'float', 'bool', 'str' or 'Path' (annotations are strings here)."""
    return f.type if isinstance(f.type, str) else f.type.__name__


def coerce(type_name: Any, raw: str, name: str) -> Any:
    kind = type_name if isinstance(type_name, str) else type_name.__name__
    try:
        if kind == "int":
            return int(raw)
        if kind == "float":
            return float(raw)
        if kind == "Path":
            return Path(raw)
        if kind == "bool":
            if raw.lower() not in ("1", "true", "yes", "0", "false", "no", ""):
                raise ValueError(raw)
            return raw.lower() in ("1", "true", "yes")
    except ValueError as exc:
        raise ValueError(f"{ENV_PREFIX}{name.upper()}={raw!r} is not a valid {kind}") from exc
    return raw


# What the CLI and the docs say of each field, written once so that both say the same.

def env_variable(f: Field[Any]) -> str:
    return ENV_PREFIX + f.name.upper()


def flag_of(f: Field[Any]) -> str:
    """``--name``; for a switch that is on unless turned off, ``--no-name``, which turns it off."""
    if kind_of(f) == "bool" and f.default is True:
        return "--no-" + f.name.replace("_", "-")
    return "--" + f.name.replace("_", "-")


def default_text(f: Field[Any]) -> str:
    """The default as ``--help`` and docs/settings.md write it: the same on every machine."""
    if f.metadata["shown_default"] is not None:
        return f.metadata["shown_default"]
    if f.default == "":
        return "empty"
    if isinstance(f.default, bool):
        return "on" if f.default else "off"
    return str(f.default)


def exposed_by(command: str) -> list[Field[Any]]:
    """The fields ``jaxplay <command>`` takes as flags, in definition order."""
    if command not in COMMANDS:
        raise ValueError(f"{command!r} is not a command that takes settings: {', '.join(COMMANDS)}")
    return [f for f in fields(Settings) if command in f.metadata["commands"]]
