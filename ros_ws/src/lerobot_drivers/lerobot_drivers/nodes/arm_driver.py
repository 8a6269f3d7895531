"""Lifecycle node driving one LeRobot arm (SO-100/SO-101, Koch; follower or leader).

configure: open the port, check motors and calibration, write LeRobot's motor settings (torque off).
activate: goals := measured positions, torque on (follower) or leader setup, start the fixed-rate loop.
The loop sync-reads the arm, publishes `joint_states` stamped when the read finished, asks the
`ArmController` for the target and sync-writes it. Subscriptions only hand messages to the controller.
deactivate: stop the loop (the servos hold their last goal). cleanup/shutdown: torque off if
`torque_off_on_shutdown`, close the port.
Bus lost (port gone, or `bus_lost_after_failures` failed cycles in a row) or a loop failure: the loop stops
writing, and the node leaves `active` through the lifecycle error path (deactivate returns ERROR ->
on_error: torque off if `torque_off_on_error`, close the port -> unconfigured); /diagnostics says ERROR with
the reason. configure (re-opens the port) + activate recover once the bus is back.
With `realtime` (`lerobot_ros.realtime`) the control loop runs SCHED_FIFO; /diagnostics say what applied.
"""

from __future__ import annotations

import math
import os
import sys
import threading
import time
import traceback
from collections import deque
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from diagnostic_msgs.msg import DiagnosticStatus
from rclpy.lifecycle import LifecycleNode, LifecycleState, TransitionCallbackReturn
from rclpy.qos import QoSProfile, ReliabilityPolicy
from rclpy.time import Time
from sensor_msgs.msg import JointState
from trajectory_msgs.msg import JointTrajectory

from lerobot_drivers.arms import get_arm
from lerobot_drivers.arms.arm import Arm, make_bus, write_target
from lerobot_drivers.arms.controller import ArmController, CommandRejected, ControllerConfig
from lerobot_drivers.motors.calibration import check_calibration_location, load_calibration
from lerobot_drivers.motors.errors import BusCommunicationError, DisconnectedError, MotorError
from lerobot_ros.node_kit.diagnostics import DiagnosticsPublisher, diagnostic_status
from lerobot_ros.node_kit.lifecycle import configure_transition
from lerobot_ros.node_kit.parameters import param
from lerobot_ros.node_kit.realtime import declare_realtime
from lerobot_ros.node_kit.ros import declare_parameters
from lerobot_ros.node_main import run_lifecycle_node
from lerobot_ros.worker_guard import WorkerGuard

# rad/s: below the no-load speed of the STS3215 (~4.7 rad/s at 7.4 V) and of the Koch's Dynamixels.
DEFAULT_MAX_VELOCITY = 3.0

JOINT_STATE_QOS = QoSProfile(depth=10, reliability=ReliabilityPolicy.RELIABLE)
COMMAND_QOS = QoSProfile(depth=10, reliability=ReliabilityPolicy.RELIABLE)


@dataclass(frozen=True)
class ArmDriverParameters:
    """The arm driver's parameters (README table: `python -m lerobot_ros.node_kit markdown <this>`)."""

    robot_type: str = param("so101_follower", "LeRobot robot type, e.g. so101_follower, koch_leader")
    port: str = param("", "serial port of the arm (e.g. /dev/ttyACM0)")
    calibration_file: str = param("", "LeRobot calibration JSON of this arm")
    baudrate: int = param(0, "bus baud rate; 0 = the arm's default", low=0, high=4_000_000)
    loop_rate: float = param(100.0, "control loop rate (Hz)", low=1.0, high=1000.0)
    max_relative_target: float = param(
        0.0,
        "max distance (rad) of a goal from the measured position; 0 = off",
        low=0.0,
        high=2 * math.pi,
        read_only=False,
    )
    max_velocity: float = param(
        DEFAULT_MAX_VELOCITY,
        "max goal speed (rad/s), every joint: a goal moves at most max_velocity / loop_rate per cycle",
        low=0.01,
        high=100.0,
        read_only=False,
    )
    command_timeout: float = param(
        0.5,
        "age (s) after which a streamed command is stale and the arm holds",
        low=0.01,
        high=60.0,
        read_only=False,
    )
    torque_off_on_shutdown: bool = param(
        True, "release torque when the driver stops (the arm may fall)", read_only=False
    )
    joint_limits_lower: tuple[float, ...] | None = param(
        None, "per-joint lower limits (rad), narrowing the calibrated range"
    )
    joint_limits_upper: tuple[float, ...] | None = param(
        None, "per-joint upper limits (rad), narrowing the calibrated range"
    )
    bus_timeout: float = param(0.05, "reply timeout beyond wire time (s); USB adapters add their latency timer")
    bus_retries: int = param(2, "retries of a failed bus transaction", low=0, high=10)
    hold_after_failures: int = param(
        3,
        "failed cycles in a row before reporting ERROR (the arm holds meanwhile)",
        low=1,
        high=1000,
        read_only=False,
    )
    bus_lost_after_failures: int = param(
        10,
        "failed cycles in a row after which the bus counts as lost: lifecycle error, then unconfigured",
        low=1,
        high=100_000,
        read_only=False,
    )
    torque_off_on_error: bool = param(
        False,
        "on a lost bus or a failed loop, try to release torque (the arm may fall); else servos hold",
        read_only=False,
    )
    connect_timeout: float = param(0.0, "wait this long (s) for the port to appear at configure")
    autostart: bool = param(True, "configure and activate at start-up")
    reconnect_period: float = param(
        0.0,
        "after a lost bus, try configure + activate every this many seconds (re-enables torque at the "
        "measured pose); 0 = wait for a lifecycle manager",
        low=0.0,
        high=3600.0,
    )
    diagnostics_period: float = param(1.0, "seconds between /diagnostics reports")


