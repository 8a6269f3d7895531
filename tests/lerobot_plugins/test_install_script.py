"""scripts/install-lerobot-plugins.sh, the users' one command: what it refuses, in one line, before installing
anything (the install itself runs in `scripts/setup.sh --with-lerobot-plugins`, which calls it)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from plugin_stack import REPO

SCRIPT = REPO / "scripts" / "install-lerobot-plugins.sh"


def run(*args: str, pythonpath: Path | None = None) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    if pythonpath is not None:
        env["PYTHONPATH"] = str(pythonpath)
    command = ["bash", str(SCRIPT), *args]
    return subprocess.run(command, check=False, capture_output=True, text=True, env=env, timeout=120)


def fake_lerobot(tmp_path: Path, version: str) -> Path:
    """A folder whose only content is LeRobot's distribution metadata at `version` (what the script reads)."""
    info = tmp_path / f"lerobot-{version}.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: lerobot\nVersion: {version}\n")
    return tmp_path


@pytest.mark.parametrize(
    ("args", "code", "words"),
    [
        (["--bogus"], 2, "unknown option '--bogus'"),
        (["/nonexistent/python"], 1, "no python '/nonexistent/python'"),
        ([sys.executable], 1, "has no LeRobot; install LeRobot (0.6.x, or 0.4.x from 0.4.4)"),
    ],
)
def test_refusals_are_one_line(args: list[str], code: int, words: str) -> None:
    result = run(*args)
    assert result.returncode == code and result.stdout == ""
    assert result.stderr.count("\n") == 1 and words in result.stderr, result.stderr


@pytest.mark.parametrize("version", ["0.3.3", "0.4.3", "0.5.0", "0.7.0"])
def test_lerobot_outside_the_supported_range_is_refused(tmp_path: Path, version: str) -> None:
    result = run(sys.executable, pythonpath=fake_lerobot(tmp_path, version))
    assert result.returncode == 1 and result.stdout == "", result.stdout
    assert f"LeRobot {version} on Python" in result.stderr
    assert "the plugins are tested on LeRobot 0.6.x and 0.4.x from 0.4.4" in result.stderr
    assert result.stderr.count("\n") == 1


@pytest.mark.parametrize("version", ["0.4.4", "0.6.1", "0.6.9"])
def test_lerobot_in_the_supported_range_passes_the_check(tmp_path: Path, version: str) -> None:
    """A supported LeRobot passes the checks (--dry-run: the checks only, nothing installed)."""
    result = run("--dry-run", sys.executable, pythonpath=fake_lerobot(tmp_path, version))
    assert result.returncode == 0 and result.stderr == "", result.stderr
    assert f"==> LeRobot {version} in {sys.prefix}" in result.stdout and "dry run: nothing installed" in result.stdout


def test_help_names_the_options() -> None:
    result = run("--help")
    assert result.returncode == 0 and all(
        o in result.stdout for o in ("--editable", "--no-ros-wheels", "--dry-run", "PYTHON")
    )
