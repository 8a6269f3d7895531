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
    controller.command(["a"], [0.9], now=0.45)
    out = controller.update(0.5, [0.2, -0.3])
    assert out.target[0] == pytest.approx(0.25)  # within 0.05 of measured


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
