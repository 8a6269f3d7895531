"""The ROS robot of LeRobot's robot plugin (`lerobot_robot_ros.core.ContractRobot`) against the fake-hardware
SO-101 follower, in the project's own venv (no LeRobot needed): features from the contract, observations by the
recorder's alignment rule, actions through the executor's limits to the follower, one-line errors."""

from __future__ import annotations

import time
from pathlib import Path

import numpy as np
import pytest
import yaml
from plugin_stack import REPO, StampedHistory, arm_contract, launch_fake_follower

from lerobot_contract import ContractError, load_contract
from lerobot_robot_ros.core import ContractRobot
from lerobot_robot_ros.link import RosLinkError

NAMES = ["shoulder_pan.pos", "shoulder_lift.pos", "elbow_flex.pos", "wrist_flex.pos", "wrist_roll.pos", "gripper.pos"]


def test_features_are_the_contracts() -> None:
    robot = ContractRobot("so101")
    assert robot.features.observation_features == {**dict.fromkeys(NAMES, float), "front": (480, 640, 3),
                                                   "wrist": (480, 640, 3)}  # fmt: skip
    assert robot.features.action_features == dict.fromkeys(NAMES, float)
    sim = ContractRobot("so101_sim")
    assert sim.features.observation_features["block.x"] is float and sim.features.cameras == {
        "front": "observation.images.front"
    }


def test_bad_contract_is_one_line(tmp_path: Path) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text((REPO / "config/contracts/so101.yaml").read_text().replace("fps: 30", "fps: -3"))
    for spec, words in ((str(bad), "fps"), (str(tmp_path / "none.yaml"), "no such file"), ("so999", "no such file")):
        with pytest.raises(ContractError) as err:
            ContractRobot(spec)
        assert "\n" not in str(err.value) and words in str(err.value)


@pytest.mark.ros
def test_missing_topic_at_connect_is_one_line(ros_domain: int, tmp_path: Path) -> None:
    robot = ContractRobot(arm_contract(tmp_path, observation_state="/nobody/joint_states"), connect_timeout_s=1.0)
    with pytest.raises(RosLinkError) as err:
        robot.connect()
    message = str(err.value)
    assert "\n" not in message and "/nobody/joint_states (observation.state)" in message
    assert not robot.is_connected


def as_trajectory_action(contract_file: Path) -> None:
    """The contract's action as a JointTrajectory on the follower's joint_trajectory topic (what ros2_control's
    JointTrajectoryController takes, and the arm driver too)."""
    data = yaml.safe_load(contract_file.read_text())
    data["features"]["action"].update(
        topic="/follower/joint_trajectory",
        type="trajectory_msgs/msg/JointTrajectory",
        field="points.0.positions",
        joint_names_field="joint_names",
    )
    contract_file.write_text(yaml.safe_dump(data, sort_keys=False))


@pytest.mark.ros
@pytest.mark.parametrize("command", ["joint_commands", "joint_trajectory"])
def test_observations_follow_the_alignment_rule_and_actions_move_the_follower(
    processes, ros_node, tmp_path, command: str
) -> None:
    import rclpy
    from sensor_msgs.msg import JointState

    robot_config = launch_fake_follower(processes, tmp_path)
    contract_file = arm_contract(tmp_path)
    if command == "joint_trajectory":
        as_trajectory_action(contract_file)
    state = load_contract(contract_file).features["observation.state"]
    history = StampedHistory(ros_node, JointState, "/follower/joint_states")
    deadline = time.monotonic() + 120
    while not history.stamps():  # the probe sees the stream before the robot's first frame
        assert time.monotonic() < deadline, "the fake follower published no joint state within 120 s"
        time.sleep(0.1)
    robot = ContractRobot(contract_file, robot_config=robot_config, connect_timeout_s=120.0)
    robot.connect()
    try:
        assert not rclpy.ok(), "the robot must not initialise the caller's default rclpy context"
        # Each observation is the recorder's frame for its time: the newest joint state stamped at or before it.
        for _ in range(5):
            observation = robot.get_observation()
            t_ns = robot.last_observation_time_ns
            assert t_ns is not None
            time.sleep(0.3)  # the probe has by now every sample stamped up to t
            expected = history.newest_at_or_before(t_ns)
            assert expected is not None, f"the probe saw no joint state stamped before {t_ns}"
            np.testing.assert_allclose([observation[n] for n in NAMES], state.vector(expected), atol=1e-4)
        start = np.array([observation[n] for n in NAMES])
        target = start.copy()
        target[0] += 40.0 if start[0] < 0 else -40.0  # degrees of shoulder_pan
        # The executor's velocity limit (3 rad/s) lets one command move at most 2 ticks' worth (~11.5 deg).
        sent = robot.send_action(dict(zip(NAMES, target, strict=True)))
        assert 0 < abs(sent[NAMES[0]] - start[0]) < 20.0, sent
        deadline = time.monotonic() + 60.0
        while time.monotonic() < deadline:
            robot.send_action(dict(zip(NAMES, target, strict=True)))
            now = robot.get_observation()
            if abs(now[NAMES[0]] - target[0]) < 2.0:
                break
            time.sleep(1 / 30)
        assert abs(now[NAMES[0]] - target[0]) < 2.0, f"the follower did not reach {target[0]:.1f}: {now[NAMES[0]]}"
    finally:
        robot.disconnect()
    assert not robot.is_connected and not rclpy.ok()
    with pytest.raises(RosLinkError, match="not connected"):
        robot.get_observation()


