"""`lerobot-ros view` argument and start-up errors: one line, exit status 2, before anything touches ROS."""

from __future__ import annotations

import argparse
import re
from pathlib import Path

import pytest

from lerobot_recorder.view_command import VIEW
from lerobot_ros.command import CommandError

CONTRACT = Path(__file__).resolve().parents[3] / "config" / "contracts" / "so101_sim.yaml"


def run_view(*argv: str) -> None:
    parser = argparse.ArgumentParser(prog="lerobot-ros view")
    VIEW.add_arguments(parser)
    VIEW.run(parser.parse_args(list(argv)))


def test_no_viewer_available_names_the_alternatives(monkeypatch):
    monkeypatch.delenv("DISPLAY", raising=False)
    monkeypatch.delenv("WAYLAND_DISPLAY", raising=False)
    with pytest.raises(CommandError) as err:
        run_view(str(CONTRACT))
    message = str(err.value)
    assert err.value.exit_code == 2 and "\n" not in message
    assert message.startswith("cannot show the view: no display for a viewer window")
    assert "--save FILE.rrd" in message and "--web" in message and "--connect URL" in message


@pytest.mark.parametrize(
    ("argv", "pattern"),
    [
        (["--image-rate", "0"], r"--image-rate 0.0: give 0.1..120 pictures per second"),
        (["--jpeg-quality", "101"], r"--jpeg-quality 101: give 1..100, or 0 for raw pictures"),
        (["--duration", "-1"], r"--duration must be >= 0"),
        (["--save", "/nonexistent-folder/x.rrd"], r"folder /nonexistent-folder does not exist"),
    ],
)
def test_bad_options_are_one_line(argv, pattern):
    with pytest.raises(CommandError) as err:
        run_view(str(CONTRACT), *argv)
    assert re.search(pattern, str(err.value)), str(err.value)
    assert "\n" not in str(err.value)


def test_bad_contract_names_the_file(tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text("robot_type: x\nfps: 30\nfeatures: {}\n")
    with pytest.raises(CommandError) as err:
        run_view(str(bad), "--save", str(tmp_path / "x.rrd"))
    assert str(bad) in str(err.value)
    with pytest.raises(CommandError, match=r"missing\.yaml"):
        run_view(str(tmp_path / "missing.yaml"), "--save", str(tmp_path / "x.rrd"))
