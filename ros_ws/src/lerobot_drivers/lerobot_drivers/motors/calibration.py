"""LeRobot motor calibration: the JSON file, LeRobot's normalised units, and the tick <-> radian mapping.

The file is LeRobot's own (`~/.cache/huggingface/lerobot/calibration/{robots,teleoperators}/<type>/<id>.json`):
one object per motor name with `id, drive_mode, homing_offset, range_min, range_max`, written with an
indent of 4 and no trailing newline, so a file read and written here stays byte-identical.

Radians on the ROS side: every joint, the gripper included, is a revolute joint whose zero is the middle of
its calibrated range, `rad = (ticks - (range_min + range_max) / 2) * 2π / (resolution - 1)`. This is LeRobot's
DEGREES normalisation expressed in radians, so body joints convert to LeRobot degrees by a constant factor,
and LeRobot's 0..100 / -100..100 values follow from the calibrated range (`radians_to_lerobot`).
Like LeRobot's DEGREES mode, the mapping ignores `drive_mode` (Dynamixel servos apply it themselves).
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from dataclasses import dataclass
from enum import Enum
from pathlib import Path

from lerobot_drivers.motors.errors import CalibrationError

CALIBRATION_FIELDS = ("id", "drive_mode", "homing_offset", "range_min", "range_max")


class NormMode(Enum):
    """LeRobot's `MotorNormMode`: how LeRobot presents a position to policies and datasets."""

    DEGREES = "degrees"
    RANGE_M100_100 = "range_m100_100"
    RANGE_0_100 = "range_0_100"


@dataclass(frozen=True)
class MotorCalibration:
    """LeRobot's `MotorCalibration` of one motor."""

    id: int
    drive_mode: int
    homing_offset: int
    range_min: int
    range_max: int

    @property
    def middle(self) -> float:
        """Middle of the calibrated range, in ticks: zero radians."""
        return (self.range_min + self.range_max) / 2


Calibration = dict[str, MotorCalibration]


def parse_calibration(text: str, source: str = "<string>") -> Calibration:
    """Parse LeRobot calibration JSON; CalibrationError names `source`, the motor and the bad field."""
    try:
        raw = json.loads(text)
    except json.JSONDecodeError as err:
        raise CalibrationError(f"{source}: not valid JSON ({err})") from None
    if not isinstance(raw, dict) or not raw:
        raise CalibrationError(f"{source}: expected an object of motor name -> calibration, got {type(raw).__name__}")
    calibration: Calibration = {}
    for motor, entry in raw.items():
        if not isinstance(entry, dict):
            raise CalibrationError(
                f"{source}: motor {motor!r}: expected an object with {', '.join(CALIBRATION_FIELDS)}"
            )
        missing = [f for f in CALIBRATION_FIELDS if f not in entry]
        extra = [f for f in entry if f not in CALIBRATION_FIELDS]
        if missing or extra:
            raise CalibrationError(
                f"{source}: motor {motor!r}: fields must be {', '.join(CALIBRATION_FIELDS)}"
                + (f"; missing {', '.join(missing)}" if missing else "")
                + (f"; unexpected {', '.join(extra)}" if extra else "")
            )
        for name in CALIBRATION_FIELDS:
            value = entry[name]
            if not isinstance(value, int) or isinstance(value, bool):
                raise CalibrationError(f"{source}: motor {motor!r}: {name} must be an integer, got {value!r}")
        calibration[motor] = MotorCalibration(**{f: int(entry[f]) for f in CALIBRATION_FIELDS})
    return calibration


def load_calibration(path: str | Path) -> Calibration:
    """Read a LeRobot calibration file."""
    path = Path(path)
    try:
        text = path.read_text()
    except FileNotFoundError:
        raise CalibrationError(
            f"calibration file {path} does not exist; run `lerobot-ros calibrate` or point at LeRobot's file"
        ) from None
    except OSError as err:
        raise CalibrationError(f"cannot read calibration file {path}: {err}") from None
    return parse_calibration(text, str(path))


