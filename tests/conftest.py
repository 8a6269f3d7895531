"""Test-suite wide setup: the ROS graph harness (fixtures `ros_domain`, `ros_env`, `processes`, `ros_node`), and the
opt-in marker `demo_e2e` (the tiny demo end to end, minutes): skipped unless the run selects it with
``-m demo_e2e`` or sets ``LEROBOT_ROS_DEMO_E2E=1`` (`make test-demo`)."""

import os
from pathlib import Path

import pytest

pytest_plugins = ["lerobot_ros.testing"]

REPO_ROOT = Path(__file__).resolve().parent.parent


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if os.environ.get("LEROBOT_ROS_DEMO_E2E") == "1" or "demo_e2e" in (config.option.markexpr or ""):
        return
    skip = pytest.mark.skip(reason="the tiny demo end to end (2-8 min): run `make test-demo` (or pytest -m demo_e2e)")
    for item in items:
        if item.get_closest_marker("demo_e2e") is not None:
            item.add_marker(skip)