@pytest.mark.ros
@pytest.mark.slow
def test_sim_preset_reads_camera_and_task_state_and_drives_the_sim(processes, sim_env, tmp_path) -> None:
    """The so101_sim preset on launch/sim.launch.yaml: joints, block/goal positions and the front camera in one
    aligned observation; actions move the simulated arm."""
    from lerobot_ros.testing import venv_script

    processes.start(
        [venv_script("lerobot-ros"), "launch", "--log-dir", str(tmp_path / "sim_logs"),
         str(REPO / "launch/sim.launch.yaml")],
        env=sim_env, name="sim",
    )  # fmt: skip
    robot = ContractRobot("so101_sim", connect_timeout_s=180.0, observation_timeout_s=5.0)
    robot.connect()
    try:
        observation = robot.get_observation()
        assert set(observation) == set(robot.features.observation_features)
        front = observation["front"]
        assert front.shape == (240, 320, 3) and front.dtype == np.uint8 and front.std() > 0
        assert all(np.isfinite(observation[k]) for k in ("block.x", "block.y", "goal.x"))
        start = observation[NAMES[0]]
        target = {n: observation[n] for n in NAMES} | {NAMES[0]: start + (20.0 if start < 0 else -20.0)}
        deadline = time.monotonic() + 60.0
        while time.monotonic() < deadline:
            robot.send_action(target)
            now = robot.get_observation()
            if abs(now[NAMES[0]] - start) > 10.0:
                break
            time.sleep(1 / 30)
        assert abs(now[NAMES[0]] - start) > 10.0, f"shoulder_pan stayed at {now[NAMES[0]]:.1f} (start {start:.1f})"
    finally:
        robot.disconnect()


# A LeRobot script that sends one action and then ends without disconnecting its robot: by an exception (as
# LeRobot 0.4.4's lerobot-record did without spd-say: FileNotFoundError inside its `finally`, before the
# disconnect), or killed.
ABANDONING_SCRIPT = """
import os, signal, sys
from lerobot_robot_ros.core import ContractRobot
robot = ContractRobot(sys.argv[1], robot_config=sys.argv[2], connect_timeout_s=120.0)
robot.connect()
observation = robot.get_observation()
name = next(iter(robot.features.action_features))
target = {n: observation[n] for n in robot.features.action_features}
target[name] += 40.0 if observation[name] < 0 else -40.0
print("SENT", robot.send_action(target)[name], flush=True)
if sys.argv[3] == "kill":
    os.kill(os.getpid(), signal.SIGKILL)
raise FileNotFoundError(2, "No such file or directory", "spd-say")
"""


@pytest.mark.ros
@pytest.mark.parametrize("end", ["exception", "kill"])
def test_a_script_that_never_disconnects_leaves_the_follower_holding(processes, ros_node, tmp_path, end: str) -> None:
    """The process ends by its own error (exit 1, not an abort: the link closes itself at exit) or is killed; the
    follower stops at the last action sent and stays there."""
    import subprocess
    import sys

    from sensor_msgs.msg import JointState

    robot_config = launch_fake_follower(processes, tmp_path)
    history = StampedHistory(ros_node, JointState, "/follower/joint_states")
    deadline = time.monotonic() + 120
    while not history.stamps():
        assert time.monotonic() < deadline, "the fake follower published no joint state within 120 s"
        time.sleep(0.1)
    result = subprocess.run(
        [sys.executable, "-c", ABANDONING_SCRIPT, str(arm_contract(tmp_path)), str(robot_config), end],
        capture_output=True, text=True, timeout=300, check=False,
    )  # fmt: skip
    output = result.stdout + result.stderr
    if end == "kill":
        assert result.returncode == -9, output
    else:
        assert result.returncode == 1 and "terminate called" not in output, f"exit {result.returncode}:\n{output}"
        last = output.strip().splitlines()[-1]
        assert last == "FileNotFoundError: [Errno 2] No such file or directory: 'spd-say'", output
    sent = float(next(line for line in output.splitlines() if line.startswith("SENT ")).split()[1])

    def shoulder_pan_deg() -> float:
        return float(np.degrees(history.newest_at_or_before(2**62).position[0]))

    # The follower moves to the last target, then holds: the same pose half a second apart, twice in a row.
    deadline = time.monotonic() + 60.0
    readings = [shoulder_pan_deg()]
    while len(readings) < 3 or abs(readings[-1] - readings[-2]) > 0.01 or abs(readings[-2] - readings[-3]) > 0.01:
        assert time.monotonic() < deadline, f"the follower kept moving after the script ended: {readings[-5:]}"
        time.sleep(0.5)
        readings.append(shoulder_pan_deg())
    assert abs(readings[-1] - sent) < 1.0, f"the follower rests at {readings[-1]:.2f} deg, last action {sent:.2f}"
