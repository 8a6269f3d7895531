"""Fixtures for the introspection command tests: the `lerobot-ros` CLI as a subprocess, a talker."""

from __future__ import annotations

import os
import subprocess
import time
from collections.abc import Callable, Mapping

import pytest

from lerobot_ros.testing import ManagedProcess, venv_script, wait_for_node, wait_for_topic


class Cli:
    """Runs `lerobot-ros` in a given environment and returns the completed process."""

    def __init__(self, env: Mapping[str, str]) -> None:
        self.env = dict(env)

    def run(self, *args: str, timeout: float = 60.0) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [venv_script("lerobot-ros"), *args],
            env=self.env,
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
        )

    def run_until(
        self, done: Callable[[str], bool], *args: str, timeout: float = 30.0
    ) -> subprocess.CompletedProcess[str]:
        """Rerun a listing command until its output satisfies `done` (DDS discovery can take ~3 s here)."""
        deadline = time.monotonic() + timeout
        while True:
            result = self.run(*args)
            if result.returncode != 0 or done(result.stdout) or time.monotonic() > deadline:
                return result


@pytest.fixture
def cli(ros_env: dict[str, str]) -> Cli:
    return Cli(ros_env)


@pytest.fixture
def offline_cli() -> Cli:
    """The CLI for checks that fail before touching a ROS graph."""
    return Cli(os.environ)


@pytest.fixture
def talker_process(processes, ros_env, ros_node) -> ManagedProcess:
    """demo_talker publishing std_msgs/String on /x/chatter at 20 Hz; its topic and node already in the graph."""
    process = processes.start(
        [venv_script("demo_talker"), "--ros-args", "-r", "__ns:=/x", "-p", "rate_hz:=20.0"], name="talker", env=ros_env
    )
    wait_for_topic(ros_node, "/x/chatter")
    wait_for_node(ros_node, "/x/demo_talker")
    return process


@pytest.fixture
def talker(talker_process: ManagedProcess) -> str:
    """The talker's topic."""
    return "/x/chatter"
