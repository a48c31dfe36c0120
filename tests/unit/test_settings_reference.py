"""docs/settings.md says what jaxplay/settings.py defines and what ``jaxplay <command> --help`` offers.

As datasette does for its own settings: a setting missing from the reference
fails, the checked-in reference (and each settings block in other docs) is
byte for byte what the generator writes, and each command's ``--help`` lists
exactly the settings the reference says it takes, with the same defaults,
variables and allowed values. The reference is read as a person reads it (a
markdown table) and ``--help`` as a person sees it (the command's output).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, fields
from pathlib import Path

import pytest

import jaxplay
from jaxplay import settings_doc
from jaxplay.cli import commands as cli
from jaxplay.settings import COMMANDS, Settings, env_variable

ROOT = jaxplay.IMPORT_ROOT
REFERENCE = ROOT / "docs" / "settings.md"
GENERATOR = "run `python -m jaxplay.settings_doc`"
# Read by the test harness, not by jaxplay: the docs name them for developers.
TEST_VARIABLES = {"JAXPLAY_TEST_RUNTIMES", "JAXPLAY_BROWSER_BASE_URL"}
# Files that set jaxplay's variables for a deployment.
DEPLOYMENT_FILES = [*sorted((ROOT / "deploy").rglob("*.yaml")), ROOT / "docker-compose.yml", ROOT / "Dockerfile"]
# argparse writes an option, then two spaces or a new line, then its help.
HELP_ENTRY = re.compile(r"(?P<flag>--[a-z0-9-]+)(?: (?P<metavar>\S+))?(?: {2,}|\n)(?P<help>.*) "
                        r"\(default: (?P<default>.*); env (?P<variable>JAXPLAY_[A-Z0-9_]+)\)", re.S)


@dataclass(frozen=True)
class Row:
    flag: str
    default: str
    commands: tuple[str, ...]
    help: str
    choices: tuple[str, ...]


def unquote(cell: str) -> str:
    return cell.strip().strip("`").replace("\\|", "|")


def reference_rows() -> dict[str, Row]:
    """The reference's table of every setting, by environment variable."""
    text = REFERENCE.read_text()
    table = text.split("## Every setting", 1)[1].split("\n## ", 1)[0]
    rows: dict[str, Row] = {}
    for line in table.splitlines():
        cells = re.split(r"(?<!\\)\|", line)[1:-1]
        if len(cells) != 5 or cells[0].strip() in ("Flag", "---"):
            continue
        flag, variable, default, commands, what = cells
        allowed = re.search(r" One of ((?:`[^`]+`(?:, )?)+)\.$", what.strip())
        choices = tuple(re.findall(r"`([^`]+)`", allowed.group(1))) if allowed else ()
        help_text = what.strip()[:allowed.start()] if allowed else what.strip()
        named = tuple(c.strip() for c in commands.split(",") if c.strip() in COMMANDS)
        rows[unquote(variable)] = Row(unquote(flag), unquote(default), named, unquote(help_text), choices)
    return rows


def help_entries(argv: list[str], capsys: pytest.CaptureFixture[str],
                 monkeypatch: pytest.MonkeyPatch) -> dict[str, Row]:
    """The settings ``jaxplay <argv> --help`` prints, by environment variable (the command's own flags name none)."""
    monkeypatch.setenv("COLUMNS", "2000")  # one line per help text, as argparse wraps to the terminal
    with pytest.raises(SystemExit) as exited:
        cli.main([*argv, "--help"])
    assert exited.value.code == 0
    options = capsys.readouterr().out.split("\noptions:\n", 1)[1]
    entries = re.split(r"\n  (?=-)", "\n" + options)
    found: dict[str, Row] = {}
    for entry in entries:
        match = HELP_ENTRY.fullmatch(entry.strip())
        if match is None:
            continue
        metavar = match["metavar"] or ""
        choices = tuple(metavar[1:-1].split(",")) if metavar.startswith("{") else ()
        found[match["variable"]] = Row(match["flag"], match["default"], (), " ".join(match["help"].split()), choices)
    return found


