"""Fake servo buses populated like a real arm: the arm's ids and models, its calibration in the motors."""

from __future__ import annotations

from collections.abc import Mapping

from lerobot_drivers.arms.spec import ArmSpec
from lerobot_drivers.fake.bus import FakeServoBus, make_bus, make_servos
from lerobot_drivers.fake.servo import Dynamics
from lerobot_drivers.motors.calibration import Calibration


def fake_arm_bus(
    spec: ArmSpec,
    calibration: Calibration | None = None,
    *,
    baudrate: int | None = None,
    positions: Mapping[str, float] | None = None,
    dynamics: Dynamics | None = None,
    models: Mapping[str, str] | None = None,
) -> FakeServoBus:
    """Servos for every joint of `spec`.

    With `calibration`, each servo holds its homing offset, limits and drive mode (as after LeRobot's
    calibration) and starts at the middle of its range unless `positions` (Present_Position ticks) says
    otherwise. `models` replaces the model of some joints (to simulate a wrong motor).
    """
    rate = baudrate or spec.baudrate
    motors = []
    for joint in spec.joints:
        model_name = (models or {}).get(joint.name, joint.model)
        motors.append((joint.motor_id, spec.model_table[model_name]))
    servos = make_servos(spec.family, motors, baudrate=rate, dynamics=dynamics)
    for joint, servo in zip(spec.joints, servos, strict=True):
        cal = calibration.get(joint.name) if calibration else None
        if cal is not None:
            servo.set("Homing_Offset", cal.homing_offset)
            servo.set("Min_Position_Limit", cal.range_min)
            servo.set("Max_Position_Limit", cal.range_max)
            if spec.family == "dynamixel":
                servo.set("Drive_Mode", cal.drive_mode)
            start = positions[joint.name] if positions and joint.name in positions else cal.middle
        else:
            start = positions[joint.name] if positions and joint.name in positions else servo.model.resolution / 2
        servo.physical = servo.physical_from_present(start)
        servo.set("Goal_Position", round(start))
        servo.step()
    return make_bus(spec.family, servos, rate)
