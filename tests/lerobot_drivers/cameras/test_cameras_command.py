"""`lerobot-ros cameras find` (no camera on this machine: video files stand in for devices)."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import numpy as np

from lerobot_drivers.cameras.find import candidate_devices, find_cameras
from lerobot_ros.testing import venv_script


def _video(path: Path) -> Path:
    import cv2

    writer = cv2.VideoWriter(str(path), cv2.VideoWriter.fourcc(*"MJPG"), 15.0, (160, 120))
    for _ in range(3):
        writer.write(np.zeros((120, 160, 3), np.uint8))
    writer.release()
    return path


def test_find_lists_what_opens_with_its_mode_and_skips_the_rest(tmp_path: Path) -> None:
    video = _video(tmp_path / "cam.avi")
    cameras = find_cameras([str(tmp_path / "missing0"), str(video)])
    assert [c.device for c in cameras] == [str(video)]
    assert str(cameras[0].default_mode) == "160x120@15"
    assert candidate_devices(str(tmp_path / "video*")) == []
    for i in (10, 2):
        (tmp_path / f"video{i}").touch()
    assert candidate_devices(str(tmp_path / "video*")) == [str(tmp_path / "video2"), str(tmp_path / "video10")]


def test_command_prints_modes_json_and_a_clear_error(tmp_path: Path) -> None:
    video = _video(tmp_path / "cam.avi")
    cli = venv_script("lerobot-ros")
    out = subprocess.run([cli, "cameras", "find", str(video)], capture_output=True, text=True, check=True).stdout
    assert f"{video}\n  default: 160x120@15" in out
    listed = json.loads(
        subprocess.run(
            [cli, "cameras", "find", "--json", str(video)], capture_output=True, text=True, check=True
        ).stdout
    )
    assert listed[0]["default_mode"] == {"width": 160, "height": 120, "fps": 15.0, "fourcc": ""}
    failed = subprocess.run(
        [cli, "cameras", "find", str(tmp_path / "video7")], capture_output=True, text=True, check=False
    )
    assert failed.returncode != 0
    assert "no camera found" in failed.stderr and "video` group" in failed.stderr
