"""A launch file run as a process group, and an rclpy node in this process beside it (what the stages drive)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from lerobot_ros.command import CommandError
from lerobot_ros.parent_death import parent_death_signal


def installed_file(relative: str) -> Path:
    """A launch file or contract installed with lerobot_ros (`lerobot_ros.share`), CommandError when missing."""
    from lerobot_ros import share

    try:
        return share.find(relative)
    except share.ShareFileNotFoundError as err:
        raise CommandError(str(err)) from None


class LaunchedStack:
    """`lerobot-ros launch FILE args...` in its own process group, its output in `log`; stopped with the demo."""

    def __init__(self, launch_file: Path, arguments: dict[str, str], log: Path) -> None:
        from lerobot_ros.dds import ros_environment

        self.log = log
        env = ros_environment(dict(os.environ))
        env.setdefault("ROS_AUTOMATIC_DISCOVERY_RANGE", "LOCALHOST")
        env.setdefault("MUJOCO_GL", "egl")
        log.parent.mkdir(parents=True, exist_ok=True)
        argv = [sys.executable, "-m", "lerobot_ros.cli", "launch", str(launch_file)]
        argv += [f"{key}:={value}" for key, value in arguments.items()]
        with log.open("ab") as out:
            # SIGINT when the demo process dies, even by SIGKILL: the launcher stops its nodes in order, so a killed
            # demo never leaves a simulation and a policy running.
            self.process = subprocess.Popen(
                argv, env=env, stdout=out, stderr=subprocess.STDOUT, start_new_session=True,
                preexec_fn=parent_death_signal(signal.SIGINT),  # noqa: PLW1509 - one prctl call in the child
            )  # fmt: skip
        # This process joins the stack's graph: same domain and discovery range.
        for key in ("ROS_AUTOMATIC_DISCOVERY_RANGE", "ROS_DOMAIN_ID"):
            if key in env:
                os.environ[key] = env[key]

    @property
    def alive(self) -> bool:
        return self.process.poll() is None

    def tail(self, lines: int = 30) -> str:
        """The end of the stack's output (for error messages)."""
        try:
            text = self.log.read_text(errors="replace").splitlines()
        except OSError:
            return ""
        return "\n".join(text[-lines:])

    def stop(self) -> None:
        """SIGINT the launcher (it stops its nodes in order), SIGKILL the group if it lingers."""
        if self.process.poll() is None:
            os.killpg(self.process.pid, signal.SIGINT)
            try:
                self.process.wait(30)
            except subprocess.TimeoutExpired:
                os.killpg(self.process.pid, signal.SIGKILL)
                self.process.wait()


@contextmanager
def ros_node(name: str) -> Iterator[Any]:
    """An rclpy context and node in this process (DDS profile applied), shut down on exit."""
    import rclpy

    from lerobot_ros.dds import apply_ros_environment

    apply_ros_environment()
    rclpy.init()
    node = rclpy.create_node(name)
    try:
        yield node
    finally:
        node.destroy_node()
        rclpy.shutdown()


def spin_until(node: Any, done: Callable[[], bool], stack: LaunchedStack, timeout_s: float, what: str) -> None:
    """Spin `node` until `done()`; CommandError when the stack exits or `timeout_s` passes first."""
    import rclpy

    deadline = time.monotonic() + timeout_s
    while not done():
        if not stack.alive:
            raise CommandError(
                f"the sim stack exited (status {stack.process.returncode}) while {what}; its log ({stack.log}) ends "
                f"with:\n{stack.tail()}",
                exit_code=1,
            )
        if time.monotonic() > deadline:
            raise CommandError(f"timed out after {timeout_s:g} s while {what}; see {stack.log}", exit_code=1)
        rclpy.spin_once(node, timeout_sec=0.05)
