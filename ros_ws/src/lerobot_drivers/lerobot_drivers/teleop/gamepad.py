"""Gamepad state -> jog velocities, in joint space or end-effector space.

Axes and buttons follow SDL's layout of an Xbox-style pad on Linux (`pygame.joystick`): axes 0/1 left stick
x/y, 2 left trigger, 3/4 right stick x/y, 5 right trigger (triggers rest at -1); buttons 0 A, 1 B, 4 LB, 5 RB.

joint mode: left x -> shoulder_pan, left y -> shoulder_lift, right y -> elbow_flex, right x -> wrist_flex,
LB/RB -> wrist_roll, triggers -> gripper (right opens, left closes).
end-effector mode: left stick -> tip x/y, right y -> tip z (stick up = up), LB/RB -> wrist_roll, triggers ->
gripper. Button A toggles the mode, B puts the targets back at the measured position.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import numpy.typing as npt

from lerobot_drivers.teleop.jog import JogAction, JointJog
from lerobot_drivers.teleop.kinematics import IK_JOINTS, ArmChain, ik_velocity_step

FloatArray = npt.NDArray[np.float64]

LEFT_X, LEFT_Y, LEFT_TRIGGER, RIGHT_X, RIGHT_Y, RIGHT_TRIGGER = range(6)
BUTTON_A, BUTTON_B, BUTTON_LB, BUTTON_RB = 0, 1, 4, 5
TRIGGERS = (LEFT_TRIGGER, RIGHT_TRIGGER)
MODES = ("joint", "ee")


@dataclass(frozen=True)
class GamepadConfig:
    """Speeds at full deflection and the stick dead zone."""

    deadzone: float = 0.12
    joint_speed: float = 1.0  # rad/s
    linear_speed: float = 0.08  # m/s
    gripper_speed: float = 2.0  # rad/s

    def __post_init__(self) -> None:
        if not 0 <= self.deadzone < 1:
            raise ValueError(f"deadzone must be in [0, 1), got {self.deadzone}")
        for name in ("joint_speed", "linear_speed", "gripper_speed"):
            if getattr(self, name) <= 0:
                raise ValueError(f"{name} must be > 0, got {getattr(self, name)}")


@dataclass
class GamepadState:
    """Latest axis values and held buttons, updated from events; `pressed` collects new presses."""

    axes: dict[int, float] = field(default_factory=lambda: {LEFT_TRIGGER: -1.0, RIGHT_TRIGGER: -1.0})
    held: set[int] = field(default_factory=set)
    pressed: list[int] = field(default_factory=list)

    def axis_motion(self, axis: int, value: float) -> None:
        self.axes[axis] = max(-1.0, min(1.0, float(value)))

    def button(self, button: int, down: bool) -> None:
        if down:
            self.held.add(button)
            self.pressed.append(button)
        else:
            self.held.discard(button)

    def take_presses(self) -> list[int]:
        out, self.pressed = self.pressed, []
        return out

    def stick(self, axis: int, deadzone: float) -> float:
        """A stick axis with the dead zone removed and the rest rescaled to -1..1."""
        value = self.axes.get(axis, 0.0)
        if abs(value) <= deadzone:
            return 0.0
        return float(np.sign(value)) * (abs(value) - deadzone) / (1 - deadzone)

    def trigger(self, axis: int) -> float:
        """0 (released) .. 1 (fully pressed)."""
        return (self.axes.get(axis, -1.0) + 1.0) / 2.0


def _roll_and_gripper(state: GamepadState, cfg: GamepadConfig) -> tuple[float, float]:
    roll = (float(BUTTON_RB in state.held) - float(BUTTON_LB in state.held)) * cfg.joint_speed
    gripper = (state.trigger(RIGHT_TRIGGER) - state.trigger(LEFT_TRIGGER)) * cfg.gripper_speed
    return roll, gripper


def joint_velocities(state: GamepadState, cfg: GamepadConfig) -> FloatArray:
    """rad/s for shoulder_pan, shoulder_lift, elbow_flex, wrist_flex, wrist_roll, gripper."""
    s = cfg.joint_speed
    dz = cfg.deadzone
    roll, gripper = _roll_and_gripper(state, cfg)
    return np.array(
        [
            -state.stick(LEFT_X, dz) * s,  # stick right turns the arm right (negative about z)
            -state.stick(LEFT_Y, dz) * s,  # stick up (negative y) leans the arm forward
            -state.stick(RIGHT_Y, dz) * s,
            state.stick(RIGHT_X, dz) * s,
            roll,
            gripper,
        ]
    )


def tip_velocity(state: GamepadState, cfg: GamepadConfig) -> tuple[FloatArray, float, float]:
    """(tip velocity xyz in m/s, wrist_roll rad/s, gripper rad/s) in end-effector mode."""
    v = cfg.linear_speed
    dz = cfg.deadzone
    roll, gripper = _roll_and_gripper(state, cfg)
    xyz = np.array([-state.stick(LEFT_Y, dz) * v, -state.stick(LEFT_X, dz) * v, -state.stick(RIGHT_Y, dz) * v])
    return xyz, roll, gripper


class GamepadJog:
    """Integrates the pad's velocities into the targets of a `JointJog` (joint order of the SO/Koch arms)."""

    def __init__(self, jog: JointJog, cfg: GamepadConfig, chain: ArmChain, mode: str = "joint") -> None:
        if mode not in MODES:
            raise ValueError(f"mode must be one of {', '.join(MODES)}, got {mode!r}")
        if len(jog.joint_names) != 6:
            raise ValueError(f"gamepad jogging needs the 6 joints of an SO/Koch arm, got {list(jog.joint_names)}")
        self.jog = jog
        self.cfg = cfg
        self.chain = chain
        self.mode = mode
        self.state = GamepadState()

    def tick(self, dt: float) -> list[str]:
        """Advance the targets by `dt` s of the current pad state; returns messages for the user."""
        messages = []
        for button in self.state.take_presses():
            if button == BUTTON_A:
                self.mode = "ee" if self.mode == "joint" else "joint"
                messages.append(f"mode: {self.mode}")
            elif button == BUTTON_B:
                messages.append(self.jog.apply(JogAction("resync")))
        targets = self.jog.targets
        if targets is None:
            return messages
        if self.mode == "joint":
            self.jog.move_all(joint_velocities(self.state, self.cfg) * dt)
            return messages
        xyz, roll, gripper = tip_velocity(self.state, self.cfg)
        deltas = np.zeros(6)
        if np.any(xyz):
            deltas[:IK_JOINTS] = ik_velocity_step(self.chain, targets, xyz, dt)
        deltas[4], deltas[5] = roll * dt, gripper * dt
        self.jog.move_all(deltas)
        return messages
