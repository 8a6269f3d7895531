"""Shared setup of the evaluation and demo tests: headless MuJoCo rendering for the simulations they run."""

import os

import pytest

# Before mujoco is imported anywhere in the test process: software EGL (Mesa), no display needed.
os.environ.setdefault("MUJOCO_GL", "egl")


@pytest.fixture
def sim_env(ros_env: dict[str, str]) -> dict[str, str]:
    """Environment for the demo's subprocesses: the test's ROS domain plus headless EGL."""
    env = dict(ros_env)
    env["MUJOCO_GL"] = "egl"
    env["PYTHONUNBUFFERED"] = "1"
    return env
