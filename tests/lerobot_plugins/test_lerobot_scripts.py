"""LeRobot's own scripts (the reference venv's: 0.6.1, or 0.4.4's) drive the fake-hardware SO-101 through the
plugins (`--robot.type=ros`, `--teleop.type=ros`), in LeRobot's environment (.venv-lerobot-ref with the plugins:
scripts/setup.sh --with-lerobot-plugins): lerobot-record writes a dataset LeRobot loads, with the follower following
a leader topic; lerobot-replay plays that episode's actions to the follower; lerobot-teleoperate moves the follower."""

from __future__ import annotations

import json
import subprocess
import threading
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from plugin_stack import LEROBOT_SCRIPT_MARKS, REPO, StampedHistory, arm_contract, launch_fake_follower

from lerobot_contract import load_contract
from lerobot_ros.testing import reference_env, reference_lerobot_version, reference_venv

NAMES = ["shoulder_pan.pos", "shoulder_lift.pos", "elbow_flex.pos", "wrist_flex.pos", "wrist_roll.pos", "gripper.pos"]
OFFSET_RAD = np.radians(25.0)  # the leader's shoulder_pan, away from the follower's start

pytestmark = LEROBOT_SCRIPT_MARKS


def lerobot_env(workdir: Path) -> dict[str, str]:
    """A LeRobot-venv process in this test's ROS domain: its own ROS wheels' bootstrap must run again."""
    env = reference_env(workdir)
    env.pop("_ROS_WHEELS_BOOTSTRAP_COMPLETE", None)
    return env


def run_lerobot(script: str, args: Sequence[str], workdir: Path, timeout: float = 300) -> str:
    """Run LeRobot's console script `script` from its venv; fails the test with its output when it fails."""
    result = subprocess.run(
        [str(reference_venv() / "bin" / script), *args], env=lerobot_env(workdir), capture_output=True, text=True,
        timeout=timeout, check=False,
    )  # fmt: skip
    output = result.stdout + result.stderr
    assert result.returncode == 0, f"{script} failed ({result.returncode}):\n{output[-6000:]}"
    return output


class Leader:
    """Publishes a leader arm's /leader/joint_states at 30 Hz: the follower's measured pose, shoulder_pan moved."""

    def __init__(self, node: Any, start_rad: np.ndarray) -> None:
        from rclpy.qos import QoSProfile, ReliabilityPolicy
        from sensor_msgs.msg import JointState

        self.position = start_rad.copy()
        self.position[0] += -OFFSET_RAD if start_rad[0] > 0 else OFFSET_RAD
        self._node, self._msg_type = node, JointState
        qos = QoSProfile(depth=10, reliability=ReliabilityPolicy.BEST_EFFORT)
        self._publisher = node.create_publisher(JointState, "/leader/joint_states", qos)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="leader", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        joints = [n.removesuffix(".pos") for n in NAMES]
        while not self._stop.wait(1 / 30):
            msg = self._msg_type()
            msg.header.stamp = self._node.get_clock().now().to_msg()
            msg.name, msg.position = joints, [float(x) for x in self.position]
            self._publisher.publish(msg)

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=5)


@pytest.fixture
def follower(processes, ros_node, tmp_path) -> Iterator[tuple[Path, StampedHistory, np.ndarray]]:
    """The fake-hardware follower running: (contract file, its joint states, its start pose in rad)."""
    from sensor_msgs.msg import JointState

    launch_fake_follower(processes, tmp_path)
    contract = arm_contract(tmp_path)
    states = StampedHistory(ros_node, JointState, "/follower/joint_states")
    deadline = time.monotonic() + 120
    while not states.stamps():
        assert time.monotonic() < deadline, "the fake follower published no joint state within 120 s"
        time.sleep(0.1)
    yield contract, states, np.array(states.newest_at_or_before(2**62).position)


def robot_args(contract: Path) -> list[str]:
    return ["--robot.type=ros", f"--robot.contract={contract}", "--robot.connect_timeout_s=60"]


def teleop_args(contract: Path) -> list[str]:
    return ["--teleop.type=ros", f"--teleop.contract={contract}", "--teleop.topic=/leader/joint_states",
            "--teleop.connect_timeout_s=60"]  # fmt: skip


def shoulder_pan_deg(states: StampedHistory) -> float:
    return float(np.degrees(states.newest_at_or_before(2**62).position[0]))


