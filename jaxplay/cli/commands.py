"""``jaxplay serve`` and ``jaxplay worker``: flags made from the one Settings definition."""

from __future__ import annotations

import argparse
import asyncio
import logging
import os
import sys
from dataclasses import fields
from pathlib import Path
from typing import Any

from jaxplay import __version__
from jaxplay import browser_protocol as bp
from jaxplay.cli import runtimes, storage, tokens
from jaxplay.settings import (
    BACKUP,
    ENV_PREFIX,
    PURGE_RESULTS,
    RESTORE,
    SERVE,
    STORAGE,
    TOKENS,
    WORKER,
    Settings,
    default_text,
    env_variable,
    exposed_by,
    flag_of,
    kind_of,
)


def add_setting_flags(parser: argparse.ArgumentParser, command: str) -> None:
    """The flags of the settings ``command`` takes (each field names its commands in jaxplay/settings.py)."""
    for f in exposed_by(command):
        # argparse formats help with %: a literal one is written %%.
        help_text = f"{f.metadata['help']} (default: {default_text(f)}; env {env_variable(f)})".replace("%", "%%")
        if kind_of(f) == "bool":  # a switch: --name turns it on, or --no-name off where it is on by default
            parser.add_argument(flag_of(f), dest=f.name, action="store_const", const=f.default is not True,
                                default=None, help=help_text)
            continue
        convert = {"int": int, "float": float, "Path": Path}.get(kind_of(f), str)
        extra: dict[str, Any] = {"choices": f.metadata["choices"]} if f.metadata["choices"] else {}
        parser.add_argument(flag_of(f), dest=f.name, type=convert, default=None, help=help_text, **extra)


def settings_from(args: argparse.Namespace) -> Settings:
    names = {f.name for f in fields(Settings)}
    return Settings.from_env(**{k: v for k, v in vars(args).items() if k in names})


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="jaxplay", description="JAX Playground server and worker.")
    parser.add_argument("--version", action="version", version=f"jaxplay {__version__}")
    commands = parser.add_subparsers(dest="command", required=True)
    serve = commands.add_parser(SERVE, help="Start the web server (and, by default, a local CPU worker).")
    add_setting_flags(serve, SERVE)
    serve.add_argument("--no-local-worker", action="store_true", help="Start no local worker (same as --local-workers 0).")
    worker = commands.add_parser(WORKER, help="Run a worker that dials a server and executes runs.")
    worker.add_argument("--server", required=True, help="The server's worker URL, e.g. ws://HOST:8001/worker.")
    worker.add_argument("--token", default=None, help=f"Shared secret (default: env {ENV_PREFIX}WORKER_TOKEN).")
    worker.add_argument("--name", default=None, help="Name shown for this worker (default: host name).")
    add_setting_flags(worker, WORKER)
    purge = commands.add_parser(
        PURGE_RESULTS, help="Delete the result cache's entries a worker recorded (without arguments: list them).")
    which = purge.add_mutually_exclusive_group()
    which.add_argument("--worker", action="append", default=[], metavar="NAME",
                       help="A worker's name, as the server's log shows it ('worker NAME joined'); repeatable.")
    which.add_argument("--all", action="store_true", help="Every entry, whichever worker recorded it.")
    add_setting_flags(purge, PURGE_RESULTS)
    runtimes.add_parser(commands, add_setting_flags)
    storage.add_parsers(commands, add_setting_flags)
    tokens.add_parser(commands, add_setting_flags)
    return parser


