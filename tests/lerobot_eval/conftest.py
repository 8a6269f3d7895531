"""Shared setup of the evaluation and demo tests: headless MuJoCo rendering (subprocesses: fixture `sim_env`)."""

import os

# Before mujoco is imported anywhere in the test process: software EGL (Mesa), no display needed.
os.environ.setdefault("MUJOCO_GL", "egl")
