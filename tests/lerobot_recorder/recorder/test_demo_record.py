"""`lerobot-ros demo record` (the README's main job) end to end: sim bridge + scripted expert + recorder."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
from recorder_helpers import REPO_ROOT

from lerobot_recorder.dataset import DatasetReader
from lerobot_ros.testing import venv_script

pytestmark = [pytest.mark.ros, pytest.mark.slow]


def test_demo_records_a_valid_dataset_and_prints_a_summary(ros_env: dict[str, str], tmp_path: Path) -> None:
    pytest.importorskip("mujoco", reason="the SO-101 simulation needs mujoco (scripts/setup.sh installs it)")
    root = tmp_path / "demo"
    run = subprocess.run(
        [venv_script("lerobot-ros"), "demo", "record", "--episodes", "1", "--root", str(root), "--timeout", "240"],
        env=ros_env,
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    assert f"OK: {root} is a valid LeRobot v3.0 dataset with 1 episodes" in run.stdout
    summary = json.loads(run.stdout[run.stdout.index("{") : run.stdout.rindex("}") + 1])
    assert summary["dataset"] == str(root) and summary["valid"] is True
    assert summary["features"] == ["observation.state", "action", "observation.images.front"]
    episode = summary["per_episode"][0]
    assert episode["saved"] and episode["frames"] == len(DatasetReader(root)) > 30
    assert set(episode["skew_max_s"]) == {"observation.state", "action", "observation.images.front"}