@dataclass
class LoopStats:
    """Timing and fault counters of the control loop, for /diagnostics."""

    periods: deque[float] = field(default_factory=lambda: deque(maxlen=500))
    cycle_times: deque[float] = field(default_factory=lambda: deque(maxlen=500))
    cycles: int = 0
    overruns: int = 0
    failed_cycles: int = 0
    consecutive_failures: int = 0
    rejected_inputs: int = 0
    stale_holds: int = 0
    clipped_cycles: int = 0
    step_limited_cycles: int = 0
    last_rejection: str = ""
    last_bus_error: str = ""
    servo_errors: dict[str, str] = field(default_factory=dict)


def _percentile_ms(values: list[float], q: float) -> float:
    return float(np.percentile(np.array(values), q) * 1e3) if values else 0.0


class ArmDriver(LifecycleNode):
    """See the module docstring."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__("arm_driver", **kwargs)
        self.params = declare_parameters(self, ArmDriverParameters, check=self._check_change)
        self._realtime = declare_realtime(self)  # the control loop's scheduling (lerobot_ros.realtime)
        self._arm: Arm | None = None
        self._controller: ArmController | None = None
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._stats = LoopStats()
        self._fault = ""
        self._leader = False
        self._joint_states_pub = self.create_publisher(JointState, "joint_states", JOINT_STATE_QOS)
        self._diagnostics = DiagnosticsPublisher(self)
        self._subscriptions_made: list[Any] = []
        self._last_state: Any = None
        self._trouble_seen = 0
        self._stats_lock = threading.Lock()
        self._loop_failed = threading.Event()
        # The loop thread asks for the error transition through this; it runs on the executor's thread, as
        # every other transition does.
        self._loop_failure_signal = self.create_guard_condition(self._on_loop_failure)
        # Whatever escapes the loop's own fault handling: logged, ERROR on /diagnostics, lifecycle error path.
        self._guard = WorkerGuard.for_node(self, hardware_id="arm")
        self._reconnect_timer: Any = None
        self._diagnostics_timer = self.create_timer(float(self._config.diagnostics_period), self._publish_diagnostics)

    def _check_change(self, old: ArmDriverParameters, new: ArmDriverParameters, changed: frozenset[str]) -> str | None:
        for name in ("max_relative_target", "max_velocity", "command_timeout"):
            if name in changed and self._controller is not None:
                return f"{name} can only change while the driver is unconfigured"
        if new.hold_after_failures > new.bus_lost_after_failures:
            return (
                f"hold_after_failures ({new.hold_after_failures}) must not exceed "
                f"bus_lost_after_failures ({new.bus_lost_after_failures})"
            )
        return None

    @property
    def _config(self) -> ArmDriverParameters:
        return self.params.config

    # Lifecycle transitions

    def on_configure(self, state: LifecycleState) -> TransitionCallbackReturn:
        return configure_transition(
            self, self._configure_hardware, expected=(MotorError, ValueError, OSError), on_failure=self._unconfigure
        )

    def _unconfigure(self, reason: str) -> None:
        self._fault = reason
        self._release(torque_off=False)

    def _configure_hardware(self) -> None:
        spec = get_arm(self._config.robot_type)
        port = self._config.port
        if not port:
            raise ValueError("parameter port is empty; set it to the arm's serial port, e.g. port:=/dev/ttyACM0")
        calibration_path = self._config.calibration_file
        if not calibration_path:
            raise ValueError(
                "parameter calibration_file is empty; point it at the arm's LeRobot calibration JSON "
                f"(~/.cache/huggingface/lerobot/calibration/{spec.calibration_kind}/{spec.robot_type}/<id>.json)"
                " or run `lerobot-ros calibrate`"
            )
        hold_after, lost_after = int(self._config.hold_after_failures), int(self._config.bus_lost_after_failures)
        if hold_after > lost_after:
            raise ValueError(
                f"hold_after_failures ({hold_after}) must not exceed bus_lost_after_failures ({lost_after}): "
                "the arm is reported ERROR while holding before the bus counts as lost"
            )
        self._wait_for_port(port)
        check_calibration_location(calibration_path, spec.robot_type, spec.calibration_kind)
        calibration = load_calibration(calibration_path)
        bus = make_bus(
            spec,
            port,
            baudrate=self._config.baudrate or None,
            timeout_s=self._config.bus_timeout,
            retries=self._config.bus_retries,
        )
        arm = Arm(spec, bus, calibration)
        self._connect(arm)
        try:
            written = arm.write_calibration_if_needed()
            if written:
                self.get_logger().info(f"wrote calibration of {calibration_path} to {', '.join(written)}")
            arm.configure()
            lower, upper = arm.limits()
            lower, upper = self._narrow_limits(spec.joint_names, lower, upper)
            self._controller = ArmController(
                ControllerConfig(
                    joint_names=spec.joint_names,
                    lower=tuple(lower),
                    upper=tuple(upper),
                    max_relative_target=self._config.max_relative_target,
                    max_velocity=self._config.max_velocity,
                    command_timeout=self._config.command_timeout,
                    update_period=1.0 / float(self._config.loop_rate),
                )
            )
        except BaseException:
            arm.close()
            raise
        self._arm = arm
        self._leader = spec.role == "leader"
        self._fault = ""
        self._stats = LoopStats()
        self.get_logger().info(
            f"{spec.robot_type} on {port}: {len(spec.joints)} motors found, calibration {calibration_path}"
        )

    def _wait_for_port(self, port: str) -> None:
        """With connect_timeout > 0, wait for the port to appear (a fake bus or udev may create it late)."""
        deadline = time.monotonic() + float(self._config.connect_timeout)
        while not os.path.exists(port) and time.monotonic() < deadline:
            time.sleep(0.1)

    def _connect(self, arm: Arm) -> None:
        deadline = time.monotonic() + float(self._config.connect_timeout)
        while True:
            try:
                arm.connect()
                return
            except MotorError:
                if time.monotonic() >= deadline:
                    raise
                time.sleep(0.2)

    def _narrow_limits(
        self, names: tuple[str, ...], lower: np.ndarray, upper: np.ndarray
    ) -> tuple[np.ndarray, np.ndarray]:
        for which, values in (("lower", lower), ("upper", upper)):
            limits = self._config.joint_limits_lower if which == "lower" else self._config.joint_limits_upper
            if limits is None:
                continue
            given = list(limits)
            if len(given) != len(names):
                raise ValueError(
                    f"joint_limits_{which} needs {len(names)} values ({', '.join(names)}), got {len(given)}"
                )
            values[:] = np.maximum(values, given) if which == "lower" else np.minimum(values, given)
        bad = [n for n, lo, hi in zip(names, lower, upper, strict=True) if not lo < hi]
        if bad:
            raise ValueError(f"joint limits leave no range for {', '.join(bad)}; check joint_limits_lower/upper")
        return lower, upper

    def on_activate(self, state: LifecycleState) -> TransitionCallbackReturn:
        arm, controller = self._arm, self._controller
        assert arm is not None and controller is not None
        try:
            if self._leader:
                arm.apply_leader_setup()
                measured = arm.read_state().positions
            else:
                measured = arm.hold_and_enable_torque()
        except MotorError as err:
            self.get_logger().error(f"activate failed: {err}")
            self._fault = str(err)
            return TransitionCallbackReturn.FAILURE
        with self._lock:
            controller.activate(measured, self._now())
        if not self._leader:
            self._subscriptions_made = [
                self.create_subscription(JointState, "joint_commands", self._on_joint_commands, COMMAND_QOS),
                self.create_subscription(JointTrajectory, "joint_trajectory", self._on_joint_trajectory, COMMAND_QOS),
            ]
        self._stop.clear()
        self._loop_failed.clear()
        self._thread = threading.Thread(
            target=self._guard.wrap("control loop", self._run_loop), name="arm_driver_loop", daemon=True
        )
        self._thread.start()
        self.get_logger().info(
            f"active ({'leader' if self._leader else 'follower'}), loop at {self._config.loop_rate} Hz"
        )
        return super().on_activate(state)

    def on_deactivate(self, state: LifecycleState) -> TransitionCallbackReturn:
        self._stop_loop()
        for sub in self._subscriptions_made:
            self.destroy_subscription(sub)
        self._subscriptions_made = []
        if self._controller is not None:
            with self._lock:
                self._controller.deactivate()
        result = super().on_deactivate(state)
        if self._loop_failed.is_set():
            return TransitionCallbackReturn.ERROR  # on to on_error, then unconfigured
        return result

    def on_cleanup(self, state: LifecycleState) -> TransitionCallbackReturn:
        self._release(torque_off=bool(self._config.torque_off_on_shutdown))
        return TransitionCallbackReturn.SUCCESS

    def on_shutdown(self, state: LifecycleState) -> TransitionCallbackReturn:
        self.release_hardware()
        return TransitionCallbackReturn.SUCCESS

    def on_error(self, state: LifecycleState) -> TransitionCallbackReturn:
        self._stop_loop()
        torque_off = self._loop_failed.is_set() and bool(self._config.torque_off_on_error)
        self._release(torque_off=torque_off)
        if self._loop_failed.is_set():
            self._loop_failed.clear()
            period = float(self._config.reconnect_period)
            then = (
                f"reconnecting every {period:g} s"
                if period > 0
                else "configure and activate again once the bus is back"
            )
            self.get_logger().error(
                f"{self._fault}; unconfigured (port closed, "
                f"{'torque released' if torque_off else 'servos keep their last goal'}): {then}"
            )
            if period > 0 and self._reconnect_timer is None:
                self._reconnect_timer = self.create_timer(period, self._try_reconnect)
        return TransitionCallbackReturn.SUCCESS

    def _try_reconnect(self) -> None:
        """Timer after a lost bus (`reconnect_period`): configure + activate once the port is back."""
        if self._state_machine.current_state[1] != "unconfigured":
            self._stop_reconnecting()  # someone else configured it
            return
        if not os.path.exists(str(self._config.port)):
            return  # still unplugged; configure would only say so again
        if self.trigger_configure() != TransitionCallbackReturn.SUCCESS:
            return  # configure logged why; the next tick tries again
        if self.trigger_activate() != TransitionCallbackReturn.SUCCESS:
            self.trigger_cleanup()  # back to unconfigured; the next tick tries again
            return
        self.get_logger().info("bus back: configured and active again")
        self._stop_reconnecting()

    def _stop_reconnecting(self) -> None:
        if self._reconnect_timer is not None:
            self.destroy_timer(self._reconnect_timer)
            self._reconnect_timer = None

    def release_hardware(self) -> None:
        """Stop the loop, release torque if configured, close the port (idempotent)."""
        self._stop_loop()
        self._release(torque_off=bool(self._config.torque_off_on_shutdown))

    def _release(self, *, torque_off: bool) -> None:
        arm = self._arm
        self._arm = None
        self._controller = None
        if arm is None:
            return
        if torque_off and arm.bus.is_open:
            try:
                arm.set_torque(False)
                self.get_logger().info("torque released")
            except MotorError as err:
                self.get_logger().error(f"could not release torque: {err}")
        arm.close()

    def _stop_loop(self) -> None:
        self._stop.set()
        if self._thread is not None and self._thread is not threading.current_thread():
            self._thread.join(timeout=2.0)
        self._thread = None

    # Inputs: store only

    def _now(self) -> float:
        return self.get_clock().now().nanoseconds * 1e-9

    def _on_joint_commands(self, msg: JointState) -> None:
        controller = self._controller
        if controller is None:
            return
        try:
            with self._lock:
                controller.command(list(msg.name), list(msg.position), self._now())
        except (CommandRejected, RuntimeError) as err:
            self._reject(str(err))

    def _on_joint_trajectory(self, msg: JointTrajectory) -> None:
        controller = self._controller
        if controller is None:
            return
        now = self._now()
        stamp = Time.from_msg(msg.header.stamp).nanoseconds * 1e-9
        start = stamp if stamp > 0 else now
        times = [p.time_from_start.sec + p.time_from_start.nanosec * 1e-9 for p in msg.points]
        points = [list(p.positions) for p in msg.points]
        try:
            with self._lock:
                controller.trajectory(list(msg.joint_names), start, times, points, now)
        except (CommandRejected, RuntimeError) as err:
            self._reject(str(err))

    def _reject(self, reason: str) -> None:
        self._stats.rejected_inputs += 1
        self._stats.last_rejection = reason
        self.get_logger().warning(f"rejected: {reason}", throttle_duration_sec=1.0)

    # The loop

    def _run_loop(self) -> None:
        self._realtime.apply("control loop")
        period = 1.0 / float(self._config.loop_rate)
        hold_after = int(self._config.hold_after_failures)
        lost_after = int(self._config.bus_lost_after_failures)
        next_tick = time.perf_counter()
        last_start: float | None = None
        while not self._stop.is_set() and self.context.ok():
            start = time.perf_counter()
            if last_start is not None:
                with self._stats_lock:
                    self._stats.periods.append(start - last_start)
            last_start = start
            try:
                self._cycle()
                self._stats.consecutive_failures = 0
            except DisconnectedError as err:
                self._fail(f"bus lost: port disconnected: {err}")
                return
            except BusCommunicationError as err:
                self._stats.failed_cycles += 1
                self._stats.consecutive_failures += 1
                self._stats.last_bus_error = str(err)
                failures = self._stats.consecutive_failures
                if failures >= lost_after:
                    self._fail(f"bus lost: {failures} failed cycles in a row, last: {err}")
                    return
                level = "holding" if failures >= hold_after else "retrying"
                self.get_logger().warning(f"bus error ({level}): {err}", throttle_duration_sec=1.0)
            except Exception as err:
                # Not a bus fault: stop driving and say so on /diagnostics rather than die silently.
                self.get_logger().error(f"control loop failed:\n{traceback.format_exc()}")
                self._fail(f"control loop failed: {err!r}")
                return
            self._stats.cycles += 1
            with self._stats_lock:
                self._stats.cycle_times.append(time.perf_counter() - start)
            next_tick += period
            delay = next_tick - time.perf_counter()
            if delay < 0:
                self._stats.overruns += 1
                next_tick = time.perf_counter()
            else:
                self._stop.wait(delay)

    def _cycle(self) -> None:
        arm, controller = self._arm, self._controller
        if arm is None or controller is None:
            return
        state = arm.read_state()
        stamp = self.get_clock().now()
        self._last_state = state
        self._stats.servo_errors = {name: arm.bus.describe_status(bits) for name, bits in state.errors.items()}
        msg = JointState()
        msg.header.stamp = stamp.to_msg()
        msg.name = list(arm.names)
        msg.position = state.positions.tolist()
        msg.velocity = state.velocities.tolist()
        msg.effort = state.efforts.tolist()
        if not self._publish(self._joint_states_pub, msg):
            return
        if self._leader:
            return
        with self._lock:
            out = write_target(arm, controller, stamp.nanoseconds * 1e-9, state.positions)
        if out.stale:
            self._stats.stale_holds += 1
            self.get_logger().warning("joint_commands went stale; holding position", throttle_duration_sec=1.0)
        if out.step_limited:
            self._stats.step_limited_cycles += 1
        if out.clipped:
            self._stats.clipped_cycles += 1
            self.get_logger().warning(
                f"target clipped to joint limits: {', '.join(out.clipped)}", throttle_duration_sec=1.0
            )

    def _publish(self, publisher: Any, msg: Any) -> bool:
        """Publish unless ROS is shutting down (SIGINT); returns False when it is."""
        try:
            publisher.publish(msg)
        except Exception:
            if self.context.ok():
                raise
            self._stop.set()  # the context went away under us: the loop ends, main() releases the arm
            return False
        return True

    def _fail(self, reason: str) -> None:
        """The loop stops writing (it returns after this) and the node goes through its error transition."""
        self._fault = reason
        self.get_logger().error(f"{reason}; control loop stopped, nothing more is written")
        self._loop_failed.set()
        self._loop_failure_signal.trigger()

    def _on_loop_failure(self) -> None:
        """Executor thread: leave `active` through the error path (deactivate -> ERROR -> on_error)."""
        if not self._loop_failed.is_set():
            return
        if self._state_machine.current_state[1] != "active":
            return  # a transition got there first; with the flag set, deactivate already went the error path
        self.trigger_deactivate()

    def _publish_diagnostics(self) -> None:
        stats = self._stats
        arm = self._arm
        with self._stats_lock:
            periods, cycle_times = list(stats.periods), list(stats.cycle_times)
        nominal = 1.0 / float(self._config.loop_rate)
        jitter = [abs(p - nominal) for p in periods]
        hold_after = int(self._config.hold_after_failures)
        problems = []
        level = DiagnosticStatus.OK
        if self._fault:
            level, problems = DiagnosticStatus.ERROR, [self._fault]
        else:
            if stats.consecutive_failures >= hold_after:
                level = DiagnosticStatus.ERROR
                problems.append(f"bus failing, holding: {stats.last_bus_error}")
            elif arm is not None and arm.bus.stats.retries + stats.failed_cycles > 0 and self._recent_bus_trouble():
                level = max(level, DiagnosticStatus.WARN)
                problems.append(f"bus retries {arm.bus.stats.retries}, failed cycles {stats.failed_cycles}")
            if stats.servo_errors:
                level = max(level, DiagnosticStatus.WARN)
                problems.append("servo errors: " + "; ".join(f"{k}: {v}" for k, v in stats.servo_errors.items()))
        idle = "not configured" if arm is None else ("ok" if self._thread is not None else "configured, not active")
        values = {
            "loop_rate_target_hz": f"{self._config.loop_rate:.1f}",
            "loop_period_p50_ms": f"{_percentile_ms(periods, 50):.3f}",
            "loop_period_p99_ms": f"{_percentile_ms(periods, 99):.3f}",
            "loop_jitter_p50_ms": f"{_percentile_ms(jitter, 50):.3f}",
            "loop_jitter_p99_ms": f"{_percentile_ms(jitter, 99):.3f}",
            "cycle_time_p50_ms": f"{_percentile_ms(cycle_times, 50):.3f}",
            "cycle_time_p99_ms": f"{_percentile_ms(cycle_times, 99):.3f}",
            "cycles": str(stats.cycles),
            "overruns": str(stats.overruns),
            "failed_cycles": str(stats.failed_cycles),
            "rejected_inputs": str(stats.rejected_inputs),
            "last_rejection": stats.last_rejection,
            "stale_holds": str(stats.stale_holds),
            "clipped_cycles": str(stats.clipped_cycles),
            "step_limited_cycles": str(stats.step_limited_cycles),
            "max_velocity_rad_s": f"{self._config.max_velocity:.3f}",
            "lifecycle_state": self._state_machine.current_state[1],
            "last_bus_error": stats.last_bus_error,
            **self._realtime.diagnostic_values(),
        }
        if arm is not None:
            values.update(
                bus_transactions=str(arm.bus.stats.transactions),
                bus_retries=str(arm.bus.stats.retries),
                bus_failures=str(arm.bus.stats.failures),
                bus_stale_replies=str(arm.bus.stats.stale_replies),
                bus_late_replies=str(arm.bus.stats.late_replies),
            )
        state = self._last_state
        if state is not None and arm is not None:
            for i, name in enumerate(arm.names):
                values[f"{name}.voltage_v"] = f"{state.voltages[i]:.1f}"
                values[f"{name}.temperature_c"] = f"{state.temperatures[i]:.0f}"
                values[f"{name}.error"] = stats.servo_errors.get(name, "")
        self._trouble_seen = arm.bus.stats.retries + stats.failed_cycles if arm is not None else 0
        self._diagnostics.publish(
            diagnostic_status(
                f"{self.get_name()}: {self._config.robot_type}",
                level,
                "; ".join(problems) if problems else idle,
                values,
                hardware_id=self._config.port,
            )
        )

    def _recent_bus_trouble(self) -> bool:
        arm = self._arm
        if arm is None:
            return False
        return arm.bus.stats.retries + self._stats.failed_cycles > self._trouble_seen


def main(args: list[str] | None = None) -> int:
    return run_lifecycle_node(ArmDriver, "arm_driver", ArmDriver.release_hardware, args=args)


if __name__ == "__main__":
    sys.exit(main())
