"""The robot plugin's commands in every action message type a contract can read (`ActionCommand`), the
ros2_control-arm and mobile-base presets, and the mobile-base preset driving a base on a real DDS graph."""

from __future__ import annotations

import threading
import time
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import yaml
from plugin_stack import REPO

from lerobot_contract import Contract, ContractError, load_contract
from lerobot_robot_ros.command import ActionCommand, nested_values
from lerobot_robot_ros.core import ContractRobot

STAMP_NS = 1_700_000_123_456_789_000
JOINTS = ["joint_1", "joint_2", "joint_3", "joint_4", "joint_5", "joint_6"]


def action_contract(action: dict[str, Any], fps: int = 30) -> Contract:
    return Contract.from_dict(
        {
            "robot_type": "t",
            "fps": fps,
            "features": {
                "observation.state": {"topic": "/joint_states", "type": "sensor_msgs/msg/JointState", "joints": JOINTS},
                "action": action,
            },
        },
        "test.yaml",
    )


def test_nested_values_follow_the_paths() -> None:
    assert nested_values([("points.0.positions", [1.0]), ("joint_names", ["a"])]) == {
        "points": [{"positions": [1.0]}],
        "joint_names": ["a"],
    }
    assert nested_values([("linear.x", 1.0), ("angular.z", 2.0), ("linear.y", 3.0)]) == {
        "linear": {"x": 1.0, "y": 3.0},
        "angular": {"z": 2.0},
    }
    assert nested_values([("poses.1.position.x", 5.0)]) == {"poses": [{}, {"position": {"x": 5.0}}]}


ACTIONS: dict[str, dict[str, Any]] = {
    "joint_state": {"topic": "/cmd", "type": "sensor_msgs/msg/JointState", "joints": JOINTS[::-1]},
    "trajectory": {
        "topic": "/arm_controller/joint_trajectory",
        "type": "trajectory_msgs/msg/JointTrajectory",
        "field": "points.0.positions",
        "joint_names_field": "joint_names",
        "joints": JOINTS,
    },
    "forward": {"topic": "/fwd/commands", "type": "std_msgs/msg/Float64MultiArray", "field": "data", "names": JOINTS},
    "twist": {
        "topic": "/cmd_vel",
        "type": "geometry_msgs/msg/Twist",
        "field": ["linear.x", "linear.y", "angular.z"],
        "names": ["x.vel", "y.vel", "theta.vel"],
    },
    "twist_stamped": {
        "topic": "/cmd_vel",
        "type": "geometry_msgs/msg/TwistStamped",
        "field": ["twist.linear.x", "twist.angular.z"],
        "names": ["x.vel", "theta.vel"],
    },
    "scalar_and_array": {  # a scalar takes one value, the array the rest
        "topic": "/battery",
        "type": "sensor_msgs/msg/BatteryState",
        "field": ["voltage", "cell_voltage"],
        "names": ["voltage", "cell_1", "cell_2"],
    },
}


@pytest.mark.parametrize("kind", sorted(ACTIONS))
def test_command_reads_back_as_the_values_it_was_given(kind: str) -> None:
    """What the contract reads from the message the command builds is what was sent, in every action type."""
    feature = action_contract(ACTIONS[kind]).features["action"]
    command = ActionCommand(feature, fps=30)
    values = np.arange(1, feature.size + 1, dtype=np.float64) * 0.25
    msg = command.message(values, STAMP_NS)
    assert type(msg).__name__ == feature.type.rsplit("/", 1)[1]
    np.testing.assert_array_equal(feature.raw_vector(msg), values)


def test_trajectory_point_is_reached_one_period_after_it_arrives() -> None:
    feature = action_contract(ACTIONS["trajectory"], fps=50).features["action"]
    msg = ActionCommand(feature, fps=50).message(np.zeros(6), STAMP_NS)
    assert len(msg.points) == 1 and list(msg.joint_names) == JOINTS
    assert (msg.points[0].time_from_start.sec, msg.points[0].time_from_start.nanosec) == (0, 20_000_000)
    assert (msg.header.stamp.sec, msg.header.stamp.nanosec) == (0, 0), "zero: the controller starts it on receipt"


def test_stamped_messages_carry_the_stamp() -> None:
    for kind in ("joint_state", "twist_stamped"):
        feature = action_contract(ACTIONS[kind]).features["action"]
        msg = ActionCommand(feature, fps=30).message(np.zeros(feature.size), STAMP_NS)
        assert msg.header.stamp.sec * 1_000_000_000 + msg.header.stamp.nanosec == STAMP_NS


@pytest.mark.parametrize(
    ("action", "words"),
    [
        ({"type": "geometry_msgs/msg/Twist", "field": ["linear.x", "angular.w"], "names": ["a", "b"]}, "'w'"),
        ({"type": "geometry_msgs/msg/Twist", "field": ["linear.x"], "names": ["a", "b"]}, "1 scalar field(s) for 2"),
        ({"type": "nope_msgs/msg/Nothing", "field": "data", "names": ["a"]}, "nope_msgs"),
        ({"type": "sensor_msgs/msg/JointState", "field": ["position", "velocity"], "names": ["a", "b"]}, "one of"),
    ],
)
def test_action_that_cannot_be_written_is_one_line(action: dict[str, Any], words: str) -> None:
    feature = action_contract({"topic": "/a", **action}).features["action"]
    with pytest.raises(ContractError) as err:
        ActionCommand(feature, fps=30)
    assert "\n" not in str(err.value) and words in str(err.value) and "features.action" in str(err.value)


