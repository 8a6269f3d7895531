"""ArmDriver's lifecycle transitions in-process (no other ROS process), on the fake bus."""

from __future__ import annotations

import os
import time

import pytest
import rclpy
from rclpy.executors import SingleThreadedExecutor
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


class SwappablePort:
    """A fake arm reached through a symlink (like /dev/serial/by-id/...): it can be unplugged and plugged back."""

    def __init__(self, tmp_path) -> None:
        spec = get_arm("so101_follower")
        calibration = default_fake_calibration(spec)
        self.calibration = str(tmp_path / "cal.json")
        save_calibration(self.calibration, calibration)
        self.fake = fake_arm_bus(spec, calibration)
        self.goal_writes: list[tuple[float, int, bytes]] = []
        goal_address = self.fake.servo(1).model.register("Goal_Position").address
        self.fake.on_write = lambda motor_id, address, data: (
            self.goal_writes.append((time.monotonic(), motor_id, data)) if address == goal_address else None
        )
        self.port = str(tmp_path / "arm.port")
        self.pty: PtyServoBus | None = None
        self.plug()

    def plug(self) -> None:
        self.pty = PtyServoBus(self.fake)
        self.pty.start()
        tmp = self.port + ".new"
        os.symlink(self.pty.port, tmp)
        os.replace(tmp, self.port)

    def unplug(self) -> None:
        assert self.pty is not None
        self.pty.disconnect()
        os.unlink(self.port)

    def stop(self) -> None:
        if self.pty is not None:
            self.pty.stop()


@pytest.fixture
def swappable(tmp_path):
    port = SwappablePort(tmp_path)
    yield port
    port.stop()


class Spinner:
    """The driver and a /diagnostics listener on one executor, spun by the test thread (transitions too)."""

    def __init__(self, context, node) -> None:
        from diagnostic_msgs.msg import DiagnosticArray

        self.node = node
        self.listener = rclpy.create_node("diagnostics_listener", context=context)
        self.statuses: list = []
        self.listener.create_subscription(DiagnosticArray, "/diagnostics", lambda m: self.statuses.extend(m.status), 50)
        self.executor = SingleThreadedExecutor(context=context)
        self.executor.add_node(node)
        self.executor.add_node(self.listener)

    def until(self, predicate, what: str, timeout: float = 20.0) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if predicate():
                return
            self.executor.spin_once(timeout_sec=0.05)
        raise AssertionError(f"{what} did not happen within {timeout} s; state {state_of(self.node)}")

    def close(self) -> None:
        self.executor.shutdown()
        self.listener.destroy_node()


def state_of(node) -> str:
    return node._state_machine.current_state[1]


def error_status(spinner, fragment: str):
    for status in reversed(spinner.statuses):
        if status.level == b"\x02" and fragment in status.message:
            return status, {kv.key: kv.value for kv in status.values}
    return None


@pytest.mark.parametrize("loss", ["unplug", "silent"])
def test_a_lost_bus_leaves_active_through_the_error_state_and_configure_recovers(context, swappable, loss):
    # Issue 18: after an unplug the driver stayed `active`; only /diagnostics said the loop had stopped.
    node = make_driver(
        context, port=swappable.port, calibration_file=swappable.calibration, loop_rate=50.0,
        bus_timeout=0.02, bus_lost_after_failures=4, diagnostics_period=0.1,
    )  # fmt: skip
    spinner = Spinner(context, node)
    fake = swappable.fake
    try:
        assert node.trigger_configure() == TransitionCallbackReturn.SUCCESS
        assert node.trigger_activate() == TransitionCallbackReturn.SUCCESS
        spinner.until(lambda: len(swappable.goal_writes) > 5 * 6, "goal writes of a running loop")
        lost_at = time.monotonic()
        if loss == "unplug":
            swappable.unplug()
        else:
            with fake.lock:
                fake.faults.silent = True
        spinner.until(lambda: state_of(node) == "unconfigured", "the error transition to unconfigured")
        reason = "port disconnected" if loss == "unplug" else "4 failed cycles in a row"
        assert "bus lost" in node._fault and reason in node._fault
        spinner.until(lambda: error_status(spinner, "bus lost") is not None, "an ERROR on /diagnostics")
        status, _ = error_status(spinner, "bus lost")
        assert reason in status.message
        spinner.until(
            lambda: (found := error_status(spinner, "bus lost")) and found[1]["lifecycle_state"] == "unconfigured",
            "a report from the unconfigured state",
        )
        # Nothing was written once the bus went: the servos hold the last goal, torque on (torque_off_on_error
        # is false by default).
        assert [w for w in swappable.goal_writes if w[0] > lost_at + 0.05] == []  # one cycle in flight at most
        assert all(fake.servo(i).get("Torque_Enable") == 1 for i in range(1, 7))

        if loss == "unplug":
            assert node.trigger_configure() == TransitionCallbackReturn.FAILURE  # still unplugged: says so
            assert "cannot open" in node._fault
            swappable.plug()
        else:
            with fake.lock:
                fake.faults.silent = False
        assert node.trigger_configure() == TransitionCallbackReturn.SUCCESS
        assert node._fault == ""
        assert node.trigger_activate() == TransitionCallbackReturn.SUCCESS
        assert state_of(node) == "active"
        writes = len(swappable.goal_writes)
        spinner.until(lambda: len(swappable.goal_writes) > writes + 5 * 6, "goal writes after recovery")
        assert all(fake.servo(i).get("Goal_Position") == fake.servo(i).get("Present_Position") for i in range(1, 7))
    finally:
        spinner.close()
        node.release_hardware()
        node.destroy_node()


