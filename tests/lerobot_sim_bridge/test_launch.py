"""The launch files, run through `lerobot-ros launch`."""

from pathlib import Path

import pytest

from lerobot_ros.testing import venv_script

REPO = Path(__file__).resolve().parents[2]


def test_sim_launch_resolves_to_the_bridge_executable_in_lib_package(processes, sim_env):
    launcher = processes.start(
        [
            venv_script("lerobot-ros"),
            "launch",
            "--print",
            str(REPO / "launch/sim.launch.yaml"),
            "cameras:=front:64x48,wrist:64x48",
        ],
        env=sim_env,
    )
    assert launcher.wait(timeout=60) == 0, launcher.output()
    output = launcher.output()
    assert "/lib/lerobot_sim_bridge/sim_bridge --ros-args" in output and "__ns:=/follower" in output
    assert "cameras: front:64x48,wrist:64x48" in output and "MUJOCO_GL=egl" in output


@pytest.mark.ros
def test_sim_teleop_launch_runs_an_expert_episode_and_stops(processes, sim_env, tmp_path):
    launcher = processes.start(
        [
            venv_script("lerobot-ros"),
            "launch",
            "--log-dir",
            str(tmp_path / "launch_logs"),
            str(REPO / "launch/sim_teleop.launch.yaml"),
            "mode:=lockstep",
            "episodes:=1",
            "cameras:=front:64x48",
        ],
        env=sim_env,
    )
    launcher.wait_for_output(r"scripted expert done: 1/1 episodes successful", timeout=180)
    # The expert is required (on_exit: shutdown): when it is done, the launch stops the bridge and exits 0.
    assert launcher.wait(timeout=60) == 0, launcher.output()
