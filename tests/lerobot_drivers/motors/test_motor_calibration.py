"""LeRobot calibration JSON round trip, tick <-> radian mapping, and LeRobot's normalised numbers."""

import json
import math

import numpy as np
import pytest

from lerobot_drivers.arms import get_arm
from lerobot_drivers.motors.calibration import (
    MotorCalibration,
    NormMode,
    check_calibration_location,
    contract_range,
    dumps_calibration,
    lerobot_to_radians,
    load_calibration,
    normalize,
    radians_to_lerobot,
    radians_to_ticks,
    save_calibration,
    ticks_to_radians,
    unnormalize,
    validate_calibration,
)
from lerobot_drivers.motors.errors import CalibrationError

# A file as LeRobot writes it (draccus JSON, indent 4, no trailing newline).
LEROBOT_SO101 = """{
    "shoulder_pan": {
        "id": 1,
        "drive_mode": 0,
        "homing_offset": -1470,
        "range_min": 758,
        "range_max": 3292
    },
    "shoulder_lift": {
        "id": 2,
        "drive_mode": 0,
        "homing_offset": 157,
        "range_min": 612,
        "range_max": 3401
    },
    "elbow_flex": {
        "id": 3,
        "drive_mode": 0,
        "homing_offset": 1105,
        "range_min": 889,
        "range_max": 3092
    },
    "wrist_flex": {
        "id": 4,
        "drive_mode": 0,
        "homing_offset": -1150,
        "range_min": 869,
        "range_max": 3179
    },
    "wrist_roll": {
        "id": 5,
        "drive_mode": 0,
        "homing_offset": 37,
        "range_min": 0,
        "range_max": 4095
    },
    "gripper": {
        "id": 6,
        "drive_mode": 0,
        "homing_offset": -1290,
        "range_min": 2037,
        "range_max": 3473
    }
}"""


def test_lerobot_json_in_same_json_out(tmp_path):
    source = tmp_path / "in.json"
    source.write_text(LEROBOT_SO101)
    calibration = load_calibration(source)
    out = tmp_path / "robots" / "so101_follower" / "arm.json"
    save_calibration(out, calibration)
    assert out.read_bytes() == source.read_bytes()
    assert dumps_calibration(calibration) == LEROBOT_SO101


def test_ticks_radians_ticks_round_trip_for_every_tick():
    cal = MotorCalibration(id=1, drive_mode=0, homing_offset=0, range_min=758, range_max=3292)
    for ticks in range(0, 4096):
        assert radians_to_ticks(ticks_to_radians(ticks, cal, 4096), cal, 4096) == ticks
    assert ticks_to_radians(cal.middle, cal, 4096) == 0.0
    assert ticks_to_radians(cal.middle + 4095 / 4, cal, 4096) == pytest.approx(math.pi / 2)


@pytest.mark.parametrize("ticks", [758, 1000, 2025, 3000, 3292])
def test_radians_reproduce_lerobot_numbers(ticks):
    cal = MotorCalibration(id=1, drive_mode=0, homing_offset=0, range_min=758, range_max=3292)
    for mode in NormMode:
        rad = ticks_to_radians(ticks, cal, 4096)
        assert radians_to_lerobot(rad, cal, mode, 4096, True) == pytest.approx(normalize(ticks, cal, mode, 4096, True))
    degrees = normalize(ticks, cal, NormMode.DEGREES, 4096, True)
    assert math.degrees(ticks_to_radians(ticks, cal, 4096)) == pytest.approx(degrees)


def test_lerobot_normalisation_matches_its_formulas():
    cal = MotorCalibration(id=6, drive_mode=0, homing_offset=0, range_min=2000, range_max=3000)
    assert normalize(2500, cal, NormMode.RANGE_0_100, 4096, True) == 50
    assert normalize(1000, cal, NormMode.RANGE_0_100, 4096, True) == 0  # clipped to the range
    assert normalize(2250, cal, NormMode.RANGE_M100_100, 4096, True) == -50
    inverted = MotorCalibration(id=6, drive_mode=1, homing_offset=0, range_min=2000, range_max=3000)
    assert normalize(2250, inverted, NormMode.RANGE_0_100, 4096, True) == 75
    assert normalize(2250, inverted, NormMode.RANGE_0_100, 4096, False) == 25  # Dynamixel: servo applies it
    assert unnormalize(50, cal, NormMode.RANGE_0_100, 4096, True) == 2500
    assert unnormalize(90, cal, NormMode.DEGREES, 4096, True) == int(90 * 4095 / 360 + 2500)
    value = 37.5
    rad = lerobot_to_radians(value, cal, NormMode.RANGE_0_100, 4096, True)
    assert radians_to_lerobot(rad, cal, NormMode.RANGE_0_100, 4096, True) == pytest.approx(value)


