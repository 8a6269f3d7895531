"""Keyboard teleoperation from a terminal (works over SSH): joint jog of the follower plus the recorder's keys.

Jog keys (`teleop.jog`): 1-6 select a joint, w/+ and s/- move it by `step` rad, ] and [ double/halve the
step, 0 puts the targets back at the measured position. Recorder keys (as `lerobot-record`): right arrow / n
saves the episode, left arrow / r re-records it, Esc / q stops; they call the recorder's Trigger services.
Targets start at the arm's measured position and are streamed on `<follower>/joint_commands` at `rate`.
"""

from __future__ import annotations

import os
import select
import sys
from dataclasses import dataclass
from typing import Any

from rclpy.executors import Executor
from rclpy.node import Node
from rclpy.qos import QoSProfile, ReliabilityPolicy
from sensor_msgs.msg import JointState
from std_srvs.srv import Trigger

from lerobot_drivers.arms import get_arm
from lerobot_drivers.teleop.jog import JOG_HELP, JogAction, JogKeys, JointJog
from lerobot_ros.node_kit.parameters import param
from lerobot_ros.node_kit.ros import declare_parameters
from lerobot_ros.node_main import StopRequest, run_node
from lerobot_ros.terminal_keys import HELP, SERVICES, Control, cbreak

QOS = QoSProfile(depth=10, reliability=ReliabilityPolicy.RELIABLE)
ESC_TIMEOUT_S = 0.05


@dataclass(frozen=True)
class KeyboardTeleopParameters:
    """The keyboard teleop node's parameters (README table: `python -m lerobot_ros.node_kit markdown <this>`)."""

    robot_type: str = param("so101_follower", "LeRobot robot type of the arm")
    follower_namespace: str = param("/follower", "namespace of the arm driver")
    step: float = param(0.05, "jog step (rad)")
    rate: float = param(20.0, "joint_commands rate (Hz)")
    tty: str = param("", "terminal to read keys from; empty = this process's stdin")
    recorder: str = param("/recorder", "recorder node whose services the episode keys call")


class KeyboardTeleop(Node):
    """Turns key presses into joint targets and recorder service calls."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__("keyboard_teleop", **kwargs)
        config = declare_parameters(self, KeyboardTeleopParameters).config
        robot = get_arm(config.robot_type)
        follower = config.follower_namespace.rstrip("/")
        step, rate = config.step, config.rate
        self.tty = config.tty
        recorder = config.recorder.rstrip("/")
        n = len(robot.joint_names)
        self.jog = JointJog(robot.joint_names, step, [-3.2] * n, [3.2] * n)
        self.keys = JogKeys()
        self._commands = self.create_publisher(JointState, f"{follower}/joint_commands", QOS)
        self.create_subscription(JointState, f"{follower}/joint_states", self._on_state, QOS)
        self._triggers: dict[Control, Any] = {
            c: self.create_client(Trigger, f"{recorder}/{name}") for c, name in SERVICES.items()
        }
        self.create_timer(1.0 / rate, self._publish)

    def _on_state(self, msg: JointState) -> None:
        order = {name: i for i, name in enumerate(msg.name)}
        if all(n in order for n in self.jog.joint_names):
            self.jog.measure([msg.position[order[n]] for n in self.jog.joint_names])

    def _publish(self) -> None:
        if self.jog.targets is None:
            return
        msg = JointState(name=list(self.jog.joint_names), position=self.jog.targets.tolist())
        msg.header.stamp = self.get_clock().now().to_msg()
        self._commands.publish(msg)

    def on_bytes(self, data: bytes | None) -> None:
        """Handle terminal input (None: nothing came for a while)."""
        actions: list[JogAction] = []
        if data is None:
            controls = self.keys.flush()
        else:
            controls, actions = self.keys.feed(data)
        for action in actions:
            text = self.jog.apply(action)
            if text:
                self.get_logger().info(text)
        for control in controls:
            self._send(control)

    def _send(self, control: Control) -> None:
        client = self._triggers[control]
        if not client.service_is_ready():
            self.get_logger().warning(f"{client.srv_name} is not available (is the recorder running?)")
            return
        future = client.call_async(Trigger.Request())

        def done(f: Any) -> None:
            self.get_logger().info(f"{control.value}: {f.result().message}")

        future.add_done_callback(done)


def run(node: KeyboardTeleop, executor: Executor, stop: StopRequest) -> int:
    """Read keys from the node's terminal (in cbreak mode) and spin it until stopped or the terminal closes."""
    fd = os.open(node.tty, os.O_RDWR | os.O_NOCTTY) if node.tty else sys.stdin.fileno()
    try:
        if not os.isatty(fd):
            node.get_logger().fatal("keyboard_teleop reads keys from a terminal; run it in one (ssh -t works)")
            return 2
        node.get_logger().info(f"keys: {JOG_HELP} | {HELP}")
        with cbreak(fd):
            while not stop.is_set():
                ready, _, _ = select.select([fd], [], [], ESC_TIMEOUT_S)
                if ready:
                    data = os.read(fd, 64)
                    if not data:
                        break  # the terminal closed
                    node.on_bytes(data)
                else:
                    node.on_bytes(None)
                executor.spin_once(timeout_sec=0)
        return 0
    finally:
        if node.tty:
            os.close(fd)


def main(args: list[str] | None = None) -> int:
    return run_node(KeyboardTeleop, "keyboard_teleop", args=args, loop=run)


if __name__ == "__main__":
    sys.exit(main())
