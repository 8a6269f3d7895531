"""Leader -> follower mapping and relative-target clipping, without ROS."""

from __future__ import annotations

import dataclasses
import math

import numpy as np
import pytest

from lerobot_drivers.arms import get_arm
from lerobot_drivers.arms.arm import default_fake_calibration
from lerobot_drivers.motors.calibration import CalibrationError, range_radians
from lerobot_drivers.teleop.errors import IncompatibleArmsError, TeleopError
from lerobot_drivers.teleop.leader_follower import LeaderFollowerMap, check_pair, clip_relative

JOINTS = ["shoulder_pan", "shoulder_lift", "elbow_flex", "wrist_flex", "wrist_roll", "gripper"]


def make_map(leader_type: str = "so101_leader", follower_type: str = "so101_follower") -> LeaderFollowerMap:
    leader, follower = get_arm(leader_type), get_arm(follower_type)
    leader_cal = default_fake_calibration(leader)
    leader_cal["gripper"] = dataclasses.replace(leader_cal["gripper"], range_min=1800, range_max=2600)
    return LeaderFollowerMap(leader, follower, leader_cal, default_fake_calibration(follower))


def test_body_joints_pass_through_and_the_gripper_is_rescaled_between_ranges() -> None:
    m = make_map()
    leader_low, leader_high = range_radians(m._maps["gripper"].leader_cal, 4096)
    follower_low, follower_high = range_radians(m._maps["gripper"].follower_cal, 4096)
    body = [0.1, -0.2, 0.3, -0.4, 0.5]
    for leader_g, follower_g in ((leader_low, follower_low), (leader_high, follower_high)):
        out = m.map(JOINTS, [*body, leader_g])
        np.testing.assert_allclose(out[:5], body)
        assert out[5] == pytest.approx(follower_g, abs=1e-9)
    middle = m.map(JOINTS, [*body, (leader_low + leader_high) / 2])[5]
    assert middle == pytest.approx((follower_low + follower_high) / 2, abs=1e-9)
    # beyond the leader's range: clipped to the follower's, like LeRobot's 0..100
    assert m.map(JOINTS, [*body, leader_high + 0.5])[5] == pytest.approx(follower_high, abs=1e-9)
    # order of the reading does not matter, names do
    shuffled = m.map(list(reversed(JOINTS)), list(reversed([*body, leader_low])))
    np.testing.assert_allclose(shuffled, m.map(JOINTS, [*body, leader_low]))


def test_koch_pair_and_cross_family_pairs() -> None:
    assert make_map("koch_leader", "koch_follower").joint_names == tuple(JOINTS)
    check_pair("so100_leader", "so101_follower")
    with pytest.raises(
        IncompatibleArmsError, match=r"a koch_leader cannot drive a so101_follower.*so100_leader or so101_leader"
    ):
        check_pair("koch_leader", "so101_follower")
    with pytest.raises(IncompatibleArmsError, match="so101_follower is not a leader arm"):
        check_pair("so101_follower", "so101_follower")
    with pytest.raises(TeleopError, match="unknown robot type 'so102_leader'"):
        check_pair("so102_leader", "so101_follower")


def test_bad_readings_and_calibrations_are_rejected() -> None:
    m = make_map()
    with pytest.raises(TeleopError, match=r"missing \['gripper'\].*another robot type"):
        m.map(JOINTS[:5], [0.0] * 5)
    with pytest.raises(TeleopError, match=r"unexpected \['elbow'\]"):
        m.map([*JOINTS, "elbow"], [0.0] * 7)
    with pytest.raises(TeleopError, match="shoulder_lift reads nan"):
        m.map(JOINTS, [0.0, math.nan, 0.0, 0.0, 0.0, 0.0])
    with pytest.raises(TeleopError, match="6 names but 5 positions"):
        m.map(JOINTS, [0.0] * 5)
    koch_cal = default_fake_calibration(get_arm("koch_leader"))
    koch_cal["shoulder_pan"] = dataclasses.replace(koch_cal["shoulder_pan"], id=9)
    with pytest.raises(CalibrationError, match="leader calibration does not fit so101_leader"):
        LeaderFollowerMap(get_arm("so101_leader"), get_arm("so101_follower"), koch_cal, koch_cal)


def test_clip_relative_is_lerobots_max_relative_target() -> None:
    present = np.array([0.0, 1.0, -1.0])
    goal, clipped = clip_relative(np.array([0.5, 1.05, -3.0]), present, 0.1)
    np.testing.assert_allclose(goal, [0.1, 1.05, -1.1])
    assert clipped
    goal, clipped = clip_relative(np.array([0.5, 1.05, -3.0]), present, 0.0)
    np.testing.assert_allclose(goal, [0.5, 1.05, -3.0])
    assert not clipped
