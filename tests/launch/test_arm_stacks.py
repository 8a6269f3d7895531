"""The real-arm launch stacks (so101, koch, so101_record) with fake_hardware:=true: the whole graph comes up."""

from __future__ import annotations

import signal
from pathlib import Path

import pytest

from lerobot_ros.testing import venv_script, wait_for_messages, wait_for_node

pytestmark = pytest.mark.ros

ROOT = Path(__file__).resolve().parents[2]
JOINTS = ("shoulder_pan", "shoulder_lift", "elbow_flex", "wrist_flex", "wrist_roll", "gripper")


@pytest.mark.parametrize("robot", ["so101", "koch"])
def test_fake_hardware_stack_publishes_arms_teleop_and_cameras(processes, ros_node, tmp_path, robot) -> None:
    from sensor_msgs.msg import CameraInfo, Image, JointState

    launch = processes.start(
        [venv_script("lerobot-ros"), "launch", str(ROOT / f"launch/{robot}.launch.yaml"), "fake_hardware:=true",
         f"fake_dir:={tmp_path}"],
        name="launch",
    )  # fmt: skip
    launch.wait_for_output(r"active \(follower\)", timeout=60)
    launch.wait_for_output(r"active \(leader\)", timeout=60)
    for role in ("follower", "leader"):
        (state,) = wait_for_messages(ros_node, JointState, f"/{role}/joint_states", timeout=30)
        assert tuple(state.name) == JOINTS
    # the teleop node forwards the (resting) leader to the follower
    (command,) = wait_for_messages(ros_node, JointState, "/follower/joint_commands", timeout=30)
    assert tuple(command.name) == JOINTS
    wait_for_node(ros_node, "/leader_teleop", timeout=30)
    for camera in ("front", "wrist"):
        wait_for_node(ros_node, f"/cameras/{camera}/camera", timeout=30)
        (image,) = wait_for_messages(ros_node, Image, f"/cameras/{camera}/image_raw", timeout=30)
        assert (image.encoding, image.width, image.height) == ("rgb8", 640, 480)
        (info,) = wait_for_messages(ros_node, CameraInfo, f"/cameras/{camera}/camera_info", timeout=30)
        assert info.width == 640
    assert f"{robot}_leader (/leader) -> {robot}_follower (/follower)" in launch.output()
    launch.send_signal(signal.SIGINT)
    assert launch.wait(30) == 0


def test_record_stack_records_an_episode_from_the_fake_arms(processes, ros_node, tmp_path) -> None:
    root = tmp_path / "dataset"
    launch = processes.start(
        [venv_script("lerobot-ros"), "launch", str(ROOT / "launch/so101_record.launch.yaml"), "fake_hardware:=true",
         f"fake_dir:={tmp_path / 'fake'}", f"root:={root}", "num_episodes:=1", "episode_time_s:=2.0",
         "reset_time_s:=0.5", "video:=false", "task:=pick the cube"],
        name="launch",
    )  # fmt: skip
    assert launch.wait(240) == 0, launch.output()[-3000:]
    assert (root / "meta" / "info.json").exists()
    from lerobot_dataset.meta import DatasetMeta

    meta = DatasetMeta.load(root)
    assert meta.total_episodes == 1 and meta.total_frames > 0
    assert {"observation.images.front", "observation.images.wrist", "action"} <= set(meta.user_features)