def test_every_setting_has_a_row_in_the_reference():
    rows = reference_rows()
    defined = {env_variable(f) for f in fields(Settings)}
    missing = sorted(defined - set(rows))
    assert not missing, f"docs/settings.md has no row for {', '.join(missing)}: {GENERATOR}"
    unknown = sorted(set(rows) - defined)
    assert not unknown, f"docs/settings.md lists {', '.join(unknown)}, which jaxplay/settings.py does not define"


def test_the_reference_and_the_settings_blocks_are_what_the_generator_writes():
    expected = settings_doc.expected_documents()
    assert ROOT / "docs" / "operations.md" in expected  # its proxy and budget table is a block
    for path, text in expected.items():
        assert path.read_text() == text, f"{path.relative_to(ROOT)} is out of date: {GENERATOR}"


@pytest.mark.parametrize("argv", [["serve"], ["worker"], ["purge-results"], ["runtimes", "add"],
                                  ["runtimes", "remove"], ["runtimes", "list"], ["backup"], ["restore"],
                                  ["storage", "copy"]], ids=" ".join)
def test_help_lists_the_settings_the_reference_says_the_command_takes(argv, capsys, monkeypatch):
    rows = reference_rows()
    said = {variable: row for variable, row in rows.items() if argv[0] in row.commands}
    shown = help_entries(argv, capsys, monkeypatch)
    assert said, f"the reference gives `jaxplay {argv[0]}` no settings"
    assert sorted(shown) == sorted(said), f"`jaxplay {' '.join(argv)} --help` and docs/settings.md disagree"
    for variable, row in said.items():
        # The same flag, default, sentence and allowed values; the reference also names the commands.
        assert shown[variable] == Row(row.flag, row.default, (), " ".join(row.help.split()), row.choices), variable


def test_the_reference_holds_no_path_of_the_machine_that_wrote_it():
    home = str(Path.home())
    for f in fields(Settings):
        if isinstance(f.default, Path) and f.default.is_relative_to(home):
            assert f.metadata["shown_default"], f"{f.name}'s default is under {home}: give it a shown_default"
    assert home not in REFERENCE.read_text()


def test_every_variable_a_deployment_or_a_doc_names_is_a_setting():
    defined = {env_variable(f) for f in fields(Settings)}
    documents = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
    assert (ROOT / "deploy" / "kubernetes" / "base" / "server-deployment.yaml") in DEPLOYMENT_FILES
    for path in [*DEPLOYMENT_FILES, *documents]:
        named = set(re.findall(r"\bJAXPLAY_[A-Z0-9_]*[A-Z0-9]\b", path.read_text()))
        unknown = sorted(named - defined - TEST_VARIABLES)
        assert not unknown, f"{path.relative_to(ROOT)} names {', '.join(unknown)}, which is no setting"


def test_a_settings_block_naming_no_setting_is_refused():
    with pytest.raises(ValueError, match="port_number"):
        settings_doc.fill_blocks("<!-- settings: port port_number -->\n<!-- /settings -->\n")


def test_the_generator_rewrites_a_stale_reference_and_check_names_it(tmp_path, capsys):
    docs = tmp_path / "docs"
    docs.mkdir()
    reference = REFERENCE.read_text()
    assert "| `--port` |" in reference
    (docs / "settings.md").write_text("\n".join(line for line in reference.splitlines(keepends=False)
                                                if not line.startswith("| `--port` |")) + "\n")
    (docs / "operations.md").write_text("Proxies:\n\n<!-- settings: trusted_proxies -->\n<!-- /settings -->\n")
    assert settings_doc.main(["--check", "--root", str(tmp_path)]) == 1
    stale = capsys.readouterr().err
    assert "docs/settings.md is out of date" in stale and "docs/operations.md is out of date" in stale
    assert settings_doc.main(["--root", str(tmp_path)]) == 0
    assert (docs / "settings.md").read_text() == reference
    assert "| `--trusted-proxies` | `JAXPLAY_TRUSTED_PROXIES` | empty |" in (docs / "operations.md").read_text()
    assert settings_doc.main(["--check", "--root", str(tmp_path)]) == 0
