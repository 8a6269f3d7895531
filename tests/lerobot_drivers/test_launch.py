"""so101_follower.launch.yaml with fake_hardware:=true, run through `lerobot-ros launch`."""

import signal
from pathlib import Path

import pytest
from sensor_msgs.msg import JointState

from lerobot_ros.testing import venv_script, wait_for_messages

pytestmark = pytest.mark.ros

LAUNCH_FILE = Path(__file__).resolve().parents[2] / "ros_ws/src/lerobot_drivers/launch/so101_follower.launch.yaml"


def test_fake_hardware_launch_runs_the_driver_on_the_fake_bus(processes, ros_node, tmp_path):
    launch = processes.start(
        [
            venv_script("lerobot-ros"),
            "launch",
            str(LAUNCH_FILE),
            "fake_hardware:=true",
            "namespace:=arm1",
            f"fake_dir:={tmp_path}",
            "loop_rate:=50.0",
        ],
        name="launch",
    )
    launch.wait_for_output("active \\(follower\\)", timeout=30)
    messages = wait_for_messages(ros_node, JointState, "/arm1/joint_states", count=10, timeout=20)
    assert list(messages[-1].name) == [
        "shoulder_pan",
        "shoulder_lift",
        "elbow_flex",
        "wrist_flex",
        "wrist_roll",
        "gripper",
    ]
    launch.send_signal(signal.SIGINT)
    assert launch.wait(20) == 0
    assert "torque released" in launch.output()
    assert not (tmp_path / "arm1_so101_follower.port").exists()
