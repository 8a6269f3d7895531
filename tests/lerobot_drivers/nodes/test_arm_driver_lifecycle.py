"""ArmDriver's lifecycle transitions in-process (no other ROS process), on the fake bus."""

from __future__ import annotations

import time

import pytest
import rclpy
from rclpy.lifecycle import TransitionCallbackReturn
from rclpy.parameter import Parameter

from lerobot_drivers.arms import get_arm
from lerobot_drivers.arms.arm import default_fake_calibration
from lerobot_drivers.fake.arms import fake_arm_bus
from lerobot_drivers.fake.bus import PtyServoBus
from lerobot_drivers.motors.calibration import save_calibration
from lerobot_drivers.nodes.arm_driver import ArmDriver


@pytest.fixture
def context(ros_domain):
    ctx = rclpy.Context()
    rclpy.init(context=ctx, domain_id=ros_domain)
    yield ctx
    ctx.try_shutdown()


@pytest.fixture
def rig(tmp_path):
    spec = get_arm("so101_follower")
    calibration = default_fake_calibration(spec)
    path = tmp_path / "cal.json"
    save_calibration(path, calibration)
    fake = fake_arm_bus(spec, calibration)
    with PtyServoBus(fake) as pty:
        yield fake, pty.port, str(path)


def make_driver(context, **params):
    overrides = [Parameter(name, value=value) for name, value in params.items()]
    return ArmDriver(context=context, parameter_overrides=overrides)


def test_transitions_drive_torque_and_loop(context, rig):
    fake, port, calibration = rig
    node = make_driver(context, port=port, calibration_file=calibration, loop_rate=50.0)
    try:
        assert node.trigger_configure() == TransitionCallbackReturn.SUCCESS
        assert all(fake.servo(i).get("Torque_Enable") == 0 for i in range(1, 7))
        result = node.set_parameters([Parameter("max_velocity", value=1.0)])[0]
        assert not result.successful and "unconfigured" in result.reason
        assert node.trigger_activate() == TransitionCallbackReturn.SUCCESS
        assert all(fake.servo(i).get("Torque_Enable") == 1 for i in range(1, 7))
        assert all(fake.servo(i).get("Goal_Position") == fake.servo(i).get("Present_Position") for i in range(1, 7))
        time.sleep(0.2)
        assert node.trigger_deactivate() == TransitionCallbackReturn.SUCCESS
        assert all(fake.servo(i).get("Torque_Enable") == 1 for i in range(1, 7))  # holds while inactive
        assert node.trigger_cleanup() == TransitionCallbackReturn.SUCCESS
        assert all(fake.servo(i).get("Torque_Enable") == 0 for i in range(1, 7))
    finally:
        node.release_hardware()
        node.destroy_node()


def test_configure_without_port_fails_with_a_reason(context, rig):
    _, _, calibration = rig
    node = make_driver(context, calibration_file=calibration)
    try:
        assert node.trigger_configure() == TransitionCallbackReturn.FAILURE
        assert "parameter port is empty" in node._fault
    finally:
        node.destroy_node()
