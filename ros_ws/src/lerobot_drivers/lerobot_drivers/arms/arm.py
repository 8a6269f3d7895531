"""An arm on its bus: connection checks, calibration on the motors, state in radians, goals in radians."""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from lerobot_drivers.arms.controller import ArmController, ControlOutput
from lerobot_drivers.arms.spec import ArmSpec
from lerobot_drivers.motors.bus import MotorBus
from lerobot_drivers.motors.calibration import (
    Calibration,
    MotorCalibration,
    radians_to_ticks,
    range_radians,
    ticks_to_radians,
    unnormalize,
    validate_calibration,
)
from lerobot_drivers.motors.dynamixel.bus import DynamixelBus
from lerobot_drivers.motors.feetech.bus import FeetechBus

FloatArray = npt.NDArray[np.float64]

# Registers read each cycle, as one contiguous block per family.
_STATE_BLOCK = {
    "feetech": ("Present_Position", "Present_Temperature"),
    "dynamixel": ("Present_PWM", "Present_Temperature"),
}
_VOLTAGE_REGISTER = {"feetech": "Present_Voltage", "dynamixel": "Present_Input_Voltage"}


@dataclass(frozen=True)
class ArmState:
    """One read of the arm. `stamp` is `time.time()` when the read finished."""

    stamp: float
    positions: FloatArray
    velocities: FloatArray
    efforts: FloatArray
    voltages: FloatArray
    temperatures: FloatArray
    errors: dict[str, int]
    ticks: dict[str, int]


def make_bus(
    spec: ArmSpec, port: str, *, baudrate: int | None = None, timeout_s: float = 0.05, retries: int = 2
) -> MotorBus:
    """The bus of `spec`'s family with its motors."""
    bus_class = FeetechBus if spec.family == "feetech" else DynamixelBus
    return bus_class(port, spec.motors(), baudrate=baudrate or spec.baudrate, timeout_s=timeout_s, retries=retries)


