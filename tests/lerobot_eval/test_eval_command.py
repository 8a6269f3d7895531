"""`lerobot-ros eval` against the sim bridge in lockstep (scripted policy, a few short episodes)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.ros


def test_eval_reports_episodes_chunks_and_writes_a_video(tmp_path, ros_env):
    out = tmp_path / "eval"
    argv = [str(Path(sys.executable).parent / "lerobot-ros"), "eval", "scripted:amplitude=5,horizon=10",
            "--episodes", "2", "--max-steps", "15", "--videos", "1", "--output-dir", str(out)]  # fmt: skip
    result = subprocess.run(argv, env=ros_env, capture_output=True, text=True, timeout=240, check=False)
    assert result.returncode == 0, result.stdout + result.stderr
    report = json.loads((out / "eval.json").read_text())
    assert report["episodes"] == 2 and [e["steps"] for e in report["per_episode"]] == [15, 15]
    assert 0.0 <= report["success_rate"] <= 1.0 and len(report["returns"]) == 2
    # 10-step chunks re-planned when 5 steps are left: at steps 0, 4, 8 and 12 of each episode, all accepted.
    assert report["chunks"]["accepted"] == 8 and report["chunks"]["rejected"] == 0
    assert report["videos"] == [str(out / "episode_000.mp4")] and (out / "episode_000.mp4").stat().st_size > 0
    assert "success rate" in result.stdout


def test_eval_rejects_bad_arguments(ros_env):
    argv = [str(Path(sys.executable).parent / "lerobot-ros"), "eval", "scripted", "--episodes", "0"]
    result = subprocess.run(argv, env=ros_env, capture_output=True, text=True, timeout=60, check=False)
    assert result.returncode != 0 and "--episodes" in (result.stdout + result.stderr)
