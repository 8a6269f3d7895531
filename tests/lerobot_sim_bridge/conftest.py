"""Shared setup of the sim bridge tests: headless MuJoCo (subprocesses: fixture `sim_env` of lerobot_ros.testing)."""

import os

# Before mujoco is imported anywhere in the test process: software EGL (Mesa), no display needed.
os.environ.setdefault("MUJOCO_GL", "egl")