class Arm:
    """A connected arm. Positions in radians, in the order of `spec.joint_names`."""

    def __init__(self, spec: ArmSpec, bus: MotorBus, calibration: Calibration) -> None:
        validate_calibration(calibration, spec.expected_calibration(), spec.robot_type)
        self.spec = spec
        self.bus = bus
        self.calibration = calibration
        self.names = spec.joint_names
        self._resolution = {n: spec.model(n).resolution for n in self.names}

    def connect(self) -> None:
        """Open the port and check the motors (ids, models, baud rate); nothing is written."""
        self.bus.open()
        try:
            self.bus.verify_motors()
        except BaseException:
            self.bus.close()
            raise

    def close(self) -> None:
        self.bus.close()

    def limits(self) -> tuple[FloatArray, FloatArray]:
        """Calibrated range of motion of each joint, in radians."""
        ranges = [range_radians(self.calibration[n], self._resolution[n]) for n in self.names]
        return np.array([r[0] for r in ranges]), np.array([r[1] for r in ranges])

    def calibration_on_motors(self) -> dict[str, tuple[int, int, int]]:
        """(Homing_Offset, Min_Position_Limit, Max_Position_Limit) as stored in each motor."""
        offsets = self.bus.sync_read("Homing_Offset")
        mins = self.bus.sync_read("Min_Position_Limit")
        maxes = self.bus.sync_read("Max_Position_Limit")
        return {n: (offsets[n], mins[n], maxes[n]) for n in self.names}

    def write_calibration_if_needed(self) -> list[str]:
        """Write the file's calibration to the motors whose registers differ (torque off); returns those joints.

        As in LeRobot, the homing offset and the position limits live in the motors; a calibration file made
        by LeRobot for this arm therefore needs no further step.
        """
        with self.bus.patient():
            stored = self.calibration_on_motors()
            changed = []
            for name in self.names:
                cal = self.calibration[name]
                if stored[name] != (cal.homing_offset, cal.range_min, cal.range_max):
                    changed.append(name)
            if changed:
                self.set_torque(False, changed)
            for name in changed:
                cal = self.calibration[name]
                if self.spec.family == "dynamixel":
                    self.bus.write("Drive_Mode", name, cal.drive_mode)
                self.bus.write("Homing_Offset", name, cal.homing_offset)
                self.bus.write("Min_Position_Limit", name, cal.range_min)
                self.bus.write("Max_Position_Limit", name, cal.range_max)
            return changed

    def configure(self) -> None:
        """Write LeRobot's motor settings for this arm (leaves torque off)."""
        with self.bus.patient():
            self.spec.configure(self.bus)

    def read_state(self) -> ArmState:
        first, last = _STATE_BLOCK[self.spec.family]
        block = self.bus.sync_read_block(first, last, self.names)
        stamp = time.time()
        n = len(self.names)
        positions, velocities, efforts = np.empty(n), np.empty(n), np.empty(n)
        voltages, temperatures = np.empty(n), np.empty(n)
        ticks = {}
        voltage_register = _VOLTAGE_REGISTER[self.spec.family]
        for i, name in enumerate(self.names):
            model = self.spec.model(name)
            values = block.values[name]
            ticks[name] = values["Present_Position"]
            positions[i] = ticks_to_radians(values["Present_Position"], self.calibration[name], model.resolution)
            velocities[i] = values["Present_Velocity"] * model.velocity_unit_rad_s
            efforts[i] = values[model.effort_register]
            voltages[i] = values[voltage_register] / 10.0
            temperatures[i] = values["Present_Temperature"]
        errors = {name: err for name, err in block.errors.items() if err}
        return ArmState(stamp, positions, velocities, efforts, voltages, temperatures, errors, ticks)

    def goal_ticks(
        self, positions: Sequence[float] | FloatArray, joints: Sequence[str] | None = None
    ) -> dict[str, int]:
        names = self.names if joints is None else tuple(joints)
        return {
            name: radians_to_ticks(float(p), self.calibration[name], self._resolution[name])
            for name, p in zip(names, positions, strict=True)
        }

    def write_goal(
        self, positions: Sequence[float] | FloatArray, joints: Sequence[str] | None = None
    ) -> dict[str, int]:
        """Sync-write Goal_Position for `joints` (all by default); returns the ticks written."""
        goal = self.goal_ticks(positions, joints)
        self.bus.sync_write("Goal_Position", goal)
        return goal

    def set_torque(self, enabled: bool, joints: Sequence[str] | None = None) -> None:
        """Torque on or off; Feetech servos also lock their EEPROM with torque on, as LeRobot does."""
        for name in self.names if joints is None else joints:
            self.bus.write("Torque_Enable", name, 1 if enabled else 0)
            if self.spec.family == "feetech":
                self.bus.write("Lock", name, 1 if enabled else 0)

    def hold_and_enable_torque(self, joints: Sequence[str] | None = None) -> FloatArray:
        """Set each goal to the measured position, then enable torque: the arm cannot jump to a stale goal.

        Returns the measured positions (radians, all joints).
        """
        with self.bus.patient():
            state = self.read_state()
            names = list(self.names if joints is None else joints)
            self.bus.sync_write("Goal_Position", {n: state.ticks[n] for n in names})
            self.set_torque(True, names)
            return state.positions

    def apply_leader_setup(self) -> None:
        """Leader mode: torque off except the joints LeRobot keeps on, which go to their LeRobot goals."""
        with self.bus.patient():  # set-up, like the follower's configure and activate
            self.set_torque(False, [n for n in self.names if n not in self.spec.leader_torque_on])
            if not self.spec.leader_torque_on:
                return
            goals = {}
            for name in self.spec.leader_torque_on:
                joint = self.spec.joint(name)
                goal = self.spec.leader_goals.get(name)
                if goal is not None:
                    cal, resolution = self.calibration[name], self._resolution[name]
                    goals[name] = unnormalize(goal, cal, joint.norm_mode, resolution, self.spec.apply_drive_mode)
            self.hold_and_enable_torque(list(self.spec.leader_torque_on))
            if goals:
                self.bus.sync_write("Goal_Position", goals)


def write_target(
    arm: Arm, controller: ArmController, now: float, measured: Sequence[float] | FloatArray | None
) -> ControlOutput:
    """One goal write of the follower loop: the controller's target for `now`, sent to every joint.

    When the write fails the controller is told (`write_failed`), so that the next goal steps from the goal
    the motors still hold, not from the one that never arrived; the error is raised.
    """
    out = controller.update(now, measured)
    try:
        arm.write_goal(out.target)
    except BaseException:
        controller.write_failed()
        raise
    return out


def default_fake_calibration(spec: ArmSpec) -> Calibration:
    """A plausible calibration for fake hardware: homing 0, body joints over the middle half turn."""
    out: Calibration = {}
    for joint in spec.joints:
        top = spec.model(joint.name).resolution - 1
        low, high = (0, top) if joint.full_turn else (1024, 3072)
        out[joint.name] = MotorCalibration(
            id=joint.motor_id,
            drive_mode=spec.drive_modes.get(joint.name, 0),
            homing_offset=0,
            range_min=low,
            range_max=high,
        )
    return out
