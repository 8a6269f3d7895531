"""LeRobot's calibration procedure for an arm, independent of how the user is prompted.

1. torque off, calibration operating mode (and Koch's drive modes);
2. the user moves the arm to the middle of its range; homing offsets are set so that this pose reads
   half a turn (2047) on every motor;
3. the user moves every joint through its range while positions are recorded; full-turn joints
   (wrist_roll; Koch's shoulder_pan too) get the whole encoder range;
4. the calibration is written to the motors and returned (the caller saves the file).
"""

from __future__ import annotations

from typing import Protocol

from lerobot_drivers.arms.spec import ArmSpec
from lerobot_drivers.motors.bus import MotorBus
from lerobot_drivers.motors.calibration import Calibration, MotorCalibration
from lerobot_drivers.motors.errors import CalibrationError


class CalibrationPrompts(Protocol):
    """How the procedure talks to the user."""

    def wait(self, message: str) -> None:
        """Show `message` and return when the user is ready."""

    def show_ranges(self, mins: dict[str, int], positions: dict[str, int], maxes: dict[str, int]) -> bool:
        """Show the ranges recorded so far; return True when the user is done moving the joints."""


def reset_calibration(spec: ArmSpec, bus: MotorBus) -> None:
    """Torque off, calibration mode, homing offset 0 and full position limits on every motor."""
    for joint in spec.joints:
        bus.write("Torque_Enable", joint.name, 0)
        if spec.family == "feetech":
            bus.write("Lock", joint.name, 0)
        bus.write("Operating_Mode", joint.name, spec.calibration_mode)
        if spec.family == "dynamixel":
            bus.write("Drive_Mode", joint.name, spec.drive_modes.get(joint.name, 0))
        bus.write("Homing_Offset", joint.name, 0)
        bus.write("Min_Position_Limit", joint.name, 0)
        bus.write("Max_Position_Limit", joint.name, spec.model(joint.name).resolution - 1)


def half_turn_homings(spec: ArmSpec, positions: dict[str, int]) -> dict[str, int]:
    """Homing offsets that make `positions` read half a turn.

    Feetech: Present = Actual - Homing_Offset; Dynamixel: Present = Actual + Homing_Offset.
    """
    out = {}
    for name, pos in positions.items():
        half = (spec.model(name).resolution - 1) // 2
        out[name] = pos - half if spec.family == "feetech" else half - pos
    return out


def run_calibration(spec: ArmSpec, bus: MotorBus, prompts: CalibrationPrompts) -> Calibration:
    """Run the whole procedure on an open bus; returns the calibration written to the motors."""
    reset_calibration(spec, bus)
    prompts.wait(f"Move the {spec.robot_type} to the middle of its range of motion and press ENTER...")
    homings = half_turn_homings(spec, bus.sync_read("Present_Position"))
    for name, offset in homings.items():
        bus.write("Homing_Offset", name, offset)

    recorded = [j.name for j in spec.joints if not j.full_turn]
    start = bus.sync_read("Present_Position", recorded)
    mins, maxes = dict(start), dict(start)
    done = False
    while not done:
        positions = bus.sync_read("Present_Position", recorded)
        for name, pos in positions.items():
            mins[name] = min(mins[name], pos)
            maxes[name] = max(maxes[name], pos)
        done = prompts.show_ranges(mins, positions, maxes)
    still = [n for n in recorded if mins[n] == maxes[n]]
    if still:
        raise CalibrationError(
            f"joint(s) {', '.join(still)} did not move while recording; move every joint except the full-turn ones"
            " through its whole range before stopping"
        )

    calibration: Calibration = {}
    for joint in spec.joints:
        top = spec.model(joint.name).resolution - 1
        low, high = (0, top) if joint.full_turn else (mins[joint.name], maxes[joint.name])
        calibration[joint.name] = MotorCalibration(
            id=joint.motor_id,
            drive_mode=spec.drive_modes.get(joint.name, 0),
            homing_offset=homings[joint.name],
            range_min=low,
            range_max=high,
        )
    for name, cal in calibration.items():
        bus.write("Homing_Offset", name, cal.homing_offset)
        bus.write("Min_Position_Limit", name, cal.range_min)
        bus.write("Max_Position_Limit", name, cal.range_max)
    return calibration
