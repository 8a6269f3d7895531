"""Test-suite wide setup: the ROS graph harness (fixtures `ros_domain`, `ros_env`, `processes`, `ros_node`)."""

from pathlib import Path

pytest_plugins = ["lerobot_ros.testing"]

REPO_ROOT = Path(__file__).resolve().parent.parent
