"""One Settings definition feeds the environment, the CLI flags and the docs."""

from __future__ import annotations

from dataclasses import fields
from pathlib import Path

import pytest

import jaxplay
from jaxplay import settings as settings_module
from jaxplay.cli import commands as cli
from jaxplay.settings import COMMANDS, Settings, kind_of


def test_every_setting_has_help_a_default_and_commands_that_exist():
    for f in fields(Settings):
        assert f.metadata["help"].endswith("."), f.name
        assert f.default is not None, f.name
        assert set(f.metadata["commands"]) <= set(COMMANDS), f.name
        if f.metadata["choices"]:
            assert kind_of(f) == "str" and f.default in f.metadata["choices"], f.name


def test_environment_then_overrides():
    env = {"JAXPLAY_PORT": "9001", "JAXPLAY_DATA_DIR": "/srv/d", "JAXPLAY_RUN_TIMEOUT_S": "12.5"}
    settings = Settings.from_env(env, port=9002)
    assert settings.port == 9002 and settings.data_dir == Path("/srv/d") and settings.run_timeout_s == 12.5


def test_bad_environment_value_names_the_variable():
    with pytest.raises(ValueError, match="JAXPLAY_PORT"):
        Settings.from_env({"JAXPLAY_PORT": "eighty"})


def test_serve_exposes_every_flag_setting():
    parser = cli.build_parser()
    args = parser.parse_args(["serve", "--port", "1234", "--local-workers", "0", "--sandbox", "none"])
    settings = cli.settings_from(args)
    assert settings.port == 1234 and settings.local_workers == 0 and settings.sandbox == "none"
    serve_flags = {a.dest for a in parser._subparsers._group_actions[0].choices["serve"]._actions}
    for f in fields(Settings):
        if f.metadata["commands"]:
            assert f.name in serve_flags


def test_worker_requires_a_server_url():
    with pytest.raises(SystemExit):
        cli.build_parser().parse_args(["worker"])
    args = cli.build_parser().parse_args(["worker", "--server", "ws://h:1/worker", "--token", "t", "--cpu-devices", "4"])
    assert args.token == "t" and cli.settings_from(args).cpu_devices == 4


def test_sandbox_choice_is_checked():
    with pytest.raises(SystemExit):
        cli.build_parser().parse_args(["serve", "--sandbox", "docker"])
    with pytest.raises(SystemExit):
        cli.build_parser().parse_args(["worker", "--server", "ws://h:1/worker", "--gpu-slots", "each"])
    args = cli.build_parser().parse_args(["worker", "--server", "ws://h:1/worker", "--gpu-slots", "all"])
    assert cli.settings_from(args).gpu_slots == "all"


def test_data_dir_defaults_to_the_user_data_folder(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path))
    assert settings_module.user_dir("XDG_DATA_HOME", ".local/share") == tmp_path / "jaxplay"
    monkeypatch.delenv("XDG_DATA_HOME")
    assert settings_module.user_dir("XDG_DATA_HOME", ".local/share") == Path.home() / ".local" / "share" / "jaxplay"
    checkout = Path(__file__).resolve().parents[2]
    assert not Settings().data_dir.resolve().is_relative_to(checkout)


def test_version_flag_prints_the_package_version(capsys):
    with pytest.raises(SystemExit) as exited:
        cli.build_parser().parse_args(["--version"])
    assert exited.value.code == 0
    assert capsys.readouterr().out.strip() == f"jaxplay {jaxplay.__version__}"


def test_serve_refuses_a_data_dir_that_a_sandbox_could_read(tmp_path):
    from jaxplay.sandbox.isolation.bwrap import IMPORT_ROOT as PROJECT_ROOT

    # A folder inside one the sandbox binds (our own package); the checkout itself is not exposed.
    inside = Settings(data_dir=PROJECT_ROOT / "sandbox" / "data")
    problem = cli.data_dir_problem(inside)
    assert problem and "every sandbox can read" in problem and "--data-dir" in problem
    assert cli.data_dir_problem(Settings(data_dir=tmp_path / "data")) is None
    assert cli.data_dir_problem(inside.replace(sandbox="none")) is None  # nothing is sandboxed then
    assert not Settings().data_dir.resolve().is_relative_to(PROJECT_ROOT)  # the default is safe
