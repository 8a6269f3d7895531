"""Koch v1.1 arms: Dynamixel XL430/XL330 servos, ids 1-6, as in LeRobot's `koch_follower` / `koch_leader`.

Body joints run in extended-position mode, the gripper in current-based position mode. The leader keeps
torque on its gripper and sends it half open, so it springs back like a trigger.
"""

from __future__ import annotations

from lerobot_drivers.arms.spec import JOINT_NAMES, ArmSpec, JointSpec
from lerobot_drivers.motors.bus import MotorBus
from lerobot_drivers.motors.calibration import NormMode
from lerobot_drivers.motors.dynamixel.tables import MODE_CURRENT_POSITION, MODE_EXTENDED_POSITION

FOLLOWER_MODELS = ("xl430-w250", "xl430-w250", "xl330-m288", "xl330-m288", "xl330-m288", "xl330-m288")
FULL_TURN = ("shoulder_pan", "wrist_roll")


def _joints(models: tuple[str, ...]) -> tuple[JointSpec, ...]:
    return tuple(
        JointSpec(
            name,
            motor_id=i + 1,
            model=models[i],
            norm_mode=NormMode.RANGE_0_100 if name == "gripper" else NormMode.DEGREES,
            full_turn=name in FULL_TURN,
        )
        for i, name in enumerate(JOINT_NAMES)
    )


def _configure_modes(bus: MotorBus) -> None:
    for motor in bus.motors:
        bus.write("Torque_Enable", motor, 0)
        bus.write("Return_Delay_Time", motor, 0)
        mode = MODE_CURRENT_POSITION if motor == "gripper" else MODE_EXTENDED_POSITION
        bus.write("Operating_Mode", motor, mode)


def configure_koch_follower(bus: MotorBus) -> None:
    """LeRobot's Koch follower settings, including its elbow PID."""
    _configure_modes(bus)
    bus.write("Position_P_Gain", "elbow_flex", 1500)
    bus.write("Position_I_Gain", "elbow_flex", 0)
    bus.write("Position_D_Gain", "elbow_flex", 600)


def configure_koch_leader(bus: MotorBus) -> None:
    """LeRobot's Koch leader settings (the gripper torque is enabled by the driver in leader mode)."""
    _configure_modes(bus)


KOCH_FOLLOWER = ArmSpec(
    robot_type="koch_follower",
    role="follower",
    family="dynamixel",
    joints=_joints(FOLLOWER_MODELS),
    configure=configure_koch_follower,
    calibration_mode=MODE_EXTENDED_POSITION,
)

KOCH_LEADER = ArmSpec(
    robot_type="koch_leader",
    role="leader",
    family="dynamixel",
    joints=_joints(("xl330-m077",) * 6),
    configure=configure_koch_leader,
    calibration_mode=MODE_EXTENDED_POSITION,
    drive_modes={"elbow_flex": 1},
    leader_torque_on=("gripper",),
    leader_goals={"gripper": 50.0},
)