def configure_logging(level: str) -> None:
    logging.basicConfig(format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    logging.getLogger("jaxplay").setLevel(level.upper())


def serve(args: argparse.Namespace) -> None:
    from jaxplay.server.app import create_app

    settings = settings_from(args)
    if args.no_local_worker:
        settings = settings.replace(local_workers=0)
    configure_logging(settings.log_level)
    problem = data_dir_problem(settings)
    if problem:
        print(f"jaxplay serve: {problem}", file=sys.stderr)
        sys.exit(2)
    try:
        app = create_app(settings)
    except ValueError as exc:
        print(f"jaxplay serve: {exc}", file=sys.stderr)
        sys.exit(2)
    print(f"JAX Playground {__version__}: http://{settings.host}:{settings.port}", flush=True)
    asyncio.run(serve_both(app, settings))


def data_dir_problem(settings: Settings) -> str | None:
    """Why the data dir must not be used: a sandbox could read it (every snippet, every cached output)."""
    if settings.sandbox == "none" or settings.local_workers == 0:
        return None
    from jaxplay.sandbox.isolation.bwrap import exposing_folder

    exposed = exposing_folder(settings.data_dir)
    if exposed is None:
        return None
    return (f"the data dir {settings.data_dir} lies inside {exposed}, which every sandbox can read, so user code "
            f"could read the stored snippets and cached runs. Choose a folder outside it with --data-dir "
            f"(the default is {Settings.__dataclass_fields__['data_dir'].default}).")


async def serve_both(app: Any, settings: Settings) -> None:
    """The public server and the workers' listener in one event loop. The public one owns the
    signals, the lifespan and the shutdown phases (server/ops/shutdown.py); the workers' listener
    keeps serving while runs drain and closes in the last phase, after the lifespan's exit."""
    import contextlib

    import uvicorn

    from jaxplay.server.clients.socket_transport import TransportInScope
    from jaxplay.server.ops.shutdown import PhasedServer

    class WorkerListener(uvicorn.Server):
        def capture_signals(self) -> Any:
            return contextlib.nullcontext()

    # proxy_headers off: uvicorn would believe X-Forwarded-For from any loopback peer; the app judges
    # forwarded headers itself, from --trusted-proxies only (server/clients/proxies.py).
    options = {"log_level": "warning", "ws_ping_interval": 20, "timeout_graceful_shutdown": 5, "proxy_headers": False}
    # Browsers send programs, never more than a program's worth (anyone may connect); workers, who are
    # authenticated and on their own listener, send a run's events (up to 16 MiB each).
    # TransportInScope: the browser socket counts what each peer has not read (server/clients/socket_transport.py).
    public = PhasedServer(uvicorn.Config(app, host=settings.host, port=settings.port, ws=TransportInScope,
                                         ws_max_size=bp.max_frame_bytes(settings.max_code_bytes), **options),
                          app.state.playground, settings.shutdown_grace_s)
    listener = WorkerListener(uvicorn.Config(app.state.worker_app, host=settings.worker_host,
                                             port=settings.worker_listen_port, lifespan="off",
                                             ws_max_size=256 << 20, **options))
    listening = asyncio.create_task(listener.serve())

    async def close_listener() -> None:
        listener.should_exit = True
        await listening

    public.last_phase.append(close_listener)
    try:
        await public.serve()
    finally:
        await close_listener()


def worker(args: argparse.Namespace) -> None:
    from jaxplay.sandbox.agent import TokenRefused, WorkerAgent, WorkerCannotStart

    settings = settings_from(args)
    configure_logging(settings.log_level)
    token = args.token if args.token is not None else os.environ.get(ENV_PREFIX + "WORKER_TOKEN", "")
    if settings.sandbox == "none":
        logging.getLogger("jaxplay.worker").warning(
            "SANDBOX DISABLED (--sandbox none): user code runs unconfined with this worker's privileges.")
    agent = WorkerAgent(settings, args.server, token, args.name)
    try:
        asyncio.run(agent.serve_forever())
    except TokenRefused as refused:
        print(f"jaxplay worker: the server refused this worker: {refused.message}", file=sys.stderr)
        sys.exit(2)
    except WorkerCannotStart as refused:
        print(f"jaxplay worker: {refused.message}", file=sys.stderr)
        sys.exit(3)
    except KeyboardInterrupt:
        pass


def purge_results(args: argparse.Namespace) -> None:
    from jaxplay.cli import results

    results.purge_results(args.worker, args.all, settings_from(args))


def manage_runtimes(args: argparse.Namespace) -> None:
    runtimes.run(args, settings_from(args))


def main(argv: list[str] | None = None) -> None:
    args = build_parser().parse_args(argv)
    if args.command in (BACKUP, RESTORE, STORAGE, TOKENS):
        run = {BACKUP: storage.run_backup, RESTORE: storage.run_restore, STORAGE: storage.run_storage,
               TOKENS: tokens.run}[args.command]
        settings = settings_from(args)
        configure_logging(settings.log_level)
        run(args, settings)
        return
    {"serve": serve, "worker": worker, "purge-results": purge_results, "runtimes": manage_runtimes}[args.command](args)
