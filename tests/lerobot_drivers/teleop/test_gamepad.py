"""Gamepad jogging: stick mapping, the SO-101 IK, and pygame (SDL, headless) events injected into the node."""

from __future__ import annotations

import math
import threading
import time

import numpy as np
import pytest

from lerobot_drivers.teleop.gamepad import (
    BUTTON_A,
    BUTTON_B,
    BUTTON_RB,
    LEFT_TRIGGER,
    LEFT_X,
    LEFT_Y,
    RIGHT_TRIGGER,
    RIGHT_Y,
    GamepadConfig,
    GamepadJog,
    GamepadState,
    joint_velocities,
)
from lerobot_drivers.teleop.jog import JointJog
from lerobot_drivers.teleop.kinematics import ArmChain, ik_velocity_step

JOINTS = ["shoulder_pan", "shoulder_lift", "elbow_flex", "wrist_flex", "wrist_roll", "gripper"]


def make_pad(mode: str = "joint") -> GamepadJog:
    jog = JointJog(JOINTS, 0.05, [-3.0] * 6, [3.0] * 6)
    jog.measure([0.0, 0.0, 0.0, 0.3, 0.0, 0.0])
    return GamepadJog(jog, GamepadConfig(), ArmChain(), mode)


def test_sticks_dead_zone_and_triggers() -> None:
    state = GamepadState()
    cfg = GamepadConfig(deadzone=0.1, joint_speed=2.0, gripper_speed=1.0)
    np.testing.assert_allclose(joint_velocities(state, cfg), np.zeros(6))  # triggers at rest are released
    state.axis_motion(LEFT_X, 0.05)
    state.axis_motion(LEFT_Y, -1.0)
    state.axis_motion(RIGHT_TRIGGER, 1.0)
    state.button(BUTTON_RB, True)
    v = joint_velocities(state, cfg)
    np.testing.assert_allclose(v, [0.0, 2.0, 0.0, 0.0, 2.0, 1.0])
    state.axis_motion(LEFT_TRIGGER, 1.0)
    state.button(BUTTON_RB, False)
    assert joint_velocities(state, cfg)[4:] == pytest.approx([0.0, 0.0])
    with pytest.raises(ValueError, match="deadzone"):
        GamepadConfig(deadzone=1.0)


def test_ik_moves_the_tip_where_asked_and_stays_bounded_when_stretched() -> None:
    chain = ArmChain()
    q = np.array([0.3, 0.2, -0.4, 0.5, 0.0, 0.0])
    start = chain.forward(q)
    goal = start + np.array([0.03, -0.02, 0.04])
    for _ in range(200):
        error = goal - chain.forward(q)
        q[:4] += ik_velocity_step(chain, q, error / 0.05, 0.05)
    assert np.linalg.norm(goal - chain.forward(q)) < 1e-3
    stretched = np.array([0.0, 0.0, -math.pi / 2, 0.0, 0.0, 0.0])  # arm straight up: singular
    dq = ik_velocity_step(chain, stretched, np.array([0.0, 0.0, 1.0]), 0.05)
    assert np.all(np.abs(dq) <= 0.1) and np.all(np.isfinite(dq))


def test_joint_and_end_effector_modes() -> None:
    pad = make_pad()
    pad.state.axis_motion(RIGHT_Y, -1.0)
    for _ in range(10):
        pad.tick(0.02)
    assert pad.jog.targets is not None
    assert pad.jog.targets[2] == pytest.approx(10 * 0.02 * (1.0 - 0.0), rel=1e-6)  # elbow at joint_speed 1 rad/s
    pad.state.axis_motion(RIGHT_Y, 0.0)
    pad.state.button(BUTTON_B, True)  # targets back at the measured pose
    pad.state.button(BUTTON_A, True)  # end-effector mode
    assert pad.tick(0.02) == ["targets := measured position", "mode: ee"]
    chain = ArmChain()
    before = chain.forward(pad.jog.targets)
    pad.state.axis_motion(LEFT_Y, -1.0)  # stick up: tip forward (+x)
    for _ in range(25):
        pad.tick(0.02)
    moved = chain.forward(pad.jog.targets) - before
    assert moved[0] == pytest.approx(25 * 0.02 * 0.08, rel=0.1)
    assert abs(moved[1]) < 2e-3 and abs(moved[2]) < 2e-3


@pytest.mark.ros
def test_pygame_events_drive_the_node_headless(ros_node, monkeypatch) -> None:
    monkeypatch.setenv("SDL_VIDEODRIVER", "dummy")
    from sensor_msgs.msg import JointState

    from lerobot_drivers.nodes.gamepad_teleop import GamepadTeleop

    commands: list = []
    lock = threading.Lock()

    def on_command(msg) -> None:
        with lock:
            commands.append(list(msg.position))

    ros_node.create_subscription(JointState, "/follower/joint_commands", on_command, 10)
    node = GamepadTeleop(context=ros_node.context)
    try:
        pygame = node.pygame
        node._on_state(JointState(name=JOINTS, position=[0.0] * 6))
        pygame.event.post(pygame.event.Event(pygame.JOYAXISMOTION, joy=0, instance_id=0, axis=LEFT_X, value=1.0))
        pygame.event.post(pygame.event.Event(pygame.JOYBUTTONDOWN, joy=0, instance_id=0, button=BUTTON_RB))
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            node._tick()
            with lock:
                last = commands[-1] if commands else None
            if last is not None and last[0] < -0.2:
                break
            time.sleep(0.02)
        assert last is not None and last[0] < -0.2, last  # stick right: pan turns right (negative)
        assert last[4] > 0.2  # RB held: wrist_roll increases
        assert last[1:4] == pytest.approx([0.0, 0.0, 0.0])
    finally:
        node.destroy_node()
        node.pygame.quit()