def dumps_calibration(calibration: Mapping[str, MotorCalibration]) -> str:
    """Serialise exactly as LeRobot does (draccus JSON, indent 4, no trailing newline)."""
    data = {motor: {f: getattr(cal, f) for f in CALIBRATION_FIELDS} for motor, cal in calibration.items()}
    return json.dumps(data, indent=4)


def save_calibration(path: str | Path, calibration: Mapping[str, MotorCalibration]) -> None:
    """Write a LeRobot calibration file, creating its directory; the file is replaced atomically."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(dumps_calibration(calibration))
    tmp.replace(path)


@dataclass(frozen=True)
class ExpectedMotor:
    """What an arm expects of one motor, for validating a calibration against it."""

    id: int
    resolution: int
    homing_offset_limit: int


def validate_calibration(
    calibration: Mapping[str, MotorCalibration],
    expected: Mapping[str, ExpectedMotor],
    robot_type: str,
    source: str = "calibration",
) -> None:
    """Check that `calibration` belongs to this arm and holds values its motors can take.

    Raises CalibrationError saying what was found and what was expected.
    """
    found_names = set(calibration)
    wanted_names = set(expected)
    if found_names != wanted_names:
        raise CalibrationError(
            f"{source} is not a {robot_type} calibration: it has motors {sorted(found_names)},"
            f" {robot_type} has {sorted(wanted_names)}"
        )
    problems = []
    for motor, spec in expected.items():
        cal = calibration[motor]
        top = spec.resolution - 1
        if cal.id != spec.id:
            problems.append(f"{motor}: id {cal.id}, {robot_type} uses id {spec.id}")
        if cal.drive_mode not in (0, 1):
            problems.append(f"{motor}: drive_mode {cal.drive_mode}, expected 0 or 1")
        if abs(cal.homing_offset) > spec.homing_offset_limit:
            problems.append(f"{motor}: homing_offset {cal.homing_offset} outside ±{spec.homing_offset_limit}")
        if not 0 <= cal.range_min < cal.range_max <= top:
            problems.append(
                f"{motor}: range {cal.range_min}..{cal.range_max}, expected 0 <= range_min < range_max <= {top}"
            )
    if problems:
        raise CalibrationError(f"{source} does not fit {robot_type}: " + "; ".join(problems))


def check_calibration_location(path: str | Path, robot_type: str, kind: str) -> None:
    """Reject a file kept in LeRobot's layout for another robot (`.../<kind>/<robot_type>/<id>.json`).

    Files elsewhere are not judged by their location.
    """
    path = Path(path)
    parent, grandparent = path.parent.name, path.parent.parent.name
    if grandparent in ("robots", "teleoperators") and (parent, grandparent) != (robot_type, kind):
        raise CalibrationError(
            f"{path} is LeRobot's calibration of a {parent} ({grandparent}), not of a {robot_type} ({kind});"
            f" use a file from .../calibration/{kind}/{robot_type}/ or run `lerobot-ros calibrate --robot {robot_type}`"
        )


def ticks_per_radian(resolution: int) -> float:
    """Encoder ticks per radian, with LeRobot's convention that a full turn spans `resolution - 1` ticks."""
    return (resolution - 1) / (2 * math.pi)


def ticks_to_radians(ticks: float, calibration: MotorCalibration, resolution: int) -> float:
    """Position in radians (zero at the middle of the calibrated range) of a Present_Position value."""
    return (ticks - calibration.middle) / ticks_per_radian(resolution)


def radians_to_ticks(radians: float, calibration: MotorCalibration, resolution: int) -> int:
    """Goal_Position value for a position in radians; the exact inverse of `ticks_to_radians` on integers."""
    if not math.isfinite(radians):
        raise ValueError(f"cannot convert {radians} rad to ticks")
    return round(radians * ticks_per_radian(resolution) + calibration.middle)


def velocity_to_radians(ticks_per_s: float, unit_rad_s: float) -> float:
    """Velocity in rad/s from a Present_Velocity value and the model's velocity unit."""
    return ticks_per_s * unit_rad_s


def range_radians(calibration: MotorCalibration, resolution: int) -> tuple[float, float]:
    """The calibrated range of motion in radians (lower, upper)."""
    return (
        ticks_to_radians(calibration.range_min, calibration, resolution),
        ticks_to_radians(calibration.range_max, calibration, resolution),
    )