def test_file_for_another_robot_is_rejected(tmp_path):
    other = json.loads(LEROBOT_SO101)
    other["elbow"] = other.pop("elbow_flex")
    with pytest.raises(CalibrationError, match=r"not a so101_follower calibration.*elbow"):
        validate_calibration(
            load_calibration(_write(tmp_path, json.dumps(other))),
            get_arm("so101_follower").expected_calibration(),
            "so101_follower",
        )
    koch_file = tmp_path / "calibration" / "robots" / "koch_follower" / "arm.json"
    with pytest.raises(CalibrationError, match=r"calibration of a koch_follower \(robots\), not of a so101_follower"):
        check_calibration_location(koch_file, "so101_follower", "robots")
    leader_file = tmp_path / "calibration" / "teleoperators" / "so101_leader" / "arm.json"
    with pytest.raises(CalibrationError, match="so101_leader"):
        check_calibration_location(leader_file, "so101_follower", "robots")
    check_calibration_location(
        tmp_path / "calibration" / "robots" / "so101_follower" / "a.json", "so101_follower", "robots"
    )
    check_calibration_location(tmp_path / "mine.json", "so101_follower", "robots")


@pytest.mark.parametrize(
    ("field", "value", "message"),
    [
        ("range_max", 5000, "range 758..5000"),
        ("homing_offset", 3000, "homing_offset 3000 outside ±2047"),
        ("id", 9, "id 9, so101_follower uses id 1"),
        ("range_min", 3500, "range 3500..3292"),
    ],
)
def test_out_of_range_values_are_named(tmp_path, field, value, message):
    data = json.loads(LEROBOT_SO101)
    data["shoulder_pan"][field] = value
    calibration = load_calibration(_write(tmp_path, json.dumps(data)))
    with pytest.raises(CalibrationError, match=message):
        validate_calibration(calibration, get_arm("so101_follower").expected_calibration(), "so101_follower")


def test_malformed_files_say_what_is_wrong(tmp_path):
    with pytest.raises(CalibrationError, match="does not exist"):
        load_calibration(tmp_path / "missing.json")
    with pytest.raises(CalibrationError, match="not valid JSON"):
        load_calibration(_write(tmp_path, "{"))
    with pytest.raises(CalibrationError, match="missing range_max"):
        load_calibration(
            _write(tmp_path, '{"gripper": {"id": 6, "drive_mode": 0, "homing_offset": 0, "range_min": 0}}')
        )
    with pytest.raises(CalibrationError, match="must be an integer"):
        load_calibration(
            _write(tmp_path, '{"g": {"id": 6, "drive_mode": 0, "homing_offset": 0.5, "range_min": 0, "range_max": 9}}')
        )


def _write(tmp_path, text):
    path = tmp_path / "cal.json"
    path.write_text(text)
    return path


@pytest.mark.parametrize("drive_mode", [0, 1])
def test_contract_range_converter_reproduces_lerobot_gripper_values(drive_mode):
    from lerobot_contract.units import UnitConverter

    cal = MotorCalibration(id=6, drive_mode=drive_mode, homing_offset=-1290, range_min=2037, range_max=3473)
    (a, b), (c, d) = contract_range(cal, NormMode.RANGE_0_100, 4096, True)
    converter = UnitConverter("gripper", "range", in_range=(a, b), out_range=(c, d), source="test")
    ticks = np.arange(1900, 3600, 7)
    radians = np.array([ticks_to_radians(t, cal, 4096) for t in ticks])
    expected = [normalize(t, cal, NormMode.RANGE_0_100, 4096, True) for t in ticks]
    np.testing.assert_allclose(converter.apply(radians), expected, atol=1e-9)
    degrees = UnitConverter("deg", "scale", factor=180 / math.pi, source="test").apply(radians)
    np.testing.assert_allclose(degrees, [normalize(t, cal, NormMode.DEGREES, 4096, True) for t in ticks], atol=1e-9)
