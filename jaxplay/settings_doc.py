"""docs/settings.md, and the settings tables inside other docs, written from the fields of jaxplay/settings.py.

``python -m jaxplay.settings_doc`` rewrites them in a checkout; with
``--check`` it only names those out of date (exit 1). The tests
(tests/unit/test_settings_reference.py) fail while any is.

A table inside another document is a block between two markers; the
generator writes the rows of the settings the first one names::

    <!-- settings: trusted_proxies allowed_hosts -->
    <!-- /settings -->
"""

from __future__ import annotations

import argparse
import re
import sys
from dataclasses import Field, fields
from pathlib import Path
from typing import Any

from jaxplay import IMPORT_ROOT
from jaxplay.settings import COMMANDS, Settings, default_text, env_variable, exposed_by, flag_of

REFERENCE = Path("docs/settings.md")
# Documents that may hold blocks, relative to the checkout.
BLOCK_DOCUMENTS = ("README.md", "docs/*.md")
BLOCK = re.compile(r"(<!-- settings: ([a-z0-9_ ]+) -->\n)(.*?)(<!-- /settings -->)", re.S)
GENERATOR = "python -m jaxplay.settings_doc"

INTRODUCTION = f"""# Settings

<!-- Written by `{GENERATOR}` from the fields of jaxplay/settings.py: edit them there, then run it. -->

Every setting has a default and an environment variable `JAXPLAY_<NAME>`;
most are also a flag of the commands named beside them. A flag wins over
the variable, and the variable over the default. A yes/no setting's flag
takes no value (`--trust-remote-results`; one that is on by default has a
`--no-` flag that turns it off, `--no-access-log`); its variable takes `1`,
`true` or `yes` (`0`, `false`, `no` or empty for off). `jaxplay <command> --help`
prints the same settings for one command, beside the command's own flags
(`worker --server`, `--token`, `--name`; `serve --no-local-worker`).
"""


def cell(text: str) -> str:
    return text.replace("|", "\\|")


def default_cell(f: Field[Any]) -> str:
    text = default_text(f)
    return text if text == "empty" else f"`{cell(text)}`"


def what_cell(f: Field[Any]) -> str:
    choices = f.metadata["choices"]
    allowed = f" One of {', '.join(f'`{c}`' for c in choices)}." if choices else ""
    return cell(f.metadata["help"]) + allowed


def flag_cell(f: Field[Any]) -> str:
    return f"`{flag_of(f)}`" if f.metadata["commands"] else "none"


def commands_cell(f: Field[Any]) -> str:
    return ", ".join(f.metadata["commands"]) or "none: the variable only"


def table(chosen: list[Field[Any]], *, with_commands: bool) -> str:
    if with_commands:
        lines = ["| Flag | Environment variable | Default | Commands | What |", "|---|---|---|---|---|"]
        lines += [f"| {flag_cell(f)} | `{env_variable(f)}` | {default_cell(f)} | {commands_cell(f)} | {what_cell(f)} |"
                  for f in chosen]
    else:
        lines = ["| Flag | Environment variable | Default | What |", "|---|---|---|---|"]
        lines += [f"| {flag_cell(f)} | `{env_variable(f)}` | {default_cell(f)} | {what_cell(f)} |" for f in chosen]
    return "\n".join(lines) + "\n"


def reference() -> str:
    """The whole of docs/settings.md."""
    flagged = [f for f in fields(Settings) if f.metadata["commands"]]
    by_command = ["## By command", ""]
    for command in COMMANDS:
        taken = exposed_by(command)
        flags = "every flag above" if taken == flagged else ", ".join(f"`{flag_of(f)}`" for f in taken)
        by_command.append(f"- `jaxplay {command}`: {flags}.")
    only_variables = ", ".join(f"`{env_variable(f)}`" for f in fields(Settings) if not f.metadata["commands"])
    by_command.append(f"- no command, the variable only: {only_variables} (`jaxplay worker --token` is the "
                      "worker's side of `JAXPLAY_WORKER_TOKEN`).")
    return "\n".join([INTRODUCTION, "## Every setting", "", table(list(fields(Settings)), with_commands=True),
                      *by_command, ""])


def fill_blocks(text: str) -> str:
    """``text`` with each settings block's rows written afresh; an unknown name is a ValueError naming it."""
    known = {f.name: f for f in fields(Settings)}

    def fill(block: re.Match[str]) -> str:
        names = block.group(2).split()
        unknown = [name for name in names if name not in known]
        if unknown:
            raise ValueError(f"a settings block names {', '.join(unknown)}, which jaxplay/settings.py does not "
                             f"define; name fields of Settings")
        return block.group(1) + table([known[name] for name in names], with_commands=False) + block.group(4)

    return BLOCK.sub(fill, text)


def expected_documents(root: Path = IMPORT_ROOT) -> dict[Path, str]:
    """Each generated document of the checkout at ``root``, as the generator writes it."""
    expected = {root / REFERENCE: reference()}
    for pattern in BLOCK_DOCUMENTS:
        for path in sorted(root.glob(pattern)):
            text = path.read_text()
            if BLOCK.search(text) and path != root / REFERENCE:
                expected[path] = fill_blocks(text)
    return expected


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog=GENERATOR, description=__doc__.split("\n\n")[0])
    parser.add_argument("--check", action="store_true", help="Write nothing; exit 1 naming each stale document.")
    parser.add_argument("--root", type=Path, default=IMPORT_ROOT, help="The checkout (default: this one).")
    args = parser.parse_args(argv)
    if not (args.root / "docs").is_dir():
        print(f"{args.root} is not a checkout of the playground (no docs/); pass --root", file=sys.stderr)
        return 2
    expected = expected_documents(args.root)
    stale = [path for path, text in expected.items() if not path.exists() or path.read_text() != text]
    for path in stale:
        if args.check:
            print(f"{path.relative_to(args.root)} is out of date: run {GENERATOR}", file=sys.stderr)
        else:
            path.write_text(expected[path])
            print(f"wrote {path.relative_to(args.root)}")
    return 1 if args.check and stale else 0


if __name__ == "__main__":
    sys.exit(main())
