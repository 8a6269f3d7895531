"""Every launch file of the repository, and a corpus of one-feature files, resolved by both launchers.

The oracle is the real launch/launch_ros (installed from ../shared/oracles/ros2-launch, see
real_launch.py), run without starting processes. Each case must resolve identically (same
processes, commands, nodes, namespaces, typed parameters, remappings, environment, options) or be
refused by both. With `AMENT_PREFIX_PATH` = the venv alone, the real launcher must find every
`pkg`/`exec` of our files (lib/<pkg>/<exec>, installed by the setup).
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any

import pytest
from real_launch import (
    REPO,
    oracle_environment,
    resolve_many_with_real_launch,
    resolve_with_ours,
)

CORPUS = Path(__file__).with_name("corpus")
LAUNCH = REPO / "launch"
PKG_LAUNCH = REPO / "ros_ws" / "src"
CONTRACT = str(REPO / "config" / "contracts" / "so101.yaml")
ROBOT_CONFIG = str(REPO / "config" / "robots" / "so101.yaml")

# (file, arguments): defaults, fake hardware on/off, and each documented option.
REPOSITORY_CASES: list[tuple[Path, dict[str, str]]] = [
    (PKG_LAUNCH / "lerobot_ros/launch/talker.launch.yaml", {}),
    (
        PKG_LAUNCH / "lerobot_ros/launch/talker.launch.yaml",
        {"namespace": "demo2", "message": "hi there", "rate_hz": "5.0"},
    ),
    (PKG_LAUNCH / "lerobot_drivers/launch/arm.launch.yaml", {}),
    (PKG_LAUNCH / "lerobot_drivers/launch/arm.launch.yaml", {"fake_hardware": "true"}),
    (
        PKG_LAUNCH / "lerobot_drivers/launch/arm.launch.yaml",
        {
            "robot": "koch_leader",
            "namespace": "leader",
            "fake_hardware": "true",
            "calibration": "/tmp/cal.json",
            "loop_rate": "50",
            "max_relative_target": "0.1",
            "torque_off_on_shutdown": "false",
            "fake_dir": "/tmp/fakes",
        },
    ),
    (PKG_LAUNCH / "lerobot_drivers/launch/so101_follower.launch.yaml", {}),
    (
        PKG_LAUNCH / "lerobot_drivers/launch/so101_follower.launch.yaml",
        {"fake_hardware": "true", "port": "/dev/ttyUSB3"},
    ),
    (
        PKG_LAUNCH / "lerobot_policy_node/launch/policy.launch.yaml",
        {"checkpoint": "scripted", "robot_config": ROBOT_CONFIG},
    ),
    (
        PKG_LAUNCH / "lerobot_policy_node/launch/policy.launch.yaml",
        {
            "checkpoint": "user/act_so101",
            "robot_config": ROBOT_CONFIG,
            "contract": CONTRACT,
            "namespace": "arm2",
            "device": "cuda",
            "task": "pick the cube",
            "output": "joint_commands",
            "output_topic": "/arm_controller/joint_trajectory",
            "blend": "ensemble",
            "rate": "50.0",
            "max_velocity": "2",
            "threshold": "0.25",
            "max_observation_age": "0.1",
            "inference_workers": "2",
            "use_sim_time": "true",
        },
    ),
    (LAUNCH / "already_running.launch.yaml", {}),
    (LAUNCH / "so101.launch.yaml", {}),
    (LAUNCH / "so101.launch.yaml", {"fake_hardware": "true"}),
    (
        LAUNCH / "so101.launch.yaml",
        {"fake_hardware": "true", "teleop": "false", "cameras": "false", "fake_dir": "/tmp/f"},
    ),
    (LAUNCH / "koch.launch.yaml", {}),
    (LAUNCH / "koch.launch.yaml", {"fake_hardware": "true", "robot_config": str(REPO / "config/robots/koch.yaml")}),
    (
        LAUNCH / "arms_stack.launch.yaml",
        {"robot_config": ROBOT_CONFIG, "follower_type": "so101_follower", "leader_type": "so101_leader"},
    ),
    (LAUNCH / "synthetic_streams.launch.yaml", {"contract": CONTRACT}),
    (LAUNCH / "record.launch.yaml", {"contract": CONTRACT, "root": "/tmp/data"}),
    (LAUNCH / "record.launch.yaml", {"contract": CONTRACT, "root": "/tmp/data", "synthetic": "true"}),
    (
        LAUNCH / "record.launch.yaml",
        {
            "contract": CONTRACT,
            "root": "/tmp/data",
            "robot_launch": str(LAUNCH / "so101.launch.yaml"),
            "task": "pick the cube",
            "repo_id": "me/pick",
            "fps": "15",
            "episode_time_s": "20",
            "reset_time_s": "5.0",
            "num_episodes": "10",
            "resume": "true",
            "video": "false",
            "video_codec": "h264",
            "push_to_hub": "true",
            "private": "true",
            "start_session": "false",
        },
    ),
    (LAUNCH / "so101_record.launch.yaml", {"root": "/tmp/pick"}),
    (LAUNCH / "so101_record.launch.yaml", {"root": "/tmp/pick", "fake_hardware": "true", "num_episodes": "1"}),
    (LAUNCH / "sim.launch.yaml", {}),
    (
        LAUNCH / "sim.launch.yaml",
        {
            "mode": "lockstep",
            "env_id": "pusht",
            "fps": "10",
            "cameras": "top:96x96",
            "seed": "-1",
            "auto_reset": "true",
        },
    ),
    (LAUNCH / "sim.launch.yaml", {"cameras": ""}),
    (LAUNCH / "sim_teleop.launch.yaml", {}),
    (LAUNCH / "sim_teleop.launch.yaml", {"mode": "lockstep", "episodes": "20", "hold_ticks": "3"}),
    (LAUNCH / "sim_policy.launch.yaml", {"checkpoint": "scripted"}),
    (LAUNCH / "sim_policy.launch.yaml", {"checkpoint": "outputs/act", "mode": "fast", "use_sim_time": "true"}),
    (LAUNCH / "sim_record.launch.yaml", {"root": "/tmp/sim"}),
    (LAUNCH / "sim_record.launch.yaml", {"root": "/tmp/sim", "num_episodes": "5", "resume": "true", "seed": "3"}),
]


def _corpus_cases() -> list[Path]:
    return sorted(CORPUS.glob("*.launch.yaml"))


def _corpus_arguments(path: Path) -> dict[str, str]:
    """`# args: a:=1 b:=2` on the first line of a corpus file gives its command-line arguments."""
    first = path.read_text().splitlines()[0]
    if not first.startswith("# args:"):
        return {}
    return dict(argument.split(":=", 1) for argument in first[len("# args:") :].split())


CORPUS_CASES = [(path, _corpus_arguments(path)) for path in _corpus_cases()]


@pytest.fixture(scope="module")
def workdir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("resolve")


@pytest.fixture(scope="module")
def environment(oracle: Path, workdir: Path) -> dict[str, str]:
    base = {k: v for k, v in os.environ.items() if not k.startswith(("ROS_", "AMENT_", "PYTEST_"))}
    base["ROS_LOG_DIR"] = str(workdir / "ros-log")
    return oracle_environment(oracle, base)


@pytest.fixture(scope="module")
def real_results(oracle: Path, environment: dict[str, str], workdir: Path) -> dict[str, dict[str, Any]]:
    """The oracle's resolution of every case, in one process; keyed by case id."""
    cases = [*REPOSITORY_CASES, *CORPUS_CASES]
    results = resolve_many_with_real_launch(oracle, [(f, a, workdir) for f, a in cases], environment)
    return {_case_id(case): result for case, result in zip(cases, results, strict=True)}


