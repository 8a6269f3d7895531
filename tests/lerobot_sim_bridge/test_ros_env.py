"""`RosRobotEnv` against the sim bridge: gym-style evaluation code on a ROS robot, via the SO-101 contract."""

from pathlib import Path

import numpy as np
import pytest
import yaml

from lerobot_ros.testing import venv_script
from lerobot_sim_bridge.errors import InvalidConfigError
from lerobot_sim_bridge.ros_env import RosRobotEnv

pytestmark = pytest.mark.ros

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture
def small_camera_contract(tmp_path):
    """The shipped SO-101 contract with the front camera at the bridge's small test size and no wrist camera."""
    data = yaml.safe_load((REPO / "config/contracts/so101.yaml").read_text())
    data["features"]["observation.images.front"]["shape"] = [48, 64, 3]
    del data["features"]["observation.images.wrist"]
    path = tmp_path / "so101_sim.yaml"
    path.write_text(yaml.safe_dump(data))
    return path


def test_ros_robot_env_steps_the_sim_bridge_in_lockstep(processes, sim_env, small_camera_contract):
    bridge = processes.start(
        [
            venv_script("sim_bridge"),
            "--ros-args",
            "-r",
            "__ns:=/follower",
            "-p",
            "mode:=lockstep",
            "-p",
            "cameras:=front:64x48",
            "-p",
            "max_episode_steps:=40",
        ],
        name="bridge",
        env=sim_env,
    )
    bridge.wait_for_output("sim bridge ready", timeout=60)
    env = RosRobotEnv(small_camera_contract, step_timeout=20.0)
    try:
        observation, info = env.reset(seed=4)
        assert env.observation_space.contains(
            {k: v.astype(np.float32) if v.dtype != np.uint8 else v for k, v in observation.items()}
        )
        assert info["seed"] == 4
        assert observation["observation.images.front"].shape == (48, 64, 3)
        # Home pose: body joints at 0 degrees; the gripper's 0 rad is 9.1 on LeRobot's 0..100 scale.
        np.testing.assert_allclose(observation["observation.state"], [0, 0, 0, 0, 0, 9.09], atol=0.01)
        again, _ = env.reset(seed=4)
        np.testing.assert_array_equal(again["observation.images.front"], observation["observation.images.front"])

        # Actions are in LeRobot units: degrees for the body, 0..100 for the gripper.
        target = np.array([20.0, -15.0, 25.0, 20.0, 0.0, 60.0])
        steps = 0
        truncated = False
        while not truncated and steps < 60:
            observation, reward, terminated, truncated, info = env.step(target)
            steps += 1
        assert steps == 40 and truncated and not terminated and info["episode_end"] == "time_limit"
        assert reward == 0.0 and info["is_success"] is False
        np.testing.assert_allclose(observation["observation.state"], target, atol=4.0)
        with pytest.raises(InvalidConfigError, match="6 finite values"):
            env.step(np.array([np.nan] * 6))
    finally:
        env.close()


def test_contract_without_an_action_is_rejected(tmp_path):
    data = yaml.safe_load((REPO / "config/contracts/so101.yaml").read_text())
    del data["features"]["action"]
    path = tmp_path / "no_action.yaml"
    path.write_text(yaml.safe_dump(data))
    with pytest.raises(InvalidConfigError, match="needs a vector 'action' feature"):
        RosRobotEnv(path)


def test_ros_robot_env_drives_the_fake_hardware_arm_driver(processes, sim_env, tmp_path):
    """The same env code on the real driver (simulated servos): no reset service, reward 0, same units."""
    processes.start(
        [
            venv_script("lerobot-ros"),
            "launch",
            "--log-dir",
            str(tmp_path / "logs"),
            "lerobot_drivers",
            "so101_follower.launch.yaml",
            "fake_hardware:=true",
            "namespace:=real",
            f"fake_dir:={tmp_path / 'fake'}",
        ],
        name="fake_arm",
        env=sim_env,
    )
    data = yaml.safe_load((REPO / "config/contracts/so101.yaml").read_text())
    features = data["features"]
    data["features"] = {key: features[key] for key in ("observation.state", "action")}
    for feature in data["features"].values():
        feature["topic"] = feature["topic"].replace("/follower/", "/real/")
    contract = tmp_path / "real_arm.yaml"
    contract.write_text(yaml.safe_dump(data))
    env = RosRobotEnv(contract, step_timeout=60.0, discovery_timeout=1.0)
    try:
        observation, info = env.reset(seed=0)
        assert "no /real/sim/reset service" in info["reset"]
        target = np.array([10.0, -10.0, 15.0, 5.0, 0.0, 30.0])  # degrees, gripper 0..100
        for _ in range(30):
            observation, reward, terminated, truncated, info = env.step(target)
        assert (reward, terminated, truncated) == (0.0, False, False)
        np.testing.assert_allclose(observation["observation.state"], target, atol=1.0)
    finally:
        env.close()
