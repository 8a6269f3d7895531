"""SO-100 and SO-101 arms (TheRobotStudio / Hugging Face): six Feetech STS3215 servos, ids 1-6.

Joint names, ids and motor settings follow LeRobot's `robots/so_follower` and `teleoperators/so_leader`.
Body joints are reported by LeRobot in degrees (with `use_degrees=True`, which this stack's contracts use)
and the gripper in 0..100.
"""

from __future__ import annotations

from lerobot_drivers.arms.spec import JOINT_NAMES, ArmSpec, JointSpec
from lerobot_drivers.motors.bus import MotorBus
from lerobot_drivers.motors.calibration import NormMode
from lerobot_drivers.motors.feetech.tables import MODE_POSITION

SO_JOINTS = tuple(
    JointSpec(
        name,
        motor_id=i + 1,
        model="sts3215",
        norm_mode=NormMode.RANGE_0_100 if name == "gripper" else NormMode.DEGREES,
        full_turn=name == "wrist_roll",
    )
    for i, name in enumerate(JOINT_NAMES)
)


def _configure_common(bus: MotorBus) -> None:
    for motor in bus.motors:
        bus.write("Torque_Enable", motor, 0)
        bus.write("Lock", motor, 0)  # unlock the EEPROM area, as LeRobot does when it disables torque
        bus.write("Return_Delay_Time", motor, 0)
        bus.write("Maximum_Acceleration", motor, 254)
        bus.write("Acceleration", motor, 254)
        bus.write("Operating_Mode", motor, MODE_POSITION)


def configure_so_follower(bus: MotorBus) -> None:
    """LeRobot's SO follower settings: lower P gain against shaking, gripper torque and current limited."""
    _configure_common(bus)
    for motor in bus.motors:
        bus.write("P_Coefficient", motor, 16)
        bus.write("I_Coefficient", motor, 0)
        bus.write("D_Coefficient", motor, 32)
        if motor == "gripper":
            bus.write("Max_Torque_Limit", motor, 500)
            bus.write("Protection_Current", motor, 250)
            bus.write("Overload_Torque", motor, 25)


def configure_so_leader(bus: MotorBus) -> None:
    """LeRobot's SO leader settings: position mode, torque off (moved by hand)."""
    _configure_common(bus)


def _so(robot_type: str, role: str) -> ArmSpec:
    return ArmSpec(
        robot_type=robot_type,
        role="follower" if role == "follower" else "leader",
        family="feetech",
        joints=SO_JOINTS,
        configure=configure_so_follower if role == "follower" else configure_so_leader,
        calibration_mode=MODE_POSITION,
    )


SO100_FOLLOWER = _so("so100_follower", "follower")
SO101_FOLLOWER = _so("so101_follower", "follower")
SO100_LEADER = _so("so100_leader", "leader")
SO101_LEADER = _so("so101_leader", "leader")