def contract_range(
    calibration: MotorCalibration, mode: NormMode, resolution: int, apply_drive_mode: bool
) -> tuple[tuple[float, float], tuple[float, float]]:
    """`(in, out)` of a contract `range` converter that turns this driver's radians into LeRobot's value.

    For RANGE_0_100 / RANGE_M100_100 joints: the calibrated range in radians mapped onto 0..100 / -100..100
    (reversed when LeRobot applies an inverted drive mode), clipped like LeRobot. DEGREES joints need no
    range: the contract's `rad_to_deg` is exact.
    """
    if mode is NormMode.DEGREES:
        raise ValueError("DEGREES joints convert with rad_to_deg, not a range")
    low, high = range_radians(calibration, resolution)
    out = (0.0, 100.0) if mode is NormMode.RANGE_0_100 else (-100.0, 100.0)
    if apply_drive_mode and calibration.drive_mode:
        return (low, high), (out[1], out[0])
    return (low, high), out


def normalize(
    ticks: float, calibration: MotorCalibration, mode: NormMode, resolution: int, apply_drive_mode: bool
) -> float:
    """LeRobot's `MotorsBus._normalize` of one Present_Position value.

    `apply_drive_mode` is True on Feetech buses and False on Dynamixel ones, as in LeRobot.
    """
    low, high = calibration.range_min, calibration.range_max
    if high == low:
        raise CalibrationError(f"motor id {calibration.id}: range_min == range_max == {low}")
    inverted = apply_drive_mode and bool(calibration.drive_mode)
    if mode is NormMode.DEGREES:
        return (ticks - calibration.middle) * 360 / (resolution - 1)
    bounded = min(high, max(low, ticks))
    fraction = (bounded - low) / (high - low)
    if mode is NormMode.RANGE_M100_100:
        value = fraction * 200 - 100
        return -value if inverted else value
    value = fraction * 100
    return 100 - value if inverted else value


def unnormalize(
    value: float, calibration: MotorCalibration, mode: NormMode, resolution: int, apply_drive_mode: bool
) -> int:
    """LeRobot's `MotorsBus._unnormalize` of one Goal_Position value (truncating like LeRobot)."""
    low, high = calibration.range_min, calibration.range_max
    if high == low:
        raise CalibrationError(f"motor id {calibration.id}: range_min == range_max == {low}")
    inverted = apply_drive_mode and bool(calibration.drive_mode)
    if mode is NormMode.DEGREES:
        return int(value * (resolution - 1) / 360 + calibration.middle)
    if mode is NormMode.RANGE_M100_100:
        value = -value if inverted else value
        bounded = min(100.0, max(-100.0, value))
        return int((bounded + 100) / 200 * (high - low) + low)
    value = 100 - value if inverted else value
    bounded = min(100.0, max(0.0, value))
    return int(bounded / 100 * (high - low) + low)


def radians_to_lerobot(
    radians: float, calibration: MotorCalibration, mode: NormMode, resolution: int, apply_drive_mode: bool
) -> float:
    """The value LeRobot reports for a joint at `radians` (degrees, -100..100 or 0..100).

    For a position read from the bus this equals LeRobot's own number for the same ticks.
    """
    ticks = radians * ticks_per_radian(resolution) + calibration.middle
    return normalize(ticks, calibration, mode, resolution, apply_drive_mode)


def lerobot_to_radians(
    value: float, calibration: MotorCalibration, mode: NormMode, resolution: int, apply_drive_mode: bool
) -> float:
    """Radians for a LeRobot value (an action from a LeRobot policy or dataset), without LeRobot's truncation."""
    low, high = calibration.range_min, calibration.range_max
    inverted = apply_drive_mode and bool(calibration.drive_mode)
    if mode is NormMode.DEGREES:
        ticks = value * (resolution - 1) / 360 + calibration.middle
    elif mode is NormMode.RANGE_M100_100:
        value = -value if inverted else value
        ticks = (value + 100) / 200 * (high - low) + low
    else:
        value = 100 - value if inverted else value
        ticks = value / 100 * (high - low) + low
    return (ticks - calibration.middle) / ticks_per_radian(resolution)
