"""How an arm is described: joints (LeRobot motor names), motor ids and models, and its motor setup."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Literal

from lerobot_drivers.motors.bus import Motor, MotorBus
from lerobot_drivers.motors.calibration import ExpectedMotor, NormMode
from lerobot_drivers.motors.dynamixel.tables import MODELS as DYNAMIXEL_MODELS
from lerobot_drivers.motors.feetech.tables import MODELS as FEETECH_MODELS
from lerobot_drivers.motors.tables import ModelInfo

Family = Literal["feetech", "dynamixel"]
JOINT_NAMES = ("shoulder_pan", "shoulder_lift", "elbow_flex", "wrist_flex", "wrist_roll", "gripper")


@dataclass(frozen=True)
class JointSpec:
    """One joint: LeRobot's motor name, id and model, how LeRobot normalises it, and whether it turns fully.

    `full_turn` joints get the range 0..resolution-1 at calibration instead of a recorded one.
    """

    name: str
    motor_id: int
    model: str
    norm_mode: NormMode
    full_turn: bool = False


@dataclass(frozen=True)
class ArmSpec:
    """An arm as LeRobot defines it.

    `configure` writes the motor settings LeRobot's `configure()` writes (with torque off). In leader mode
    the joints in `leader_torque_on` keep torque (Koch's gripper acts as a trigger) and are sent to
    `leader_goals` (LeRobot units).
    """

    robot_type: str
    role: Literal["follower", "leader"]
    family: Family
    joints: tuple[JointSpec, ...]
    configure: Callable[[MotorBus], None]
    calibration_mode: int
    drive_modes: Mapping[str, int] = field(default_factory=dict)
    leader_torque_on: tuple[str, ...] = ()
    leader_goals: Mapping[str, float] = field(default_factory=dict)
    baudrate: int = 1_000_000

    def __post_init__(self) -> None:
        names = [j.name for j in self.joints]
        if len(set(names)) != len(names):
            raise ValueError(f"{self.robot_type}: joint names must be unique, got {names}")
        for joint in self.joints:
            if joint.model not in self.model_table:
                raise ValueError(f"{self.robot_type}: joint {joint.name}: {joint.model} is not a {self.family} model")

    @property
    def model_table(self) -> Mapping[str, ModelInfo]:
        return FEETECH_MODELS if self.family == "feetech" else DYNAMIXEL_MODELS

    @property
    def calibration_kind(self) -> str:
        """LeRobot's calibration sub-directory: `robots` for followers, `teleoperators` for leaders."""
        return "robots" if self.role == "follower" else "teleoperators"

    @property
    def apply_drive_mode(self) -> bool:
        """LeRobot applies drive_mode in software on Feetech buses; Dynamixel servos apply it themselves."""
        return self.family == "feetech"

    @property
    def joint_names(self) -> tuple[str, ...]:
        return tuple(j.name for j in self.joints)

    def model(self, joint: str) -> ModelInfo:
        return self.model_table[self.joint(joint).model]

    def joint(self, name: str) -> JointSpec:
        for joint in self.joints:
            if joint.name == name:
                return joint
        raise KeyError(f"{self.robot_type} has no joint {name!r}; joints: {', '.join(self.joint_names)}")

    def motors(self) -> dict[str, Motor]:
        return {j.name: Motor(j.motor_id, j.model) for j in self.joints}

    def expected_calibration(self) -> dict[str, ExpectedMotor]:
        """What a calibration of this arm must match (ids, ranges the encoders can hold, homing offset limits)."""
        limit = 2047 if self.family == "feetech" else 1_044_479
        return {
            j.name: ExpectedMotor(
                id=j.motor_id, resolution=self.model_table[j.model].resolution, homing_offset_limit=limit
            )
            for j in self.joints
        }
