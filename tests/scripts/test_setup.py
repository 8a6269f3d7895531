"""The setup script is a re-run-safe no-op when nothing changed, and fails loudly with the step."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def run(argv: list[str], **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        argv, cwd=REPO, env={**os.environ, **env}, capture_output=True, text=True, timeout=600, check=False
    )


def test_second_setup_run_skips_every_install_step() -> None:
    # The suite runs after scripts/setup.sh (scripts/test.sh), so this is at least the second run.
    result = run(["bash", "scripts/setup.sh"])
    assert result.returncode == 0, result.stderr
    steps = [line for line in result.stdout.splitlines() if line.startswith("==> ")]
    assert len(steps) >= 7
    for step in ["python dependencies", "build lerobot_msgs", "project packages"]:
        index = next(i for i, line in enumerate(result.stdout.splitlines()) if step in line)
        assert result.stdout.splitlines()[index + 1].strip() == "up to date", f"{step} was not skipped"


def test_setup_failure_names_the_step(tmp_path: Path) -> None:
    result = run(
        ["bash", "scripts/setup.sh"], LEROBOT_ROS_VENV=str(tmp_path / "venv"), PYTHON="/nonexistent/python3.11"
    )
    assert result.returncode != 0
    assert "setup failed at step 'virtualenv'" in result.stderr
    assert "PYTHON=" in result.stderr  # says how to fix it


def test_an_unsupported_python_is_refused_in_one_line_naming_the_supported_ones(tmp_path: Path) -> None:
    fake = tmp_path / "python3.10"
    fake.write_text("#!/bin/sh\necho 3.10\n")
    fake.chmod(0o755)
    result = run(["bash", "scripts/setup.sh"], LEROBOT_ROS_VENV=str(tmp_path / "venv"), PYTHON=str(fake))
    assert result.returncode != 0
    refusal = [line for line in result.stderr.splitlines() if line.startswith("setup failed at step 'virtualenv'")]
    assert len(refusal) == 1, result.stderr
    assert "is Python 3.10" in refusal[0] and "supports Python 3.12 or 3.11" in refusal[0]
    assert not (tmp_path / "venv").exists()


def test_cli_wrapper_without_venv_is_a_one_line_error(tmp_path: Path) -> None:
    result = run(["scripts/lerobot-ros", "--help"], LEROBOT_ROS_VENV=str(tmp_path / "missing"))
    assert result.returncode == 2
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1
    assert "no virtualenv" in lines[0] and "make setup" in lines[0]


def test_lint_without_venv_is_a_one_line_error(tmp_path: Path) -> None:
    result = run(["bash", "scripts/lint.sh"], LEROBOT_ROS_VENV=str(tmp_path / "missing"))
    assert result.returncode != 0
    assert result.stderr.strip().count("\n") == 0 and "make setup" in result.stderr