def test_record_then_replay(follower, ros_node, tmp_path) -> None:
    from sensor_msgs.msg import JointState

    contract, _states, start = follower
    leader = Leader(ros_node, start)
    root = tmp_path / "dataset"
    try:
        run_lerobot("lerobot-record", [*robot_args(contract), *teleop_args(contract),
            "--dataset.repo_id=local/ros_record", f"--dataset.root={root}", "--dataset.single_task=reach",
            "--dataset.num_episodes=1", "--dataset.episode_time_s=4", "--dataset.reset_time_s=0",
            "--dataset.video=false", "--dataset.push_to_hub=false", "--display_data=false", "--play_sounds=false"],
            tmp_path)  # fmt: skip
    finally:
        leader.stop()
    summary = tmp_path / "summary.json"
    run_lerobot("python", ["-c", f"""
import json
from lerobot.datasets.lerobot_dataset import LeRobotDataset
ds = LeRobotDataset("local/ros_record", root={str(root)!r})
frames = [ds[i] for i in range(len(ds))]
json.dump({{"frames": len(ds), "fps": ds.fps, "features": {{k: v.get("names") for k, v in ds.features.items()}},
    "state": [f["observation.state"].tolist() for f in frames], "action": [f["action"].tolist() for f in frames]}},
    open({str(summary)!r}, "w"))
"""], tmp_path)  # fmt: skip
    data = json.loads(summary.read_text())
    assert data["fps"] == 30 and data["frames"] >= 30, data["frames"]  # ~4 s at 30 Hz on a loaded machine
    assert data["features"]["observation.state"] == NAMES and data["features"]["action"] == NAMES
    units = load_contract(contract).features["action"].joint_units()
    leader_deg = np.asarray(units.apply(leader.position[None, :]))[0]
    np.testing.assert_allclose(data["action"][-1], leader_deg, atol=1e-3)  # the leader's pose in LeRobot's units
    # The follower followed the leader during the episode.
    assert abs(data["state"][-1][0] - leader_deg[0]) < 2.0, (data["state"][-1][0], leader_deg[0])

    # lerobot-replay sends the episode's actions to the follower's command topic.
    commands = StampedHistory(ros_node, JointState, "/follower/joint_commands")
    run_lerobot("lerobot-replay", [*robot_args(contract), "--dataset.repo_id=local/ros_record",
        f"--dataset.root={root}", "--dataset.episode=0", "--play_sounds=false"], tmp_path)  # fmt: skip
    time.sleep(0.5)
    sent = [m for _, m in commands.messages]
    # The probe joins the replay's discovery like any subscriber and may miss the first commands; what it received
    # is the end of the episode's actions, in order, in ROS units.
    assert len(sent) >= len(data["action"]) // 2, (len(sent), len(data["action"]))
    replayed = np.asarray(units.apply(np.array([m.position for m in sent])))
    np.testing.assert_allclose(replayed, np.array(data["action"])[-len(sent) :], atol=1e-3)


def guide_command(script: str) -> list[str]:
    """The options of `script`'s command in docs/guides/lerobot-cli.md ("Run LeRobot's scripts")."""
    import shlex

    text = (REPO / "docs" / "guides" / "lerobot-cli.md").read_text().replace("\\\n", " ")
    line = next(line for line in text.splitlines() if line.startswith(f"{script} --robot.type=ros"))
    return shlex.split(line)[1:]


def test_record_with_the_guides_command_exits_0_without_a_speech_tool(follower, ros_node, tmp_path) -> None:
    """The guide's lerobot-record command, on a machine without spd-say (LeRobot's default play_sounds=true calls
    it), exits 0 with the episode saved; only the contract, dataset folder and episode length are this test's."""
    import shutil

    contract, _states, start = follower
    env_path = lerobot_env(tmp_path)["PATH"]
    if shutil.which("spd-say", path=env_path) is not None:
        pytest.skip("spd-say is installed here: the test needs a machine without it")
    options = dict(option.split("=", 1) for option in guide_command("lerobot-record"))
    options.update({"--robot.contract": str(contract), "--teleop.contract": str(contract),
                    "--dataset.root": str(tmp_path / "dataset"), "--dataset.num_episodes": "1",
                    "--dataset.episode_time_s": "3", "--robot.connect_timeout_s": "60",
                    "--teleop.connect_timeout_s": "60"})  # fmt: skip
    leader = Leader(ros_node, start)
    try:
        output = run_lerobot("lerobot-record", [f"{key}={value}" for key, value in options.items()], tmp_path)
    finally:
        leader.stop()
    assert "spd-say" not in output, output[-3000:]
    info = json.loads((tmp_path / "dataset" / "meta" / "info.json").read_text())
    assert info["total_episodes"] == 1 and info["total_frames"] > 0, info


def test_teleoperate_moves_the_follower(follower, ros_node, tmp_path) -> None:
    contract, states, start = follower
    leader = Leader(ros_node, start)
    try:
        run_lerobot("lerobot-teleoperate", [*robot_args(contract), *teleop_args(contract), "--fps=30",
            "--teleop_time_s=4", "--display_data=false"], tmp_path)  # fmt: skip
    finally:
        leader.stop()
    assert abs(shoulder_pan_deg(states) - np.degrees(leader.position[0])) < 2.0, (
        f"follower at {shoulder_pan_deg(states):.1f} deg, leader at {np.degrees(leader.position[0]):.1f} deg"
    )


