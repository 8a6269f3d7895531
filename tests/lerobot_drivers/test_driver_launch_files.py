"""The launch files with fake_hardware:=true, run through `lerobot-ros launch`."""

import signal
from pathlib import Path

import pytest
from sensor_msgs.msg import JointState

from lerobot_drivers.arms.spec import JOINT_NAMES
from lerobot_ros.testing import venv_script, wait_for_messages

pytestmark = pytest.mark.ros

LAUNCH_DIR = Path(__file__).resolve().parents[2] / "ros_ws/src/lerobot_drivers/launch"


@pytest.mark.parametrize(
    ("launch_file", "args", "robot", "role"),
    [
        ("so101_follower.launch.yaml", [], "so101_follower", "follower"),
        ("arm.launch.yaml", ["robot:=koch_leader"], "koch_leader", "leader"),
    ],
)
def test_fake_hardware_launch_runs_the_driver_on_the_fake_bus(
    processes, ros_node, tmp_path, launch_file, args, robot, role
):
    launch = processes.start(
        [
            venv_script("lerobot-ros"), "launch", str(LAUNCH_DIR / launch_file), *args,
            "fake_hardware:=true", "namespace:=arm1", f"fake_dir:={tmp_path}", "loop_rate:=50.0",
        ],
        name="launch",
    )  # fmt: skip
    launch.wait_for_output(f"active \\({role}\\)", timeout=30)
    messages = wait_for_messages(ros_node, JointState, "/arm1/joint_states", count=10, timeout=20)
    assert tuple(messages[-1].name) == JOINT_NAMES
    launch.send_signal(signal.SIGINT)
    assert launch.wait(20) == 0
    if role == "follower":
        assert "torque released" in launch.output()
    assert not (tmp_path / f"arm1_{robot}.port").exists()
    assert (tmp_path / f"arm1_{robot}.json").exists()
