"""`lerobot-ros replay`: a dataset episode's actions go through the action executor to a robot, which tracks them."""

from __future__ import annotations

import json
import threading
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import yaml
from test_policy_launch_files import launch_fake_follower

from lerobot_contract import Contract
from lerobot_contract.time import NS
from lerobot_dataset import DatasetWriter
from lerobot_dataset.features import FeatureSpec
from lerobot_policy_node.core.errors import PolicyConfigError
from lerobot_policy_node.core.replay import replay_plan
from lerobot_ros.testing import venv_script

REPO = Path(__file__).resolve().parents[2]
JOINTS = ("shoulder_pan", "shoulder_lift", "elbow_flex", "wrist_flex", "wrist_roll", "gripper")
NAMES = [f"{j}.pos" for j in JOINTS]


def test_plan_approaches_from_the_measured_position_then_plays_the_episode() -> None:
    actions = np.array([[1.0, 2.0], [1.5, 2.5], [2.0, 3.0]])
    plan = replay_plan(("a", "b"), actions, 10.0, np.array([0.0, 0.0]), 0.5)
    assert plan.approach_steps == 5 and plan.frames == 3 and plan.period_ns == NS // 10
    np.testing.assert_allclose(plan.targets[0], [0.0, 0.0])  # starts where the robot is: no jump
    np.testing.assert_allclose(plan.targets[1:5, 0], [0.2, 0.4, 0.6, 0.8])  # linear approach
    np.testing.assert_array_equal(plan.targets[5:], actions)
    assert plan.duration_ns == 7 * NS // 10
    assert plan.episode_start_ns(100) == 100 + 5 * NS // 10
    np.testing.assert_allclose(plan.expected(0, np.array([NS // 20 * 11, 10 * NS])), [[1.25, 2.25], [2.0, 3.0]])
    direct = replay_plan(("a", "b"), actions, 10.0, None, 0.5)
    assert direct.approach_steps == 0 and direct.targets.shape == (3, 2)


@pytest.mark.parametrize(
    ("actions", "fps", "start", "approach", "message"),
    [
        (np.zeros((0, 2)), 10.0, None, 1.0, r"shape \(0, 2\)"),
        (np.zeros((3, 3)), 10.0, None, 1.0, r"expected \(frames >= 1, 2 joints\)"),
        (np.array([[0.0, 1.0], [np.nan, 1.0]]), 10.0, None, 1.0, "action a is not finite at frame 1"),
        (np.zeros((2, 2)), 0.0, None, 1.0, "fps must be > 0"),
        (np.zeros((2, 2)), 10.0, None, -1.0, "approach time must be >= 0"),
        (np.zeros((2, 2)), 10.0, np.array([0.0, np.inf]), 1.0, "measured start position"),
    ],
)
def test_bad_plans_are_named(actions: Any, fps: float, start: Any, approach: float, message: str) -> None:
    with pytest.raises(PolicyConfigError, match=message):
        replay_plan(("a", "b"), actions, fps, start, approach)


def write_episode(root: Path, contract_file: Path, center_rad: np.ndarray, seconds: float = 3.0) -> Path:
    """One episode whose action is a smooth swing around `center_rad` (dataset units via the contract)."""
    data = yaml.safe_load(contract_file.read_text())
    units = Contract.from_dict(data, source=str(contract_file)).features["action"].joint_units()
    fps = int(data["fps"])
    t = np.arange(round(seconds * fps)) / fps
    swing = np.radians(12.0) * np.sin(2 * np.pi * t[:, None] / 2.0 + np.arange(6)[None, :])
    swing[:, 5] *= 2.0  # the gripper opens and closes wider
    ros = center_rad[None, :] + swing
    actions = np.asarray(units.apply(ros), dtype=np.float32)
    features = {"observation.state": FeatureSpec("float32", (6,), NAMES), "action": FeatureSpec("float32", (6,), NAMES)}
    with DatasetWriter.create(
        root, repo_id="local/replay", fps=fps, features=features, video_codec="h264", contract=data
    ) as writer:
        writer.start_episode("swing")
        for row in actions:
            writer.add_frame({"observation.state": row, "action": row})
        writer.save_episode()
    return root


def measured_center(ros_node: Any) -> np.ndarray:
    from sensor_msgs.msg import JointState

    from lerobot_ros.testing import wait_for_messages

    (msg,) = wait_for_messages(ros_node, JointState, "/follower/joint_states", count=1, timeout=120)
    index = {n: i for i, n in enumerate(msg.name)}
    return np.array([msg.position[index[j]] for j in JOINTS])


def check_tracking(ros_node: Any, processes: Any, dataset: Path, *extra: str) -> dict[str, Any]:
    """Replay episode 0 while recording joint_states; asserts the robot tracked the episode's actions."""
    from sensor_msgs.msg import JointState

    lock = threading.Lock()
    states: list[tuple[int, list[float]]] = []

    def on_state(msg: Any) -> None:
        index = {n: i for i, n in enumerate(msg.name)}
        with lock:
            states.append(
                (msg.header.stamp.sec * NS + msg.header.stamp.nanosec, [msg.position[index[j]] for j in JOINTS])
            )

    ros_node.create_subscription(JointState, "/follower/joint_states", on_state, 100)
    replay = processes.start(
        [venv_script("lerobot-ros"), "replay", str(dataset), "--episode", "0", "--approach", "1.0", *extra],
        name="replay",
    )
    assert replay.wait(120) == 0, replay.output()[-3000:]
    out = replay.output()
    # stdout and stderr interleave: a node's log line may follow the JSON summary
    summary, _ = json.JSONDecoder().raw_decode(out[out.rindex("\n{") + 1 :])

    from lerobot_dataset import DatasetReader

    with DatasetReader(dataset) as reader:
        actions = np.asarray(reader.episode_frames(0, "action"), dtype=np.float64)
        contract = Contract.from_dict(json.loads((dataset / "meta" / "contract.json").read_text()))
    recorded = np.asarray(contract.features["action"].joint_units().inverse(actions))  # back to radians
    start, period = summary["episode_start_ns"], summary["period_ns"]
    with lock:
        stamps = np.array([s for s, _ in states], dtype=np.int64)
        positions = np.array([p for _, p in states])
    end = start + (len(recorded) - 1) * period
    window = (stamps >= start) & (stamps <= end)
    assert window.sum() >= len(recorded) // 2, f"only {window.sum()} joint_states during the episode"
    steps = (stamps[window] - start) / period
    expected = np.stack([np.interp(steps, np.arange(len(recorded)), recorded[:, j]) for j in range(6)], axis=1)
    error = positions[window] - expected
    motion = np.ptp(recorded, axis=0)
    rms = np.sqrt(np.mean(error**2, axis=0))
    # The robot follows the recorded trajectory: error small against how far each joint moves, and it moved.
    # On failure the replay's log (executor warnings: starved, rejected chunks) and summary say what went wrong.
    assert np.all(rms < 0.15 * motion), f"tracking RMS {rms} rad vs motion range {motion} rad\n{out[-2500:]}"
    assert np.all(np.ptp(positions[window], axis=0) > 0.7 * motion)
    print(f"tracking RMS {np.degrees(rms).round(2)} deg, motion range {np.degrees(motion).round(1)} deg")
    return {"rms": rms, "motion": motion, "summary": summary}


@pytest.mark.ros
def test_replay_on_the_fake_hardware_arm(processes: Any, ros_node: Any, tmp_path: Path) -> None:
    robot_config = launch_fake_follower(processes, tmp_path)
    center = measured_center(ros_node)
    dataset = write_episode(tmp_path / "dataset", REPO / "config/contracts/so101.yaml", center)
    result = check_tracking(ros_node, processes, dataset, "--robot-config", str(robot_config))
    assert result["summary"]["namespace"] == "/follower"  # from the contract's action topic


@pytest.mark.ros
@pytest.mark.extended
def test_replay_on_the_sim_bridge(processes: Any, ros_node: Any, tmp_path: Path) -> None:
    processes.start(
        [venv_script("lerobot-ros"), "launch", "--log-dir", str(tmp_path / "sim_logs"),
         str(REPO / "launch/sim.launch.yaml"), "cameras:=", "max_episode_steps:=0"],
        name="sim",
    )  # fmt: skip
    center = measured_center(ros_node)
    dataset = write_episode(tmp_path / "dataset", REPO / "config/contracts/so101_sim.yaml", center)
    robot = str(REPO / "config/robots/so101_sim.yaml")
    check_tracking(ros_node, processes, dataset, "--output", "joint_commands", "--robot-config", robot)


@pytest.mark.ros
def test_use_sim_time_without_a_clock_is_one_line(processes: Any, ros_node: Any, tmp_path: Path) -> None:
    """On sim time the replay waits for /clock: a chunk stamped at the unset time 0 was refused by the executor
    ("stamp") and the command then waited out the whole episode with the robot still."""
    from sensor_msgs.msg import JointState

    publisher = ros_node.create_publisher(JointState, "/follower/joint_states", 10)
    state = JointState(name=list(JOINTS), position=[0.0] * 6)
    ros_node.create_timer(0.05, lambda: publisher.publish(state))  # a robot, but nothing publishes /clock
    dataset = write_episode(tmp_path / "d", REPO / "config/contracts/so101.yaml", np.zeros(6), seconds=0.2)
    robot = str(REPO / "config/robots/so101_sim.yaml")  # joints and limits, no calibration needed
    replay = processes.start(
        [venv_script("lerobot-ros"), "replay", str(dataset), "--episode", "0", "--robot-config", robot,
         "--use-sim-time", "--wait", "3"],
        name="replay",
    )  # fmt: skip
    assert replay.wait(60) == 2, replay.output()[-3000:]
    assert "--use-sim-time: no /clock within 3.0 s" in replay.output()
    assert "chunk rejected" not in replay.output()


@pytest.mark.ros
def test_a_robot_that_does_not_take_the_output_is_one_line(processes: Any, ros_node: Any, tmp_path: Path) -> None:
    """The chunk goes out only once the robot subscribes to the executor's output: before, a replay to a robot
    that did not (yet) take it exited 0 with a tracking summary while every command was lost."""
    from sensor_msgs.msg import JointState

    publisher = ros_node.create_publisher(JointState, "/follower/joint_states", 10)
    state = JointState(name=list(JOINTS), position=[0.0] * 6)
    ros_node.create_timer(0.05, lambda: publisher.publish(state))  # joint_states, but nothing takes commands
    dataset = write_episode(tmp_path / "d", REPO / "config/contracts/so101.yaml", np.zeros(6), seconds=0.2)
    robot = str(REPO / "config/robots/so101_sim.yaml")
    replay = processes.start(
        [venv_script("lerobot-ros"), "replay", str(dataset), "--episode", "0", "--robot-config", robot,
         "--output", "joint_commands", "--wait", "3"],
        name="replay",
    )  # fmt: skip
    assert replay.wait(60) == 2, replay.output()[-3000:]
    assert "nothing subscribes to /follower/joint_commands within 3.0 s" in replay.output()


def test_bad_input_is_one_line(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    from lerobot_ros.cli import main

    dataset = write_episode(tmp_path / "d", REPO / "config/contracts/so101.yaml", np.zeros(6), seconds=0.2)
    robot = ["--robot-config", str(REPO / "config/robots/so101.yaml")]
    assert main(["replay", str(dataset), "--episode", "0"]) == 2
    assert "pass --robot-config config/robots/<robot>.yaml" in capsys.readouterr().err
    assert main(["replay", str(dataset), "--episode", "3", *robot]) == 2
    assert "has episodes 0..0; --episode 3 is not one" in capsys.readouterr().err
    (dataset / "meta" / "contract.json").unlink()
    assert main(["replay", str(dataset), "--episode", "0", *robot]) == 2
    assert "no meta/contract.json; pass --contract FILE" in capsys.readouterr().err
    assert main(["replay", str(tmp_path / "nothing"), "--episode", "0", *robot]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "nothing" in err
