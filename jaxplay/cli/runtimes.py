"""``jaxplay runtimes add|remove|list``: the JAX runtimes a worker can offer (sandbox/runtimes/).

``add 0.6.2`` makes a venv under ``--runtimes-dir`` with jax and jaxlib 0.6.2
and the libraries sandbox/runtimes/pins.py pins for that line, with pip, from
a Python that release supports (``--python``, or the one
install.choose_python finds); a version that cannot be installed here is
refused in one line before anything is downloaded;
``remove`` deletes one; ``list`` shows each with its libraries, disk use and
install time. A worker offers the ones ``--runtimes`` names.
"""

from __future__ import annotations

import argparse
import json
import sys

from jaxplay.settings import RUNTIMES, Settings


def add_parser(commands: argparse._SubParsersAction, add_setting_flags) -> None:
    runtimes = commands.add_parser(RUNTIMES, help="Add, remove or list the JAX runtimes a worker can offer.")
    actions = runtimes.add_subparsers(dest="action", required=True)
    add = actions.add_parser("add", help="Install JAX versions as runtimes (pip, with the pinned libraries).")
    add.add_argument("versions", nargs="+", metavar="VERSION", help="A JAX version, e.g. 0.4.38.")
    add.add_argument("--python", default="", metavar="PYTHON",
                     help="The Python to make the runtimes' environments from (a path, or a command such as "
                          "python3.13). Default: the worker's own where the JAX supports it, else the newest that "
                          "does among the python3.N on PATH and pyenv's installs (JAX 0.11 and newer need 3.12+).")
    add.add_argument("--optional", action="append", default=[], metavar="VERSION",
                     help="One of the versions that this host may be unable to install (e.g. no Python new enough "
                          "for it): say why and go on without it instead of failing (make run).")
    add_setting_flags(add, RUNTIMES)
    remove = actions.add_parser("remove", help="Delete installed runtimes.")
    remove.add_argument("versions", nargs="+", metavar="VERSION")
    add_setting_flags(remove, RUNTIMES)
    listing = actions.add_parser("list", help="The installed runtimes, with their versions, size and install time.")
    listing.add_argument("--json", action="store_true", help="One JSON document instead of a table.")
    add_setting_flags(listing, RUNTIMES)


def own_jax() -> str:
    """The JAX of the environment this command runs in: the worker's own runtime."""
    from importlib import metadata

    try:
        return metadata.version("jax")
    except metadata.PackageNotFoundError:
        return "none"


def run(args: argparse.Namespace, settings: Settings) -> None:
    from jaxplay.sandbox.runtimes import install

    if args.action == "add":
        failed, left_out = [], []
        for version in args.versions:
            try:
                install.add(version, settings.runtimes_dir, python=args.python)
            except (ValueError, install.InstallFailed) as exc:
                if version in args.optional:
                    left_out.append((version, exc))
                    continue
                print(f"jaxplay runtimes add {version}: {exc}", file=sys.stderr)
                failed.append(version)
        if failed:
            sys.exit(1)
        for version, why in left_out:
            installed = [v for v in args.versions if install.store.record_of(settings.runtimes_dir, v) is not None]
            fallback = max([own_jax(), *installed], key=install.store.version_key)
            whose = " (this environment's own)" if fallback == own_jax() else ""
            print(f"JAX {version} is left out on this host: {why} Runs that name no version get JAX {fallback} "
                  f"instead, the newest here{whose}.", file=sys.stderr)
        added = [v for v in args.versions if v not in dict(left_out)]
        if added:
            print(f"Offer them with --runtimes {','.join(added)} (or JAXPLAY_RUNTIMES).")
    elif args.action == "remove":
        for version in args.versions:
            try:
                removed = install.remove(version, settings.runtimes_dir)
            except ValueError as exc:
                print(f"jaxplay runtimes remove: {exc}", file=sys.stderr)
                sys.exit(2)
            print(f"JAX {version}: {'removed' if removed else 'was not installed'}")
    else:
        rows = install.listing(settings.runtimes_dir)
        if args.json:
            print(json.dumps(rows, indent=1))
            return
        if not rows:
            print(f"No runtimes in {settings.runtimes_dir}: add one with `jaxplay runtimes add 0.4.38`.")
        for row in rows:
            if row["state"] == "failed":
                print(f"{row['version']:<10} FAILED  {row['message'][-200:]}")
                continue
            libraries = ", ".join(f"{n} {v}" for n, v in sorted(row.get("distributions", {}).items())
                                  if n in ("flax", "optax", "equinox", "numpy"))
            print(f"{row['version']:<10} {row.get('disk_bytes', 0) / 2**30:5.2f} GiB  "
                  f"installed in {row.get('install_seconds', 0):.0f} s  {libraries}")
