"""Gamepad teleoperation of a follower arm: joint or end-effector velocity jogging (`teleop.gamepad`).

The pad is read with pygame's SDL joystick API, headless (`SDL_VIDEODRIVER=dummy`: no display needed, works
over SSH); pads plugged in later are picked up (SDL device-added events). Targets start at the measured
position, move with the sticks at `rate` Hz and are streamed on `<follower>/joint_commands`.
"""

from __future__ import annotations

import os
import sys
from dataclasses import dataclass
from typing import Any

from rclpy.node import Node
from rclpy.qos import QoSProfile, ReliabilityPolicy
from sensor_msgs.msg import JointState

from lerobot_drivers.arms import get_arm
from lerobot_drivers.teleop.gamepad import GamepadConfig, GamepadJog, GamepadState
from lerobot_drivers.teleop.jog import JointJog
from lerobot_drivers.teleop.kinematics import ArmChain
from lerobot_ros.node_kit.parameters import param
from lerobot_ros.node_kit.ros import declare_parameters
from lerobot_ros.node_main import run_node

QOS = QoSProfile(depth=10, reliability=ReliabilityPolicy.RELIABLE)


def init_pygame() -> Any:
    """pygame's joystick subsystem without a window (SDL's dummy video driver)."""
    os.environ.setdefault("SDL_VIDEODRIVER", "dummy")
    os.environ.setdefault("PYGAME_HIDE_SUPPORT_PROMPT", "1")
    # joystick events arrive even when no window has focus
    os.environ.setdefault("SDL_JOYSTICK_ALLOW_BACKGROUND_EVENTS", "1")
    import pygame

    pygame.display.init()
    pygame.joystick.init()
    return pygame


def apply_events(pygame: Any, state: GamepadState, joysticks: dict[int, Any]) -> list[str]:
    """Drain pygame's event queue into `state`; opens pads as they appear. Returns messages for the user."""
    messages = []
    for event in pygame.event.get():
        if event.type == pygame.JOYAXISMOTION:
            state.axis_motion(event.axis, event.value)
        elif event.type in (pygame.JOYBUTTONDOWN, pygame.JOYBUTTONUP):
            state.button(event.button, event.type == pygame.JOYBUTTONDOWN)
        elif event.type == pygame.JOYDEVICEADDED:
            pad = pygame.joystick.Joystick(event.device_index)
            joysticks[pad.get_instance_id()] = pad
            messages.append(f"gamepad connected: {pad.get_name()}")
        elif event.type == pygame.JOYDEVICEREMOVED:
            joysticks.pop(event.instance_id, None)
            state.axes.clear()
            state.axes.update(GamepadState().axes)
            state.held.clear()
            messages.append("gamepad disconnected: holding")
    return messages


@dataclass(frozen=True)
class GamepadTeleopParameters:
    """The gamepad teleop node's parameters (README table: `python -m lerobot_ros.node_kit markdown <this>`)."""

    robot_type: str = param("so101_follower", "LeRobot robot type of the arm")
    follower_namespace: str = param("/follower", "namespace of the arm driver")
    mode: str = param("joint", "joint or ee (end-effector velocity through the arm's IK); button A toggles")
    rate: float = param(50.0, "integration and joint_commands rate (Hz)")
    deadzone: float = param(0.12, "stick dead zone (0..1)")
    joint_speed: float = param(1.0, "joint speed at full deflection (rad/s)")
    linear_speed: float = param(0.08, "tip speed at full deflection (m/s)")
    gripper_speed: float = param(2.0, "gripper speed at full trigger (rad/s)")


class GamepadTeleop(Node):
    """See the module docstring."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__("gamepad_teleop", **kwargs)
        config = declare_parameters(self, GamepadTeleopParameters).config
        robot = get_arm(config.robot_type)
        follower = config.follower_namespace.rstrip("/")
        mode = config.mode
        self.rate = config.rate
        cfg = GamepadConfig(
            deadzone=config.deadzone,
            joint_speed=config.joint_speed,
            linear_speed=config.linear_speed,
            gripper_speed=config.gripper_speed,
        )
        n = len(robot.joint_names)
        self.pad = GamepadJog(JointJog(robot.joint_names, 0.05, [-3.2] * n, [3.2] * n), cfg, ArmChain(), mode)
        self.pygame = init_pygame()
        self.joysticks: dict[int, Any] = {}
        self._commands = self.create_publisher(JointState, f"{follower}/joint_commands", QOS)
        self.create_subscription(JointState, f"{follower}/joint_states", self._on_state, QOS)
        self.create_timer(1.0 / self.rate, self._tick)
        self.get_logger().info(f"gamepad teleop ({mode} mode) on {follower}; waiting for a gamepad")

    def _on_state(self, msg: JointState) -> None:
        order = {name: i for i, name in enumerate(msg.name)}
        if all(n in order for n in self.pad.jog.joint_names):
            self.pad.jog.measure([msg.position[order[n]] for n in self.pad.jog.joint_names])

    def _tick(self) -> None:
        messages = apply_events(self.pygame, self.pad.state, self.joysticks)
        messages += self.pad.tick(1.0 / self.rate)
        for text in messages:
            if text:
                self.get_logger().info(text)
        targets = self.pad.jog.targets
        if targets is None:
            return
        msg = JointState(name=list(self.pad.jog.joint_names), position=targets.tolist())
        msg.header.stamp = self.get_clock().now().to_msg()
        self._commands.publish(msg)


def main(args: list[str] | None = None) -> int:
    return run_node(GamepadTeleop, "gamepad_teleop", args=args, shutdown=lambda node: node.pygame.quit())


if __name__ == "__main__":
    sys.exit(main())