def _case_id(case: tuple[Path, dict[str, str]]) -> str:
    path, arguments = case
    name = path.name.replace(".launch.yaml", "")
    return name + ("-" + "-".join(f"{k}={v}" for k, v in arguments.items()) if arguments else "")


@pytest.mark.parametrize("case", REPOSITORY_CASES, ids=[_case_id(c) for c in REPOSITORY_CASES])
def test_repository_launch_file_resolves_like_ros2_launch(case, environment, real_results, workdir) -> None:  # type: ignore[no-untyped-def]
    launch_file, arguments = case
    real = real_results[_case_id(case)]
    assert real["ok"], f"ros2 launch refuses {launch_file.name}: {real['error']}"
    assert resolve_with_ours(launch_file, arguments, environment, workdir) == real


# Launch files using grammar newer than the oracle's launch 3.7.1 (`for`, launch >= 3.8, which Kilted has): the oracle
# cannot resolve them, so they are tested on our side only, where named.
NEWER_THAN_ORACLE = {
    LAUNCH / "sim_policy_robots.launch.yaml": "tests/lerobot_eval/test_ros_parallel_eval.py (its plan per robot)",
}


def test_every_repository_launch_file_has_a_case() -> None:
    # resolve(): lerobot_ros installs the top-level launch files through links in its launch/ (one file, two paths).
    files = {p.resolve() for p in (*LAUNCH.glob("*.launch.yaml"), *PKG_LAUNCH.glob("*/launch/*.launch.yaml"))}
    covered = {path.resolve() for path, _ in REPOSITORY_CASES} | {p.resolve() for p in NEWER_THAN_ORACLE}
    assert files - covered == set()
    for path, test in NEWER_THAN_ORACLE.items():
        assert "for:" in path.read_text(), f"{path.name} needs no newer grammar: give it an oracle case"
        assert path.name in (REPO / test.split()[0]).read_text(), f"{test} does not test {path.name}"