def test_presets_for_ros2_control_arms_and_mobile_bases() -> None:
    arm = ContractRobot("ros2_control_arm")
    assert arm.features.action_features == dict.fromkeys(JOINTS, float)
    assert arm.features.cameras == {"front": "observation.images.front"}
    assert arm.contract.features["action"].type == "trajectory_msgs/msg/JointTrajectory"
    base = ContractRobot("mobile_base")
    assert base.features.action_features == dict.fromkeys(["x.vel", "y.vel", "theta.vel"], float)
    assert {"x.pos", "y.pos", "theta.vel", "front"} <= set(base.features.observation_features)
    for robot in (arm, base):  # each preset's action is one the robot can write
        ActionCommand(robot.contract.features["action"], robot.contract.fps)


class FakeBase:
    """A mobile base stand-in: integrates the newest /cmd_vel into /odom at 50 Hz (a unicycle model)."""

    def __init__(self, node: Any) -> None:
        from geometry_msgs.msg import Twist
        from nav_msgs.msg import Odometry
        from rclpy.qos import QoSProfile, ReliabilityPolicy

        self._node, self._lock = node, threading.Lock()
        self.x = self.y = self.theta = 0.0
        self.cmd = Twist()
        best_effort = QoSProfile(depth=10, reliability=ReliabilityPolicy.BEST_EFFORT)
        self._odom = node.create_publisher(Odometry, "/odom", best_effort)
        node.create_subscription(Twist, "/cmd_vel", self._on_cmd, 10)
        self._timer = node.create_timer(0.02, self._tick)

    def _on_cmd(self, msg: Any) -> None:
        with self._lock:
            self.cmd = msg

    def _tick(self) -> None:
        from nav_msgs.msg import Odometry

        with self._lock:
            vx, vy, wz = self.cmd.linear.x, self.cmd.linear.y, self.cmd.angular.z
            self.x += 0.02 * (vx * np.cos(self.theta) - vy * np.sin(self.theta))
            self.y += 0.02 * (vx * np.sin(self.theta) + vy * np.cos(self.theta))
            self.theta += 0.02 * wz
            msg = Odometry()
            msg.header.stamp = self._node.get_clock().now().to_msg()
            msg.pose.pose.position.x, msg.pose.pose.position.y = self.x, self.y
            msg.pose.pose.orientation.z, msg.pose.pose.orientation.w = np.sin(self.theta / 2), np.cos(self.theta / 2)
            msg.twist.twist.linear.x, msg.twist.twist.linear.y, msg.twist.twist.angular.z = vx, vy, wz
        self._odom.publish(msg)


@pytest.mark.ros
def test_mobile_base_preset_drives_a_base(ros_node, tmp_path: Path) -> None:
    """The mobile_base preset (cut to odometry and velocity) against a base on /odom and /cmd_vel: the Twist it
    sends moves the base, and the odometry it reads shows the motion."""
    data = yaml.safe_load((REPO / "config/contracts/mobile_base.yaml").read_text())
    del data["features"]["observation.images.front"]
    contract_file = tmp_path / "base.yaml"
    contract_file.write_text(yaml.safe_dump(data, sort_keys=False))
    assert load_contract(contract_file).features["action"].type == "geometry_msgs/msg/Twist"
    base = FakeBase(ros_node)
    robot = ContractRobot(contract_file, connect_timeout_s=60.0)
    robot.connect()
    try:
        start = robot.get_observation()
        deadline = time.monotonic() + 60.0
        while time.monotonic() < deadline:
            sent = robot.send_action({"x.vel": 0.5, "y.vel": 0.0, "theta.vel": 0.2})
            now = robot.get_observation()
            if now["x.pos"] - start["x.pos"] > 0.2 and now["theta.vel"] == pytest.approx(0.2):
                break
            time.sleep(1 / 30)
        assert sent == {"x.vel": 0.5, "y.vel": 0.0, "theta.vel": 0.2}
        assert now["x.vel"] == pytest.approx(0.5) and now["theta.vel"] == pytest.approx(0.2), now
        assert now["x.pos"] - start["x.pos"] > 0.2, f"the base did not move: {start} -> {now}"
        robot.send_action({"x.vel": 0.0, "y.vel": 0.0, "theta.vel": 0.0})
        deadline = time.monotonic() + 30.0
        while base.cmd.linear.x != 0.0 and time.monotonic() < deadline:
            time.sleep(0.05)
        assert base.cmd.linear.x == 0.0 and base.cmd.angular.z == 0.0, "the stop command did not arrive"
    finally:
        robot.disconnect()
