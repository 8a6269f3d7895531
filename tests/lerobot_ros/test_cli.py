"""`lerobot-ros` dispatch: commands come from entry points; a broken one does not take down the others."""

from __future__ import annotations

import argparse
from importlib.metadata import EntryPoint

import pytest

from lerobot_ros import cli
from lerobot_ros.command import Command, CommandError


def _ok_command() -> Command:
    def add_arguments(parser: argparse.ArgumentParser) -> None:
        parser.add_argument("--fail", action="store_true")

    def run(args: argparse.Namespace) -> int:
        if args.fail:
            raise CommandError("the thing is wrong; do this instead")
        return 0

    return Command(name="ok", help="works", add_arguments=add_arguments, run=run)


def test_broken_entry_point_is_reported_and_skipped(monkeypatch, capsys):
    good = _ok_command()

    class FakeEntryPoint(EntryPoint):
        def load(self):  # type: ignore[override]
            if self.name == "broken":
                raise ImportError("No module named 'missing_dependency'")
            if self.name == "wrong":
                return object()
            return good

    eps = [FakeEntryPoint(name, f"pkg.{name}:COMMAND", "lerobot_ros.commands") for name in ["ok", "broken", "wrong"]]
    monkeypatch.setattr(cli, "entry_points", lambda group: eps)
    assert list(cli.load_commands()) == ["ok"]
    err = capsys.readouterr().err
    assert "command 'broken' unavailable" in err and "missing_dependency" in err
    assert "command 'wrong' unavailable" in err
    assert cli.main(["ok"]) == 0
    assert cli.main(["ok", "--fail"]) == 2
    assert capsys.readouterr().err.strip().endswith("lerobot-ros ok: error: the thing is wrong; do this instead")


def test_installed_commands_all_load(capsys):
    commands = cli.load_commands()
    assert capsys.readouterr().err == ""
    assert {"launch", "topic", "node", "dds"} <= set(commands)


def test_unknown_command_is_a_usage_error():
    with pytest.raises(SystemExit) as exc:
        cli.main(["no-such-command"])
    assert exc.value.code == 2