def test_the_venv_alone_is_enough_for_the_real_launcher(oracle: Path, workdir: Path) -> None:
    """AMENT_PREFIX_PATH = the venv (plus the oracle's own prefix): every pkg/exec of our files resolves."""
    env = oracle_environment(oracle, {"PATH": os.environ["PATH"], "HOME": os.environ.get("HOME", "/root")})
    env["ROS_LOG_DIR"] = str(workdir / "ros-log-venv")
    results = resolve_many_with_real_launch(oracle, [(f, a, workdir) for f, a in REPOSITORY_CASES], env)
    seen = set()
    for (launch_file, arguments), real in zip(REPOSITORY_CASES, results, strict=True):
        assert real["ok"], f"{launch_file.name} {arguments}: {real['error']}"
        for process in real["processes"]:
            if process["kind"] == "node":
                seen.add((process["package"], process["executable"]))
                assert Path(process["cmd"][0]).is_relative_to(Path(sys.prefix) / "lib" / process["package"])
    assert len(seen) >= 10, seen


@pytest.mark.parametrize("case", CORPUS_CASES, ids=[_case_id(c) for c in CORPUS_CASES])
def test_corpus_file_resolves_like_ros2_launch_or_both_refuse(case, environment, real_results, workdir) -> None:  # type: ignore[no-untyped-def]
    launch_file, arguments = case
    real = real_results[_case_id(case)]
    ours = resolve_with_ours(launch_file, arguments, environment, workdir)
    expect_refusal = launch_file.name.startswith("refused_")
    assert real["ok"] is not expect_refusal, f"ros2 launch: {real}"
    if expect_refusal:
        assert not ours["ok"], f"lerobot-ros launch accepts what ros2 launch refuses ({real['error']})"
        message = ours["error"]
        assert "\n" not in message
        assert message.startswith(f"{launch_file}:")  # FILE:LINE: ...
    else:
        assert ours == real