def test_missing_topic_is_one_line_for_lerobot_users(ros_domain, tmp_path) -> None:
    """No leader running: lerobot-teleoperate ends with one line naming the silent topic (after LeRobot's traceback)."""
    contract = arm_contract(tmp_path)
    result = subprocess.run(
        [str(reference_venv() / "bin" / "lerobot-teleoperate"), "--robot.type=ros", f"--robot.contract={contract}",
         "--robot.connect_timeout_s=2", *teleop_args(contract)[:-1], "--teleop.connect_timeout_s=2",
         "--teleop_time_s=1"],
        env=lerobot_env(tmp_path), capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    assert result.returncode != 0
    last = (result.stdout + result.stderr).strip().splitlines()[-1]
    assert last.startswith("lerobot_robot_ros.link.RosLinkError: no aligned frame within 2 s: no message on "
                           "/leader/joint_states (action)"), last  # fmt: skip


def test_lerobot_makes_and_reads_a_ros_camera(ros_node, tmp_path) -> None:
    """LeRobot's own camera factory makes camera type `ros` (as a robot's `--robot.cameras` does); it reads the
    newest image, async_read a newer frame, and read_latest the newest one without LeRobot 0.6's warning for a
    camera that lacks it."""
    from test_camera_core import TOPIC, ImageStream

    stream = ImageStream(ros_node)
    try:
        output = run_lerobot("python", ["-c", f"""
from lerobot.utils.import_utils import register_third_party_plugins
register_third_party_plugins()
from lerobot.cameras.configs import CameraConfig
from lerobot.cameras.utils import make_cameras_from_configs
config = CameraConfig.get_choice_class("ros")(topic={TOPIC!r}, width=32, height=24, fps=30, connect_timeout_s=60)
camera = make_cameras_from_configs({{"front": config}})["front"]
camera.connect()
first = camera.read()
first_ns = camera.camera._last_ns
second = camera.async_read(timeout_ms=2000)
import warnings
with warnings.catch_warnings():
    warnings.simplefilter("error")
    latest = camera.read_latest(max_age_ms=1000)
camera.disconnect()
print("CAMERA", type(camera).__name__, first.shape, first.dtype, second.shape, camera.camera._last_ns > first_ns,
      latest.shape)
"""], tmp_path)  # fmt: skip
    finally:
        stream.stop()
    assert "CAMERA RosCamera (24, 32, 3) uint8 (24, 32, 3) True (24, 32, 3)" in output, output[-3000:]


@pytest.mark.slow
def test_record_the_sim_with_its_camera(processes, sim_env, ros_node, tmp_path) -> None:
    """lerobot-record with the so101_sim preset: the front camera and the block/goal positions reach LeRobot's
    dataset (an h264 video; LeRobot 0.4.4 leaves cameras out of a dataset recorded with --dataset.video=false),
    which LeRobot loads."""
    from lerobot_ros.testing import venv_script

    processes.start([venv_script("lerobot-ros"), "launch", "--log-dir", str(tmp_path / "sim_logs"),
                     str(REPO / "launch/sim.launch.yaml")], env=sim_env, name="sim")  # fmt: skip
    leader = Leader(ros_node, np.zeros(6))
    root = tmp_path / "dataset"
    # LeRobot 0.6 moved the video codec into the dataset's RGB encoder options.
    h264 = "--dataset.rgb_encoder.vcodec=h264" if reference_lerobot_version() >= (0, 6) else "--dataset.vcodec=h264"
    try:
        run_lerobot("lerobot-record", ["--robot.type=ros", "--robot.contract=so101_sim",
            "--robot.connect_timeout_s=180", "--robot.observation_timeout_s=5", "--teleop.type=ros",
            "--teleop.contract=so101_sim", "--teleop.connect_timeout_s=60", "--dataset.repo_id=local/ros_sim",
            f"--dataset.root={root}", "--dataset.single_task=reach", "--dataset.num_episodes=1",
            "--dataset.episode_time_s=3", "--dataset.reset_time_s=0", h264,
            "--dataset.push_to_hub=false", "--display_data=false", "--play_sounds=false"], tmp_path)  # fmt: skip
    finally:
        leader.stop()
    output = run_lerobot("python", ["-c", f"""
from lerobot.datasets.lerobot_dataset import LeRobotDataset
ds = LeRobotDataset("local/ros_sim", root={str(root)!r})
item = ds[len(ds) - 1]
print("SIM", len(ds), tuple(item["observation.images.front"].shape), ds.features["observation.state"]["names"])
"""], tmp_path)  # fmt: skip
    line = next(s for s in output.splitlines() if s.startswith("SIM "))
    frames = int(line.split()[1])
    assert frames >= 20 and "(3, 240, 320)" in line, line
    assert "'block.x', 'block.y', 'block.z', 'goal.x', 'goal.y', 'goal.z'" in line, line
