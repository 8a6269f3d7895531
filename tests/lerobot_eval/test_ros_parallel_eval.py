"""`lerobot-ros eval --num-envs N --through-ros`: N sim bridges, N executors and ONE batching policy node.

Through real processes: two bridges in real time (/robot_0, /robot_1), two action executors, one policy node with
`robots: [/robot_0, /robot_1]` serving the tiny random ACT of test_parallel_eval (joints and block/goal positions).
The episodes run in real time (the executor ticks on the wall clock; the nodes cannot run in lockstep), so their
steps and returns are not the lockstep ones; what is compared with the serial evaluation on the same seeds is what
a seed decides: the episode's start (where the seed puts block and goal, exactly) and its outcome (this policy
never succeeds: every episode ends at the time limit in both, which is a weak comparison, stated as such).
About 25-30 s.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest
import yaml

from lerobot_eval.failure_causes import CAUSES
from lerobot_policy_node.core.batching import BatchSizes, parse_robots, robot_contract, robot_topic
from lerobot_policy_node.core.errors import PolicyConfigError

REPO = Path(__file__).resolve().parents[2]
CONTRACT_PATH = REPO / "config" / "contracts" / "so101_sim.yaml"


def _tiny_act(directory: Path) -> Path:
    from tests.lerobot_eval.test_parallel_eval import tiny_act

    return tiny_act(directory, yaml.safe_load(CONTRACT_PATH.read_text()), None)


def _settings(out: Path, checkpoint: Path, num_envs: str | None, through_ros: bool, episodes: int) -> Any:
    from lerobot_eval.evaluation import EvalSettings

    out.mkdir(parents=True)
    return EvalSettings(
        checkpoint=str(checkpoint), contract="", episodes=episodes, max_steps=30, seed=11, env_id="so101_pick_place",
        cameras="front:320x240", videos=0, blend="crossfade", threshold=0.5, device="cpu", output_dir=out,
        num_envs=num_envs, through_ros=through_ros,
    )  # fmt: skip


@pytest.mark.ros
def test_two_robots_through_ros_share_one_batching_policy_node(tmp_path: Path, ros_domain: int) -> None:
    from lerobot_contract import Contract
    from lerobot_eval.evaluation import run_evaluation
    from lerobot_sim_bridge.contract_env import SimContractEnv

    checkpoint = _tiny_act(tmp_path / "pretrained_model")
    lines: list[str] = []
    report = run_evaluation(_settings(tmp_path / "ros", checkpoint, "2", True, 3), progress=lines.append)
    rows = report["per_episode"]
    assert [r["seed"] for r in rows] == [11, 12, 13] and report["num_envs"] == 2 and report["through_ros"]
    assert {r["robot"] for r in rows} == {"/robot_0", "/robot_1"}  # both robots ran episodes
    # A 1 s episode whose first chunk came after its time limit (a loaded machine) is an outcome the evaluation
    # reports as late_start, not an error; the others were driven by chunks.
    summary = [{k: r.get(k) for k in ("end", "chunks", "steps", "duration_s", "why")} for r in rows]
    assert all(r["end"] == "time_limit" for r in rows), summary
    assert all((r["chunks"] > 0 and r["steps"] > 0) or r["cause"] == "late_start" for r in rows), summary
    assert any(r["chunks"] > 0 and r["steps"] > 0 for r in rows), summary
    # Each failure names its cause from the robot's own executor and sim reports over the episode.
    assert all(r["cause"] in CAUSES and r["why"].startswith(r["cause"]) for r in rows), rows
    assert all(r["signals"]["steps"] == r["steps"] + r["signals"]["steps_before_control"] for r in rows)
    # One policy node process served both robots, and ran inferences of both in one batch.
    assert report["policy_processes"] == 1
    sizes = report["policy_batch_sizes"]
    assert sizes["max"] == 2 and sizes["batched"] > 0, sizes
    # Both executors took chunks (a late one may be refused as stale in real time: not asserted).
    assert report["chunks"]["accepted"] > 0 and report["step_units"].startswith("radians")
    # The serial evaluation on the same seeds: same outcome, and the same episode start (block and goal) per seed.
    serial = run_evaluation(_settings(tmp_path / "serial", checkpoint, None, False, 3), progress=lambda _: None)
    assert [r["success"] for r in rows] == [r["success"] for r in serial["per_episode"]]
    contract = Contract.load(CONTRACT_PATH).select(["observation.state", "observation.environment_state", "action"])
    env = SimContractEnv("so101_pick_place", contract.to_dict(), 30.0, "", 30)
    try:
        for row in rows:
            observation, _ = env.reset(seed=row["seed"])
            start = np.asarray(observation["observation.environment_state"], dtype=np.float32)
            # Block and goal where the seed put them: the bridge's reset snapshot (float64 on the wire) equals
            # the in-process reset's observation (float32).
            np.testing.assert_array_equal(np.asarray(row["initial_environment_state"], dtype=np.float32), start)
    finally:
        env.close()


def test_robot_namespaces_are_checked_in_one_line() -> None:
    assert parse_robots(None) == () and parse_robots(["/robot_0", "/arm/b"]) == ("/robot_0", "/arm/b")
    with pytest.raises(PolicyConfigError, match="not an absolute ROS namespace"):
        parse_robots(["robot_0"])
    with pytest.raises(PolicyConfigError, match="more than once"):
        parse_robots(["/a", "/a"])


def test_each_robot_gets_the_contract_topics_in_its_namespace() -> None:
    from lerobot_contract import Contract

    moved = robot_contract(Contract.load(CONTRACT_PATH), "/robot_1")
    topics = {key: feature.topic for key, feature in moved.features.items()}
    assert topics == {
        "observation.state": "/robot_1/joint_states",
        "action": "/robot_1/joint_commands",
        "observation.environment_state": "/robot_1/sim/object_poses",
        "observation.images.front": "/robot_1/cameras/front/image_raw",
    }
    assert robot_topic("/follower", "/follower", "/r") == "/r" and robot_topic("/followers/x", "/follower", "/r") == (
        "/r/followers/x"
    )


def test_batch_sizes_are_counted() -> None:
    sizes = BatchSizes()
    for size in (1, 2, 2, 3):
        sizes.add(size)
    assert sizes.text() == "1:1,2:2,3:1" and sizes.batches == 4 and sizes.batched == 3


def test_moving_a_contract_leaves_the_original_as_it_was() -> None:
    from lerobot_contract import Contract

    contract = Contract.load(CONTRACT_PATH)
    first, second = robot_contract(contract, "/robot_0"), robot_contract(contract, "/robot_1")
    assert contract.features["action"].topic == "/follower/joint_commands"
    assert first.features["action"].topic == "/robot_0/joint_commands"
    assert second.features["action"].topic == "/robot_1/joint_commands"


def test_the_launch_file_starts_n_bridges_n_executors_and_one_policy_node() -> None:
    import subprocess
    import sys

    argv = [str(Path(sys.executable).parent / "lerobot-ros"), "launch", "--print",
            str(REPO / "launch" / "sim_policy_robots.launch.yaml"), "checkpoint:=scripted", "num_robots:=3",
            "robots:=['/robot_0', '/robot_1', '/robot_2']"]  # fmt: skip
    result = subprocess.run(argv, capture_output=True, text=True, timeout=60, check=False)
    assert result.returncode == 0, result.stdout + result.stderr
    out = result.stdout
    assert out.count("/sim_bridge --ros-args") == 3 and out.count("/action_executor --ros-args") == 3
    assert out.count("/policy_node --ros-args") == 1
    for i in range(3):
        assert f"__ns:=/robot_{i}" in out and f"/clock:=/robot_{i}/clock" in out
        assert f"chunk_topic: /robot_{i}/policy/action_chunk" in out
    assert "robots:\n        - /robot_0\n        - /robot_1\n        - /robot_2" in out


@pytest.mark.parametrize(
    ("arguments", "expected"),
    [
        (["--num-envs", "100000", "--through-ros"], "--num-envs 100000: this machine holds at most"),
        (["--through-ros"], "--through-ros runs several robots at once: give --num-envs N"),
    ],
)
def test_bad_through_ros_arguments_are_one_line(tmp_path: Path, arguments: list[str], expected: str) -> None:
    import subprocess
    import sys

    argv = [str(Path(sys.executable).parent / "lerobot-ros"), "eval", "scripted", "--episodes", "2",
            "--output-dir", str(tmp_path), *arguments]  # fmt: skip
    result = subprocess.run(argv, capture_output=True, text=True, timeout=120, check=False)
    lines = [line for line in (result.stdout + result.stderr).splitlines() if line.strip()]
    assert result.returncode != 0 and len(lines) == 1 and expected in lines[0], lines


def test_a_policy_server_is_not_shared_between_robots() -> None:
    from lerobot_policy_node.core.batching import RobotBatchPolicy
    from lerobot_policy_node.core.policies import RemotePolicy, parse_scripted

    remote = RemotePolicy.__new__(RemotePolicy)
    remote.name = "grpc://localhost:50051"
    with pytest.raises(PolicyConfigError, match="one episode state for every caller"):
        RobotBatchPolicy(remote, 2)
    # A scripted policy keeps per-episode state (the pose it started at): one copy per robot.
    scripted = RobotBatchPolicy(parse_scripted("scripted:horizon=4", 6), 2)
    state = "observation.state"
    first = scripted.predict([(0, {"timestamp": 0.0, state: np.zeros(6)}), (1, {"timestamp": 0.0, state: np.ones(6)})])
    later = scripted.predict(
        [(1, {"timestamp": 0.1, state: np.full(6, 9.0)}), (0, {"timestamp": 0.1, state: np.ones(6)})]
    )
    assert np.array_equal(first[0][0], np.zeros(6)) and np.array_equal(first[1][0], np.ones(6))
    single = parse_scripted("scripted:horizon=4", 6)
    single.predict_chunk({"timestamp": 0.0, state: np.ones(6)})
    assert np.array_equal(later[0], single.predict_chunk({"timestamp": 0.1, state: np.full(6, 9.0)}))


def test_every_robot_executor_gets_the_sim_arm_limits(tmp_path: Path) -> None:
    from lerobot_eval.ros_evaluation import robot_namespaces, robots_config
    from lerobot_policy_node.core.robot_limits import load_robot_limits

    sim = load_robot_limits(REPO / "config/robots/so101_sim.yaml", "/follower/action_executor")
    shipped = REPO / "config/robots/so101_sim_robots.yaml"  # the launch file's, /robot_0 .. /robot_7
    written = robots_config(REPO / "config/robots/so101_sim.yaml", robot_namespaces(12), tmp_path / "robots.yaml")
    for path, count in ((shipped, 8), (written, 12)):
        for robot in robot_namespaces(count):
            limits = load_robot_limits(path, f"{robot}/action_executor")
            assert (limits.joint_names, limits.lower, limits.upper, limits.max_velocity) == (
                sim.joint_names,
                sim.lower,
                sim.upper,
                sim.max_velocity,
            )


def _outcomes(
    first_stamp: float, steps: int, end_step: int, episode: int = 4
) -> list[tuple[int, int, float, float, str]]:
    """The bridge's step outcomes of one 30 fps episode: (episode, step, stamp, reward, end), from the reset's."""
    return [(episode, i, first_stamp + i / 30, 0.1 * (i > 0), "time_limit" if i >= end_step else "")
            for i in range(steps + 1)]  # fmt: skip


def test_an_episode_that_ended_before_the_executor_took_over_is_a_late_start() -> None:
    # Issue 36: under load the supervisor took a 1 s episode's reset answer after the episode had run out; it then
    # took the end first, counted none of the steps, enabled the executor on the chunk and reported 1 chunk, 0 steps
    # and a cause other than late_start. The bridge's numbered, stamped outcomes give the same counts however late
    # and in whatever order they are taken.
    from lerobot_eval.failure_causes import EpisodeSignals, classify
    from lerobot_eval.ros_evaluation import EpisodeSteps, episode_counts

    reset_stamp = 100.0
    outcomes = EpisodeSteps(4)
    taken = _outcomes(reset_stamp, 36, 30)  # the sim keeps stepping past its end until the next reset
    for outcome in [taken[30], *reversed(taken), (3, 29, 99.0, 5.0, "time_limit"), (5, 1, 102.0, 5.0, "")]:
        outcomes.add(*outcome)  # the end first, the rest backwards, other episodes' outcomes ignored
    control_s = reset_stamp + 1.4  # the executor was asked to take over after the episode's 30 steps
    assert (outcomes.end, outcomes.end_step) == ("time_limit", 30)
    assert episode_counts(outcomes, control_s) == (0, 30)
    assert outcomes.episode_return() == pytest.approx(3.0)
    signals = EpisodeSignals(fps=30.0, steps=30, steps_before_control=30, wall_s=0.0)
    assert classify(False, signals).cause == "late_start"


def test_steps_are_split_at_the_moment_the_executor_was_asked_to_take_over() -> None:
    from lerobot_eval.ros_evaluation import EpisodeSteps, episode_counts

    outcomes = EpisodeSteps(4)
    taken = _outcomes(100.0, 30, 30)
    for i in (0, 1, 2, 5, 7, 30, 12, 20):  # some lost on the way, the end taken before later ones
        outcomes.add(*taken[i])
    assert not EpisodeSteps(4).ended and outcomes.ended
    # Control asked for between the stamps of steps 7 and 8: 7 steps without the policy, 23 with it.
    assert episode_counts(outcomes, 100.0 + 7.5 / 30) == (23, 7)
    assert episode_counts(outcomes, 99.0) == (30, 0)