def test_torque_off_on_error_releases_the_arm_when_the_loop_fails(context, swappable):
    node = make_driver(
        context, port=swappable.port, calibration_file=swappable.calibration, loop_rate=50.0,
        torque_off_on_error=True,
    )  # fmt: skip
    spinner = Spinner(context, node)
    try:
        assert node.trigger_configure() == TransitionCallbackReturn.SUCCESS
        assert node.trigger_activate() == TransitionCallbackReturn.SUCCESS
        spinner.until(lambda: len(swappable.goal_writes) > 6, "goal writes of a running loop")

        def broken_update(*args, **kwargs):
            raise ZeroDivisionError("injected")

        node._controller.update = broken_update  # a bug in the loop, not a bus fault
        spinner.until(lambda: state_of(node) == "unconfigured", "the error transition to unconfigured")
        assert "control loop failed" in node._fault and "ZeroDivisionError" in node._fault
        assert all(swappable.fake.servo(i).get("Torque_Enable") == 0 for i in range(1, 7))
    finally:
        spinner.close()
        node.release_hardware()
        node.destroy_node()


def test_hold_after_failures_above_bus_lost_after_failures_fails_configure(context, swappable):
    node = make_driver(
        context, port=swappable.port, calibration_file=swappable.calibration, hold_after_failures=20,
        bus_lost_after_failures=10,
    )  # fmt: skip
    try:
        assert node.trigger_configure() == TransitionCallbackReturn.FAILURE
        assert "hold_after_failures (20) must not exceed bus_lost_after_failures (10)" in node._fault
        result = node.set_parameters([Parameter("bus_lost_after_failures", value=5)])[0]
        assert not result.successful and "hold_after_failures (20) must not exceed" in result.reason
        assert node.set_parameters([Parameter("hold_after_failures", value=3)])[0].successful
        assert node.trigger_configure() == TransitionCallbackReturn.SUCCESS
    finally:
        node.release_hardware()
        node.destroy_node()


def test_reconnect_period_brings_the_driver_back_once_the_port_returns(context, swappable):
    node = make_driver(
        context, port=swappable.port, calibration_file=swappable.calibration, loop_rate=50.0,
        bus_timeout=0.02, reconnect_period=0.2,
    )  # fmt: skip
    spinner = Spinner(context, node)
    try:
        assert node.trigger_configure() == TransitionCallbackReturn.SUCCESS
        assert node.trigger_activate() == TransitionCallbackReturn.SUCCESS
        spinner.until(lambda: len(swappable.goal_writes) > 6, "goal writes of a running loop")
        swappable.unplug()
        spinner.until(lambda: state_of(node) == "unconfigured", "the error transition to unconfigured")
        # Unplugged for a while: it stays unconfigured (the timer keeps looking for the port).
        deadline = time.monotonic() + 0.6
        spinner.until(lambda: time.monotonic() > deadline, "waiting")
        assert state_of(node) == "unconfigured" and "bus lost" in node._fault
        swappable.plug()
        spinner.until(lambda: state_of(node) == "active", "reconnection")
        writes = len(swappable.goal_writes)
        spinner.until(lambda: len(swappable.goal_writes) > writes + 6, "goal writes after reconnecting")
        assert node._fault == "" and node._reconnect_timer is None
    finally:
        spinner.close()
        node.release_hardware()
        node.destroy_node()


@pytest.mark.parametrize("permitted", [True, False])
def test_realtime_control_loop_applies_or_falls_back_with_one_warning(context, rig, permitted):
    """`realtime`: the control loop runs SCHED_FIFO where permitted; where not (EPERM simulated) it runs on with
    normal scheduling, one warning, and /diagnostics say why."""
    import errno
    import threading

    from lerobot_ros.realtime import SystemCalls

    if permitted and os.geteuid() != 0:
        pytest.skip("SCHED_FIFO needs root here")
    _fake, port, calibration = rig
    node = make_driver(
        context,
        port=port,
        calibration_file=calibration,
        loop_rate=50.0,
        realtime=True,
        realtime_priority=10,
        realtime_lock_memory=False,
    )
    warnings = []
    if not permitted:

        def refuse(*args) -> None:
            raise PermissionError(errno.EPERM, os.strerror(errno.EPERM))

        node._realtime._calls = SystemCalls(set_scheduler=refuse)
        node._realtime._warn = warnings.append
    try:
        assert node.trigger_configure() == TransitionCallbackReturn.SUCCESS
        for _ in range(2):  # a restarted loop applies again; the same refusal is not warned twice
            assert node.trigger_activate() == TransitionCallbackReturn.SUCCESS
            deadline = time.monotonic() + 30
            while not node._realtime.reports() and time.monotonic() < deadline:
                time.sleep(0.01)
            report = node._realtime.reports()[0]
            cycles = node._stats.cycles
            while node._stats.cycles < cycles + 3 and time.monotonic() < deadline:
                time.sleep(0.01)
            assert node._stats.cycles >= cycles + 3, "the control loop does not run"
            assert node._thread is not None and node._thread.native_id == report.native_id
            policy = os.sched_getscheduler(report.native_id)
            assert threading.current_thread().native_id != report.native_id
            assert node.trigger_deactivate() == TransitionCallbackReturn.SUCCESS
        values = node._realtime.diagnostic_values()
        if permitted:
            assert policy == os.SCHED_FIFO and values["realtime_policy"] == "SCHED_FIFO 10" and not warnings
        else:
            assert policy == os.SCHED_OTHER and values["realtime_policy"] == "SCHED_OTHER"
            assert "SCHED_FIFO 10: Operation not permitted" in values["realtime_refused"]
            assert len(warnings) == 1, warnings
    finally:
        node.release_hardware()
        node.destroy_node()
