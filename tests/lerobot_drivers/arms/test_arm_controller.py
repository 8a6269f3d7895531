"""The pure arm controller: hold on activate, stale and NaN input, limits, max step, trajectory splicing."""

import math

import numpy as np
import pytest

from lerobot_drivers.arms.controller import ArmController, CommandRejected, ControllerConfig

NAMES = ("a", "b")


def make(**kw):
    config = ControllerConfig(joint_names=NAMES, lower=(-1.0, -1.0), upper=(1.0, 1.0), command_timeout=0.1, **kw)
    controller = ArmController(config)
    controller.activate([0.2, -0.3], now=0.0)
    return controller


def test_first_target_is_the_measured_position():
    controller = make()
    out = controller.update(0.01, [0.2, -0.3])
    assert out.source == "hold"
    np.testing.assert_array_equal(out.target, [0.2, -0.3])


def test_streamed_command_then_stale_holds_last_target():
    controller = make()
    controller.command(["a", "b"], [0.5, 0.1], now=0.0)
    assert controller.update(0.05, [0.2, -0.3]).target.tolist() == [0.5, 0.1]
    out = controller.update(0.2, [0.4, 0.0])
    assert out.stale and out.source == "hold"
    assert out.target.tolist() == [0.5, 0.1]  # no new motion, no jump back


def test_nan_command_is_rejected_and_target_holds():
    controller = make()
    controller.command(["a"], [0.4], now=0.0)
    with pytest.raises(CommandRejected, match="non-finite"):
        controller.command(["a", "b"], [math.nan, 0.0], now=0.01)
    assert controller.update(0.02, None).target.tolist() == [0.4, -0.3]


def test_unknown_joint_and_length_mismatch_are_rejected():
    controller = make()
    with pytest.raises(CommandRejected, match="unknown joint"):
        controller.command(["z"], [0.0], now=0.0)
    with pytest.raises(CommandRejected, match="2 joint names but 1"):
        controller.command(["a", "b"], [0.0], now=0.0)


def test_out_of_range_command_is_clipped_to_limits():
    controller = make()
    controller.command(["a", "b"], [5.0, -0.5], now=0.0)
    out = controller.update(0.01, [0.2, -0.3])
    assert out.clipped == ("a",)
    assert out.target.tolist() == [1.0, -0.5]


def test_max_velocity_and_max_relative_target():
    controller = make(max_velocity=1.0, max_relative_target=0.05)
    controller.command(["a"], [0.9], now=0.0)
    out = controller.update(0.01, [0.2, -0.3])
    assert out.target[0] == pytest.approx(0.21)  # 1 rad/s * 10 ms
    assert "a" in out.step_limited
    for k in range(2, 10):
        controller.command(["a"], [0.9], now=k * 0.01)
        out = controller.update(k * 0.01, [0.2, -0.3])
    assert out.target[0] == pytest.approx(0.25)  # within 0.05 of measured


def steps_of(targets):
    return np.abs(np.diff(np.array(targets), axis=0))


def test_a_far_target_never_steps_more_than_the_velocity_limit_per_update():
    # Issue 18: a 1e6 target made Goal_Position step 1.77 rad in one 10 ms cycle.
    controller = make(max_velocity=3.0, update_period=0.01)
    limit = 3.0 * 0.01
    controller.command(["a", "b"], [1e6, -1e6], now=0.0)
    targets, now = [controller.target], 0.0
    # Regular cycles, jittery cycles and a long gap (an overrun, a silent bus).
    for dt in [0.01] * 20 + [0.013, 0.004, 0.02, 0.3, 0.01, 0.5, 0.011] * 5:
        now += dt
        controller.command(["a", "b"], [1e6, -1e6], now=now)
        out = controller.update(now, None)
        targets.append(out.target)
    assert steps_of(targets).max() <= limit + 1e-12
    assert targets[-1].tolist() == [1.0, -1.0]  # clipped to the limits, reached at the limited speed


def test_catch_up_after_a_silent_bus_is_rate_limited():
    # Issue 18: after a silent bus the goal caught up by 0.31 rad in one cycle.
    controller = make(max_velocity=2.0, update_period=0.01)
    controller.trajectory(["a"], start_time=0.0, times_from_start=[0.5], points=[[0.9]], now=0.0)
    previous = controller.update(0.01, None).target
    out = controller.update(0.4, None)  # no update for 0.39 s: the trajectory moved on meanwhile
    assert abs(out.target[0] - previous[0]) == pytest.approx(0.02)
    assert out.source == "trajectory" and out.step_limited == ("a",)


