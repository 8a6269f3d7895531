"""launch/policy.launch.yaml and launch/sim_policy.launch.yaml through `lerobot-ros launch`."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from lerobot_ros.testing import venv_script

REPO = Path(__file__).resolve().parents[2]


def test_policy_launch_resolves_both_nodes_in_the_namespace(processes):
    launcher = processes.start(
        [
            venv_script("lerobot-ros"),
            "launch",
            "--print",
            "lerobot_policy_node",
            "policy.launch.yaml",
            "checkpoint:=scripted",
            f"robot_config:={REPO / 'config/robots/so101.yaml'}",
            "namespace:=arm2",
            "output:=forward_position",
        ]
    )
    assert launcher.wait(timeout=60) == 0, launcher.output()
    output = launcher.output()
    assert "/policy_node --ros-args" in output and "/action_executor --ros-args" in output
    assert "__ns:=/arm2" in output and "output: forward_position" in output and "checkpoint: scripted" in output
    assert "robot_config: " in output and "so101.yaml" in output


def test_policy_launch_requires_the_robot_config(processes):
    """Issue 18 item 6: the executor gets no joints or limits by default; the launch names what is missing."""
    launcher = processes.start(
        [venv_script("lerobot-ros"), "launch", "--print", "lerobot_policy_node", "policy.launch.yaml",
         "checkpoint:=scripted"]
    )  # fmt: skip
    assert launcher.wait(timeout=60) != 0
    assert "robot_config" in launcher.output()


def test_sim_policy_launch_includes_the_bridge(processes):
    launcher = processes.start(
        [
            venv_script("lerobot-ros"),
            "launch",
            "--print",
            str(REPO / "launch/sim_policy.launch.yaml"),
            "checkpoint:=scripted:delay=0.1",
            "cameras:=front:64x48",
        ]
    )
    assert launcher.wait(timeout=60) == 0, launcher.output()
    output = launcher.output()
    assert "/sim_bridge --ros-args" in output and "/policy_node --ros-args" in output
    assert "so101_sim.yaml" in output and "checkpoint: scripted:delay=0.1" in output
    assert "config/robots/so101_sim.yaml" in output  # the executor's joints and limits


def launch_fake_follower(processes: Any, tmp_path: Path) -> Path:
    """Launch the fake-hardware SO-101 follower (so101_follower.launch.yaml) with a default calibration.

    Returns the robot configuration that names that calibration: the executor's joints and limits come from
    the arm driver's section of it.
    """
    import yaml

    from lerobot_drivers.arms import get_arm
    from lerobot_drivers.arms.arm import default_fake_calibration
    from lerobot_drivers.motors.calibration import save_calibration

    calibration = tmp_path / "follower.json"
    save_calibration(calibration, default_fake_calibration(get_arm("so101_follower")))
    robot_config = tmp_path / "robot.yaml"
    robot_config.write_text(yaml.safe_dump({"/follower/arm_driver": {"ros__parameters": {
        "robot_type": "so101_follower", "calibration_file": str(calibration)}}}))  # fmt: skip
    processes.start(
        [venv_script("lerobot-ros"), "launch", "--log-dir", str(tmp_path / "arm_logs"), "lerobot_drivers",
         "so101_follower.launch.yaml", "fake_hardware:=true", f"fake_dir:={tmp_path}", f"calibration:={calibration}"],
        name="arm",
    )  # fmt: skip
    return robot_config


@pytest.mark.ros
def test_policy_launch_drives_the_fake_arm(processes, ros_node, tmp_path):
    from trajectory_msgs.msg import JointTrajectory

    from lerobot_ros.testing import wait_for_messages

    robot_config = launch_fake_follower(processes, tmp_path)
    processes.start(
        [venv_script("lerobot-ros"), "launch", "--log-dir", str(tmp_path / "policy_logs"), "lerobot_policy_node",
         "policy.launch.yaml", "checkpoint:=scripted:delay=0.05", f"contract:={REPO / 'config/contracts/so101.yaml'}",
         f"robot_config:={robot_config}", "max_observation_age:=1.0"],
        name="policy",
    )  # fmt: skip
    messages = wait_for_messages(ros_node, JointTrajectory, "/follower/joint_trajectory", count=3, timeout=120)
    assert all(len(m.points) > 1 and len(m.joint_names) == 6 for m in messages)


@pytest.mark.ros
def test_sim_policy_launch_moves_the_simulated_arm(processes, ros_node, tmp_path):
    import threading
    import time

    import numpy as np
    from sensor_msgs.msg import JointState

    lock = threading.Lock()
    positions: list[list[float]] = []

    def on_state(msg) -> None:
        with lock:
            positions.append(list(msg.position))

    ros_node.create_subscription(JointState, "/follower/joint_states", on_state, 50)
    processes.start(
        [venv_script("lerobot-ros"), "launch", "--log-dir", str(tmp_path / "logs"),
         str(REPO / "launch/sim_policy.launch.yaml"), "checkpoint:=scripted:delay=0.1,amplitude=10", "cameras:="],
        name="sim_policy",
    )  # fmt: skip
    deadline = time.monotonic() + 120
    swing = np.zeros(6)
    while time.monotonic() < deadline:
        with lock:
            recent = np.array(positions[-90:]) if len(positions) > 90 else None
        if recent is not None:
            swing = np.ptp(recent, axis=0)
            if swing.min() > np.radians(3):  # every joint follows the policy's sine (10 degrees)
                break
        time.sleep(0.5)
    assert swing.min() > np.radians(3), f"the simulated arm did not follow the policy: swing {swing} rad"


def _node_parameters(node: Any) -> dict[str, Any]:
    from lerobot_ros.launch.description import InlineParameters

    values: dict[str, Any] = {}
    for source in node.parameters:
        if isinstance(source, InlineParameters):
            values.update(source.values)
    return values


@pytest.mark.parametrize(
    "arguments", [{"checkpoint": "scripted"}, {"checkpoint": "outputs/act", "mode": "fast", "use_sim_time": "true"}]
)
def test_sim_policy_stack_publishes_the_action_topic_of_its_contract(arguments: dict[str, str]) -> None:
    """The executor's output is the contract's action topic, so a recording or `lerobot-ros view` of the run finds
    the action (with `joint_trajectory`, the default before, the view showed the action as MISSING)."""
    from lerobot_contract import Contract
    from lerobot_policy_node.nodes.executor_node import DEFAULT_TOPICS
    from lerobot_ros.launch.packages import PackageIndex
    from lerobot_ros.launch.parser import plan_launch

    index = PackageIndex()
    plan = plan_launch(
        REPO / "launch/sim_policy.launch.yaml",
        arguments,
        package_share=index.package_share,
        package_prefix=index.package_prefix,
        find_executable=index.executable,
    )
    nodes = {p.node.executable: p.node for p in plan.processes if p.node is not None}
    contract = Contract.load(_node_parameters(nodes["policy_node"])["contract"])
    executor = nodes["action_executor"]
    parameters = _node_parameters(executor)
    topic = parameters.get("output_topic") or DEFAULT_TOPICS[parameters["output"]]
    if not topic.startswith("/"):
        topic = f"{(executor.namespace or '').rstrip('/')}/{topic}"
    topic = dict(executor.remappings).get(topic, topic)
    assert topic == contract.features["action"].topic == "/follower/joint_commands"
