"""Arm on the fake bus: calibration written to the motors, state in radians, torque with a held goal."""

import math

import numpy as np
import pytest

from lerobot_drivers.arms import ARMS, get_arm
from lerobot_drivers.arms.arm import Arm, default_fake_calibration, make_bus
from lerobot_drivers.fake.arms import fake_arm_bus
from lerobot_drivers.fake.bus import PtyServoBus
from lerobot_drivers.motors.calibration import MotorCalibration, radians_to_ticks


@pytest.mark.parametrize("robot", ["so101_follower", "koch_follower"])
def test_lerobot_calibration_is_written_once_and_state_is_in_radians(robot):
    spec = get_arm(robot)
    calibration = {
        j.name: MotorCalibration(j.motor_id, 0, 100 if spec.family == "feetech" else -100, 1000, 3000)
        for j in spec.joints
    }
    fake = fake_arm_bus(spec, None, positions={n: 2000.0 for n in spec.joint_names})
    with PtyServoBus(fake) as pty:
        arm = Arm(spec, make_bus(spec, pty.port), calibration)
        arm.connect()
        assert arm.write_calibration_if_needed() == list(spec.joint_names)
        assert arm.write_calibration_if_needed() == []
        assert fake.servo(1).get("Homing_Offset") == calibration["shoulder_pan"].homing_offset
        state = arm.read_state()
        # Present = 2000 - 100 (Feetech) or 2000 + (-100) (Dynamixel) = 1900; middle of 1000..3000 is 2000.
        np.testing.assert_allclose(state.positions, (1900 - 2000) * 2 * math.pi / 4095)
        assert set(state.ticks.values()) == {1900}
        measured = arm.hold_and_enable_torque()
        np.testing.assert_allclose(measured, state.positions)
        assert all(fake.servo(i).get("Torque_Enable") == 1 for i in range(1, 7))
        arm.write_goal([0.1] * 6)
        arm.read_state()  # the sync write is not acknowledged; a read orders it
        goal = radians_to_ticks(0.1, calibration["gripper"], 4096)
        assert fake.servo(6).get("Goal_Position") == goal
        arm.close()


def test_koch_leader_keeps_only_the_gripper_torqued_at_half_open():
    spec = get_arm("koch_leader")
    calibration = default_fake_calibration(spec)
    fake = fake_arm_bus(spec, calibration)
    with PtyServoBus(fake) as pty:
        arm = Arm(spec, make_bus(spec, pty.port), calibration)
        arm.connect()
        arm.configure()
        arm.apply_leader_setup()
        arm.read_state()
        assert [fake.servo(i).get("Torque_Enable") for i in range(1, 7)] == [0, 0, 0, 0, 0, 1]
        assert fake.servo(6).get("Operating_Mode") == 5
        assert fake.servo(6).get("Goal_Position") == 2048  # 50 % of 1024..3072
        arm.close()


def test_every_arm_uses_lerobot_ids_and_names():
    for spec in ARMS.values():
        assert spec.joint_names == (
            "shoulder_pan",
            "shoulder_lift",
            "elbow_flex",
            "wrist_flex",
            "wrist_roll",
            "gripper",
        )
        assert [j.motor_id for j in spec.joints] == [1, 2, 3, 4, 5, 6]
    assert [j.model for j in get_arm("koch_follower").joints] == ["xl430-w250"] * 2 + ["xl330-m288"] * 4
    assert {j.model for j in get_arm("so100_leader").joints} == {"sts3215"}
    with pytest.raises(ValueError, match="unknown robot type 'so102'"):
        get_arm("so102")


@pytest.mark.parametrize("robot", ["so101_follower", "koch_follower"])
def test_slow_answers_during_the_setup_are_not_a_failed_configure(robot):
    """Issue 18 under load: a ROS run at load 4-18 failed the arm driver's configure with "write Acceleration=254 to
    'elbow_flex' (id 3) failed after 3 tries: no reply ... within the timeout" -- the settings written at configure
    (and the calibration read and written, the torque-on with a held goal at activate) used the control loop's 50 ms
    reply timeout. Setup is not the control loop: it waits as long as the presence check, and the control loop's
    timeout is back afterwards."""
    spec = get_arm(robot)
    fake = fake_arm_bus(spec, None, positions={n: 2000.0 for n in spec.joint_names})
    with PtyServoBus(fake) as pty:
        arm = Arm(spec, make_bus(spec, pty.port, timeout_s=0.05, retries=2), default_fake_calibration(spec))
        fake.faults.reply_delay_s = 0.07  # later than timeout_s, on every try
        arm.connect()
        arm.write_calibration_if_needed()
        arm.configure()
        arm.hold_and_enable_torque()
        assert arm.bus.timeout_s == 0.05
        arm.close()