def test_a_failed_write_makes_the_next_step_start_from_the_goal_the_motors_hold():
    controller = make(max_velocity=1.0, update_period=0.01)
    controller.command(["a"], [0.9], now=0.0)
    assert controller.update(0.01, None).target[0] == pytest.approx(0.21)  # written
    assert controller.update(0.02, None).target[0] == pytest.approx(0.22)  # the write of this one failed
    controller.write_failed()
    assert controller.target[0] == pytest.approx(0.21)
    assert controller.update(0.03, None).target[0] == pytest.approx(0.22)  # one step from 0.21, not two


def test_the_velocity_limit_applies_per_joint():
    controller = make(max_velocity=(1.0, 0.0), update_period=0.01)  # 0: no limit on b
    controller.command(["a", "b"], [0.9, 0.9], now=0.0)
    out = controller.update(0.01, None)
    assert out.target.tolist() == pytest.approx([0.21, 0.9])
    assert out.step_limited == ("a",)


@pytest.mark.parametrize("bad", [math.nan, math.inf, -math.inf])
def test_non_finite_targets_are_rejected_and_the_goal_holds_with_the_limit_on(bad):
    controller = make(max_velocity=3.0, update_period=0.01)
    controller.command(["a"], [0.3], now=0.0)
    first = controller.update(0.01, None).target
    with pytest.raises(CommandRejected, match="non-finite"):
        controller.command(["a", "b"], [bad, 0.0], now=0.01)
    with pytest.raises(CommandRejected, match="non-finite"):
        controller.trajectory(["b"], 0.0, [0.1, 0.2], [[0.0], [bad]], now=0.01)
    targets = [first] + [controller.update(0.01 * k, None).target for k in range(2, 12)]
    assert all(np.all(np.isfinite(t)) for t in targets)
    assert [t[1] for t in targets] == [-0.3] * len(targets)  # b never moved
    assert targets[-1][0] == pytest.approx(0.3)  # a went on to the last valid command


def test_trajectory_interpolates_and_holds_last_point():
    controller = make()
    controller.trajectory(["a"], start_time=1.0, times_from_start=[1.0, 2.0], points=[[0.4], [0.8]], now=0.5)
    assert controller.update(0.9, None).target[0] == pytest.approx(0.2)  # before start: hold
    assert controller.update(1.5, None).target[0] == pytest.approx(0.3)  # halfway from 0.2 to 0.4
    assert controller.update(2.5, None).target[0] == pytest.approx(0.6)
    assert controller.update(5.0, None).target[0] == pytest.approx(0.8)
    assert controller.update(5.0, None).target[1] == pytest.approx(-0.3)  # joint not in the trajectory


def test_new_trajectory_splices_at_its_stamp_without_a_jump():
    controller = make()
    controller.trajectory(["a"], start_time=0.0, times_from_start=[1.0], points=[[1.0]], now=0.0)
    assert controller.update(0.5, None).target[0] == pytest.approx(0.6)
    # Splices at t=0.75 where the old motion is at 0.8; its first point is reached at t=1.75.
    controller.trajectory(["a"], start_time=0.75, times_from_start=[1.0], points=[[-0.2]], now=0.5)
    assert controller.update(0.75, None).target[0] == pytest.approx(0.8)
    assert controller.update(1.25, None).target[0] == pytest.approx(0.3)
    assert controller.update(2.0, None).target[0] == pytest.approx(-0.2)


def test_trajectory_with_bad_times_or_nan_is_rejected():
    controller = make()
    with pytest.raises(CommandRejected, match="times must increase"):
        controller.trajectory(["a"], 0.0, [1.0, 1.0], [[0.1], [0.2]], now=0.0)
    with pytest.raises(CommandRejected, match="non-finite"):
        controller.trajectory(["a"], 0.0, [1.0], [[math.inf]], now=0.0)


def test_config_validation_names_the_field():
    with pytest.raises(ValueError, match="limits of a"):
        ControllerConfig(joint_names=("a",), lower=(1.0,), upper=(0.0,))
    with pytest.raises(ValueError, match="max_velocity"):
        ControllerConfig(joint_names=("a",), lower=(0.0,), upper=(1.0,), max_velocity=-1)
    with pytest.raises(ValueError, match="max_velocity: need one value or 1"):
        ControllerConfig(joint_names=("a",), lower=(0.0,), upper=(1.0,), max_velocity=(1.0, 2.0))
    with pytest.raises(ValueError, match="update_period"):
        ControllerConfig(joint_names=("a",), lower=(0.0,), upper=(1.0,), update_period=0.0)
