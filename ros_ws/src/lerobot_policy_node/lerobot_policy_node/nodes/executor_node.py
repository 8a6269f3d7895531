"""Lifecycle node executing `lerobot_msgs/ActionChunk`s on a robot (a thin shell around `ChunkExecutor`).

Input: `chunk_topic` (default /policy/action_chunk). Output by `output`:

* ``joint_trajectory``: trajectory_msgs/JointTrajectory of the whole remaining plan, published when a chunk
  is taken over (and a one-point hold on stop), for the arm driver or ros2_control's JointTrajectoryController;
* ``joint_commands``: sensor_msgs/JointState position targets at `rate`;
* ``forward_position``: std_msgs/Float64MultiArray at `rate`, for ros2_control's forward position controller.

The chunk callback only stores the newest chunk and wakes the chunk thread, which takes it over: the
O(horizon) work (conversion, checks, clipping, blending: `ChunkExecutor.prepare_rows`, and the JointTrajectory
of the remaining plan) runs there without the lock; the tick thread's lock is held only to hand the current
plan over and to swap the prepared one in (O(1)). The tick thread keeps the fixed-rate stream (absolute
deadlines on the monotonic clock; targets are computed on the ROS clock, sim time included) and costs the same
whatever the chunks' length. Chunks computed from an observation older than `max_chunk_age` or longer than
`max_chunk_steps` are refused. With `realtime` (`lerobot_ros.realtime`) the tick thread runs SCHED_FIFO.
`~/enable` (std_srvs/SetBool) is the software stop: false freezes the robot where
it is (a hold is sent once, then nothing) and refuses chunks until true; on true, the newest chunk refused while
stopped is taken (through the same checks) when it was computed from an observation after the stop: a supervisor
that resets the robot, waits for the policy's first chunk of the new state and then enables (the evaluations
through ROS) no longer loses that chunk and waits for the next inference (under load, all of a 1 s episode).
Starvation, rejections, latency and tick jitter go to /diagnostics.

The joints, position limits and velocity limit are required: from `robot_config` (config/robots/*.yaml,
see `core.robot_limits`) or from `joint_names`, `joint_limits_lower/upper` and `max_velocity`; configure
fails naming what is missing. A chunk that does not fit (unknown names, bad stamp, period, shape, NaN) is
refused and counted per reason; it never changes the joints. The tick loop and the timers run under a
`WorkerGuard`: an unexpected exception is logged with its traceback, reported as ERROR on /diagnostics,
and the node leaves `active` through its error transition after sending a hold.
"""

from __future__ import annotations

import dataclasses
import sys
import threading
import time
from collections import deque
from typing import Any

import numpy as np
from builtin_interfaces.msg import Duration
from rclpy.lifecycle import LifecycleNode, LifecycleState, TransitionCallbackReturn
from rclpy.parameter import Parameter
from rclpy.qos import QoSProfile, ReliabilityPolicy
from rclpy.time import Time
from sensor_msgs.msg import JointState
from std_msgs.msg import Float64MultiArray
from std_srvs.srv import SetBool
from trajectory_msgs.msg import JointTrajectory, JointTrajectoryPoint

from lerobot_msgs.msg import ActionChunk
from lerobot_policy_node.core.errors import ChunkRejected, PolicyConfigError
from lerobot_policy_node.core.executor import (
    NS,
    BlendMode,
    ChunkExecutor,
    ExecutorConfig,
    ExecutorStats,
    StarvationMode,
    remaining_trajectory,
)
from lerobot_policy_node.core.robot_limits import RobotLimits, limits_from_parameters, load_robot_limits
from lerobot_ros.executors import SingleThreadedExecutor
from lerobot_ros.node_kit.diagnostics import DiagnosticsPublisher, Level, diagnostic_status
from lerobot_ros.node_kit.lifecycle import configure_transition
from lerobot_ros.node_kit.parameters import param
from lerobot_ros.node_kit.realtime import declare_realtime
from lerobot_ros.node_kit.ros import declare_parameters
from lerobot_ros.node_main import run_lifecycle_node
from lerobot_ros.worker_guard import WorkerGuard

OUTPUTS = ("joint_trajectory", "joint_commands", "forward_position")
DEFAULT_TOPICS = {
    "joint_trajectory": "joint_trajectory",
    "joint_commands": "joint_commands",
    "forward_position": "forward_position_controller/commands",
}
CHUNK_QOS = QoSProfile(depth=5, reliability=ReliabilityPolicy.RELIABLE)
COMMAND_QOS = QoSProfile(depth=10, reliability=ReliabilityPolicy.RELIABLE)
STATE_QOS = QoSProfile(depth=10, reliability=ReliabilityPolicy.BEST_EFFORT)
# A chunk is prepared again when the plan changed under it (a stop, a reset, a clock jump); this many times at most.
MAX_TAKEOVER_TRIES = 3
# Parameters that change the running executor -> ExecutorConfig field.
RUNTIME_PARAMETERS = {
    "max_velocity": "max_velocity",
    "crossfade_time": "crossfade_s",
    "ensemble_coeff": "ensemble_coeff",
}


@dataclasses.dataclass(frozen=True)
class ExecutorParameters:
    """The action executor's parameters (README table: `python -m lerobot_ros.node_kit markdown <this>`)."""

    output: str = param("joint_trajectory", "what to publish", choices=OUTPUTS)
    output_topic: str = param("", "topic of the output; empty = the output's usual name")
    chunk_topic: str = param("/policy/action_chunk", "ActionChunk input")
    joint_states_topic: str = param("joint_states", "measured positions (the first target)")
    robot_config: str = param(
        "",
        "robot configuration (config/robots/*.yaml) giving joints, limits and max_velocity; empty = the "
        "joint_names, joint_limits_lower/upper and max_velocity parameters, all required then",
    )
    joint_names: tuple[str, ...] | None = param(
        None,
        "joints driven, in output order (required without robot_config; with it, must match it)",
        read_only=False,
    )
    joint_limits_lower: tuple[float, ...] | None = param(
        None, "lower limits (rad); required without robot_config, narrows it otherwise", read_only=False
    )
    joint_limits_upper: tuple[float, ...] | None = param(
        None, "upper limits (rad); required without robot_config, narrows it otherwise", read_only=False
    )
    rate: float = param(100.0, "tick rate of per-tick outputs and the watchdog (Hz)", low=1, high=1000)
    blend: str = param("crossfade", "how a new chunk takes over", choices=tuple(m.value for m in BlendMode))
    crossfade_time: float = param(0.1, "length of the linear cross-fade (s)", low=0.001, high=10.0, read_only=False)
    ensemble_coeff: float = param(0.01, "ACT temporal ensembling coefficient", low=0.0, high=10.0, read_only=False)
    max_velocity: float = param(
        0.0,
        "max target speed (rad/s); required without robot_config, the lower of both with it; 0 = unset",
        low=0.0,
        high=100.0,
        read_only=False,
    )
    future_tolerance: float = param(0.05, "accept chunks stamped this far ahead (s)", low=0, high=10)
    max_chunk_age: float = param(
        2.0,
        "refuse chunks computed from an observation older than this (s): a long horizon does not make it fresh",
        low=0.001,
        high=3600.0,
    )
    max_chunk_steps: int = param(
        1000, "refuse chunks with more steps than this (taking one over costs O(steps))", low=1, high=10_000_000
    )
    clock_jump: float = param(0.1, "a clock going back further is a reset (s)", low=0, high=60)
    on_starvation: str = param("hold", "past the end of the plan", choices=tuple(m.value for m in StarvationMode))
    deceleration_time: float = param(0.2, "stop time when decelerating (s)", low=0, high=10)
    start_enabled: bool = param(True, "accept chunks from the start (else wait for ~/enable)")
    autostart: bool = param(True, "configure and activate at start-up")
    diagnostics_period: float = param(1.0, "seconds between /diagnostics", low=0.05, high=60)


def _duration(ns: int) -> Duration:
    return Duration(sec=int(ns // NS), nanosec=int(ns % NS))


class ExecutorNode(LifecycleNode):
    """See the module docstring."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__("action_executor", **kwargs)
        self.params = declare_parameters(
            self, ExecutorParameters, check=self._check_change, applied=self._apply, defer_errors=True
        )
        self._realtime = declare_realtime(self)
        self._lock = threading.Lock()
        # Orders what goes to the robot on the trajectory output: a trajectory built off `_lock` goes out only if
        # its plan is still the executor's, and a hold never overtakes it.
        self._send_lock = threading.Lock()
        self._chunk_ready = threading.Event()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._chunk_thread: threading.Thread | None = None
        self._executor: ChunkExecutor | None = None
        self._pending: ActionChunk | None = None
        # The newest chunk refused while stopped whose observation came after the stop (taken on enable).
        self._refused_while_stopped: ActionChunk | None = None
        self._stopped_at_ns = 0
        self._joint_names: tuple[str, ...] = ()
        self._limits: RobotLimits | None = None
        self._measured: dict[str, float] = {}
        self._periods: deque[float] = deque(maxlen=1000)
        self._ticks = 0
        self._overruns = 0
        self._output = ""
        self._publisher: Any = None
        self._chunk_sub: Any = None
        self._state_sub: Any = None
        self._was_starved = False
        self._diagnostics = DiagnosticsPublisher(self)
        self._guard = WorkerGuard.for_node(self, hardware_id="policy")
        self._enable_srv = self.create_service(SetBool, "~/enable", self._on_enable)
        self._diagnostics_timer = self.create_timer(
            float(self._param("diagnostics_period")), self._guard.wrap("diagnostics", self._publish_diagnostics)
        )

    def _param(self, name: str) -> Any:
        """A parameter's current value, from the table's config (the unset arrays read as [])."""
        value = getattr(self.params.config, name)
        return [] if value is None else value

    def _check_change(self, old: ExecutorParameters, new: ExecutorParameters, changed: frozenset[str]) -> str | None:
        """Joints and limits only while unconfigured; blending and max velocity apply to the running executor."""
        for name in ("joint_names", "joint_limits_lower", "joint_limits_upper"):
            if name in changed and self._executor is not None:
                return f"{name} can only change while unconfigured"
        limits = self._limits
        if "max_velocity" in changed and limits is not None and not 0 < new.max_velocity <= limits.max_velocity:
            return f"max_velocity must be > 0 and <= {limits.max_velocity} rad/s ({limits.source})"
        if changed & RUNTIME_PARAMETERS.keys() and self._executor is not None:
            try:
                self._executor_config_of(new)
            except PolicyConfigError as err:
                return str(err)
        return None

    def _apply(self, config: ExecutorParameters, changed: frozenset[str]) -> None:
        if changed & RUNTIME_PARAMETERS.keys() and self._executor is not None:
            executor_config = self._executor_config_of(config)
            with self._lock:
                self._executor.config = executor_config

    def _executor_config_of(self, config: ExecutorParameters) -> ExecutorConfig:
        assert self._executor is not None
        changes = {field: float(getattr(config, name)) for name, field in RUNTIME_PARAMETERS.items()}
        return dataclasses.replace(self._executor.config, **changes)

    def _robot_limits(self) -> RobotLimits:
        """Joints, limits and max velocity: from `robot_config`, narrowed by explicit parameters, or all explicit."""
        values = {key: self._param(key) for key in ("joint_names", "joint_limits_lower", "joint_limits_upper")}
        values["max_velocity"] = float(self._param("max_velocity"))
        path = str(self._param("robot_config"))
        if not path:
            return limits_from_parameters(values, f"{self.get_fully_qualified_name()} (robot_config is empty)")
        limits = load_robot_limits(path, self.get_fully_qualified_name())
        if values["joint_names"] and tuple(values["joint_names"]) != limits.joint_names:
            raise PolicyConfigError(
                f"joint_names {list(values['joint_names'])} differ from {list(limits.joint_names)} of {limits.source}; "
                "unset joint_names or fix the robot configuration"
            )
        for key in ("joint_limits_lower", "joint_limits_upper"):
            if values[key] and len(values[key]) != len(limits.joint_names):
                names = ", ".join(limits.joint_names)
                raise PolicyConfigError(f"{key} needs {len(limits.joint_names)} values ({names})")
        return limits.narrowed(
            values["joint_limits_lower"] or None, values["joint_limits_upper"] or None, values["max_velocity"]
        )

    def _config(self, limits: RobotLimits) -> ExecutorConfig:
        return ExecutorConfig(
            joint_names=limits.joint_names,
            lower=limits.lower,
            upper=limits.upper,
            max_velocity=limits.max_velocity,
            velocity_window_s=2.0 / float(self._param("rate")),  # two ticks: a late tick is never a jump
            blend=BlendMode(self._param("blend")),
            crossfade_s=float(self._param("crossfade_time")),
            ensemble_coeff=float(self._param("ensemble_coeff")),
            future_tolerance_s=float(self._param("future_tolerance")),
            clock_jump_s=float(self._param("clock_jump")),
            starvation=StarvationMode(self._param("on_starvation")),
            deceleration_s=float(self._param("deceleration_time")),
            max_chunk_age_s=float(self._param("max_chunk_age")),
            max_chunk_steps=int(self._param("max_chunk_steps")),
        )

    def on_configure(self, state: LifecycleState) -> TransitionCallbackReturn:
        result = configure_transition(self, self._make_executor, expected=(PolicyConfigError,))
        if result != TransitionCallbackReturn.SUCCESS:
            return result
        output, limits = self._output, self._limits
        assert limits is not None
        if float(self._param("max_velocity")) != limits.max_velocity:
            self.set_parameters([Parameter("max_velocity", Parameter.Type.DOUBLE, limits.max_velocity)])
        self._guard.clear()
        topic = str(self._param("output_topic")) or DEFAULT_TOPICS[output]
        msg_type = {"joint_trajectory": JointTrajectory, "joint_commands": JointState}.get(output, Float64MultiArray)
        self._publisher = self.create_publisher(msg_type, topic, COMMAND_QOS)
        self._chunk_sub = self.create_subscription(
            ActionChunk, str(self._param("chunk_topic")), self._on_chunk, CHUNK_QOS
        )
        self._state_sub = self.create_subscription(
            JointState, str(self._param("joint_states_topic")), self._on_joint_states, STATE_QOS
        )
        self.get_logger().info(
            f"configured: {output} on {self.resolve_topic_name(topic)}; joints {list(limits.joint_names)}, "
            f"max_velocity {limits.max_velocity} rad/s, limits from {limits.source}"
        )
        return TransitionCallbackReturn.SUCCESS

    def _make_executor(self) -> None:
        output = self.params.require().output
        limits = self._robot_limits()
        self._executor = ChunkExecutor(self._config(limits))
        self._output = output
        self._limits, self._joint_names = limits, limits.joint_names

    def on_activate(self, state: LifecycleState) -> TransitionCallbackReturn:
        with self._lock:
            if self._executor is not None and not bool(self._param("start_enabled")):
                self._executor.hold(self._now())
        self._stop.clear()
        self._thread = self._guard.thread("tick loop", self._loop)
        self._chunk_thread = self._guard.thread("chunk takeover", self._chunk_loop)
        self.get_logger().info("active")
        return super().on_activate(state)

    def on_deactivate(self, state: LifecycleState) -> TransitionCallbackReturn:
        self.stop_thread()
        return super().on_deactivate(state)

    def on_cleanup(self, state: LifecycleState) -> TransitionCallbackReturn:
        self.stop_thread()
        for entity in (self._chunk_sub, self._state_sub):
            if entity is not None:
                self.destroy_subscription(entity)
        if self._publisher is not None:
            self.destroy_publisher(self._publisher)
        self._chunk_sub = self._state_sub = self._publisher = None
        self._executor = None
        self._limits, self._joint_names = None, ()
        return TransitionCallbackReturn.SUCCESS

    def on_error(self, state: LifecycleState) -> TransitionCallbackReturn:
        """A worker failed (or a transition did): send a hold where the robot is commanded now, release, go
        unconfigured; configure + activate start again."""
        self.stop_thread()
        try:
            now = self._now()
            with self._lock:
                held = self._executor.hold(now) if self._executor is not None else None
            if held is not None and self._publisher is not None:
                self._publish_hold(held, now)
        except Exception as err:
            self.get_logger().error(f"could not send the hold on error: {type(err).__name__}: {err}")
        self.on_cleanup(state)
        self.get_logger().error("error: holding, unconfigured; configure and activate to start again")
        return TransitionCallbackReturn.SUCCESS

    def on_shutdown(self, state: LifecycleState) -> TransitionCallbackReturn:
        self.stop_thread()
        return TransitionCallbackReturn.SUCCESS

    def stop_thread(self) -> None:
        """Stop the tick and chunk threads (deactivate, cleanup, and `main`'s last step while ROS still runs)."""
        self._stop.set()
        self._chunk_ready.set()
        for thread in (self._thread, self._chunk_thread):
            if thread is not None and thread is not threading.current_thread():
                thread.join(timeout=2.0)
        self._thread = self._chunk_thread = None

    def _now(self) -> int:
        return int(self.get_clock().now().nanoseconds)

    @property
    def output(self) -> tuple[str, int] | None:
        """The output topic and how many subscriptions (the robot) it has matched; None when unconfigured."""
        if self._publisher is None:
            return None
        return self._publisher.topic_name, self._publisher.get_subscription_count()

    def _on_chunk(self, msg: ActionChunk) -> None:
        with self._lock:
            self._pending = msg
        self._chunk_ready.set()

    def _on_joint_states(self, msg: JointState) -> None:
        with self._lock:
            self._measured.update(zip(msg.name, msg.position, strict=False))

    def _on_enable(self, request: SetBool.Request, response: SetBool.Response) -> SetBool.Response:
        now = self._now()
        with self._lock:
            executor = self._executor
            if executor is None:
                response.success, response.message = False, "not configured: nothing to enable or stop"
                return response
            if request.data:
                # Restart from where the robot is now: it may have moved while stopped (teleop, a sim reset).
                measured = [self._measured.get(j) for j in self._joint_names]
                executor.enable(None if None in measured else measured, now)
                if self._pending is None:
                    self._pending = self._refused_while_stopped
                self._refused_while_stopped = None
                held = None
            else:
                held = executor.hold(now)
                self._pending = None
                self._refused_while_stopped = None
                self._stopped_at_ns = now
        if held is not None:
            self._publish_hold(held, now)
        if request.data:
            self._chunk_ready.set()  # the chunk thread takes a chunk refused while stopped
        response.success = True
        response.message = "enabled" if request.data else "stopped: holding, chunks refused until enabled"
        self.get_logger().info(response.message)
        return response

    def _chunk_loop(self) -> None:
        """The chunk thread: takes each newest chunk over (the O(horizon) work, off the tick thread)."""
        while not self._stop.is_set() and self.context.ok():
            self._chunk_ready.wait()
            self._chunk_ready.clear()
            if self._stop.is_set():
                break
            if self._take_chunk() and self._output == "joint_trajectory":
                self._publish_trajectory(self._now())

    def _take_chunk(self) -> bool:
        """Hand the pending chunk to the executor; True when the plan changed. A chunk that does not fit is
        refused and counted (by reason) and the plan is left as it was. The lock is held only for the O(1)
        handover and install; `prepare_rows` (O(horizon)) runs without it, so ticks go on meanwhile."""
        with self._lock:
            msg, self._pending = self._pending, None
            executor = self._executor
        if msg is None or executor is None:
            return False
        # Not Time.from_msg: it raises on a negative stamp, which is the executor's to refuse.
        stamp_ns = int(msg.header.stamp.sec) * NS + int(msg.header.stamp.nanosec)
        period_ns = int(msg.period.sec) * NS + int(msg.period.nanosec)
        try:
            for _ in range(MAX_TAKEOVER_TRIES):
                now = self._now()
                with self._lock:
                    self._seed_from_measured(executor, now)
                    handover = executor.handover(now)
                prepared = executor.prepare_rows(
                    list(msg.names), msg.data, int(msg.horizon), stamp_ns, period_ns, int(msg.chunk_id), handover
                )
                with self._lock:
                    if executor.install(prepared):
                        return True
            raise ChunkRejected(
                "superseded",
                f"chunk {msg.chunk_id}: the plan changed (stop, reset, clock jump) {MAX_TAKEOVER_TRIES} times while "
                "it was being taken over",
            )
        except ChunkRejected as err:
            with self._lock:
                executor.record_rejection(err)
                if err.reason == "disabled" and stamp_ns >= self._stopped_at_ns:
                    self._refused_while_stopped = msg
            self.get_logger().warning(f"chunk rejected ({err.reason}): {err}", throttle_duration_sec=2.0)
            return False

    def _seed_from_measured(self, executor: ChunkExecutor, now: int) -> None:
        """Before the first target, start from the measured pose so that the first chunk blends in from it."""
        if executor.output is None and all(j in self._measured for j in self._joint_names):
            executor.reset([self._measured[j] for j in self._joint_names], now)

    def _loop(self) -> None:
        self._realtime.apply("tick loop")
        period = 1.0 / float(self._param("rate"))
        deadline = time.monotonic()
        last_tick: float | None = None
        while not self._stop.is_set() and self.context.ok():
            if self._stop.wait(timeout=max(deadline - time.monotonic(), 0.0)):
                break
            current = time.monotonic()
            if current < deadline:
                continue
            if last_tick is not None:
                self._periods.append(current - last_tick)
            last_tick = current
            self._tick(self._now())
            deadline += period
            if deadline < time.monotonic():  # overrun: skip the missed ticks instead of bursting
                self._overruns += 1
                deadline = time.monotonic() + period

    def _tick(self, now: int) -> None:
        with self._lock:
            executor = self._executor
            if executor is None:
                return
            if executor.plan is None and not executor.enabled:
                return  # stopped: the hold went out once
            target = executor.target(now)
            starved = executor.starved
        self._ticks += 1
        if starved and not self._was_starved:
            self.get_logger().warning("starved: no fresh chunk in time, holding", throttle_duration_sec=2.0)
        self._was_starved = starved
        if target is None or self._output == "joint_trajectory":
            return
        self._publish_target(target, now)

    def _publish_target(self, target: np.ndarray, now: int) -> None:
        if self._output == "joint_commands":
            msg = JointState()
            msg.header.stamp = Time(nanoseconds=now).to_msg()
            msg.name = list(self._joint_names)
            msg.position = [float(v) for v in target]
            self._publisher.publish(msg)
        else:
            self._publisher.publish(Float64MultiArray(data=[float(v) for v in target]))

    def _publish_hold(self, held: np.ndarray, now: int) -> None:
        if self._output == "joint_trajectory":
            with self._send_lock:
                self._publisher.publish(self._points_message(np.array([now], dtype=np.int64), held[None, :]))
        else:
            self._publish_target(held, now)

    def _publish_trajectory(self, now: int) -> None:
        """The remaining plan as a JointTrajectory: its first point under the lock, the O(horizon) rest without;
        sent only while that plan is still the executor's (a stop or a newer chunk meanwhile sent their own)."""
        with self._lock:
            executor = self._executor
            start = executor.trajectory_start(now) if executor is not None else None
        if executor is None or start is None:
            return
        times, values, limited = remaining_trajectory(start)
        msg = self._points_message(times, values)
        with self._send_lock:
            with self._lock:
                executor.stats.rate_limited_ticks += limited
                current = executor.plan is start.plan and executor is self._executor
            if current:
                self._publisher.publish(msg)

    def _points_message(self, times: np.ndarray, values: np.ndarray) -> JointTrajectory:
        msg = JointTrajectory()
        msg.header.stamp = Time(nanoseconds=int(times[0])).to_msg()
        msg.joint_names = list(self._joint_names)
        for t, row in zip(times, values, strict=True):
            point = JointTrajectoryPoint()
            point.positions = [float(v) for v in row]
            point.time_from_start = _duration(int(t - times[0]))
            msg.points.append(point)
        return msg

    def _publish_diagnostics(self) -> None:
        with self._lock:
            executor = self._executor
            now = self._now()
            stats = (executor.stats if executor is not None else ExecutorStats()).as_dict()
            starved = executor.starved if executor is not None else False
            starvation = executor.starvation_s(now) if executor is not None else 0.0
            enabled = executor.enabled if executor is not None else True
        periods = np.array(self._periods) if self._periods else np.zeros(1)
        jitter = np.abs(periods - 1.0 / float(self._param("rate")))
        values = {
            "output": self._output,
            "enabled": str(enabled).lower(),
            "starved": str(starved).lower(),
            "starvation_s": f"{starvation:.3f}",
            "ticks": str(self._ticks),
            "tick_overruns": str(self._overruns),
            "tick_jitter_p50_ms": f"{np.percentile(jitter, 50) * 1e3:.3f}",
            "tick_jitter_p99_ms": f"{np.percentile(jitter, 99) * 1e3:.3f}",
            **self._realtime.diagnostic_values(),
        }
        for key, value in stats.items():
            if key == "chunks_rejected":
                values["chunks_rejected"] = str(sum(value.values()))
                values.update({f"rejected_{reason}": str(n) for reason, n in value.items()})
            elif key not in ("starvation_ns", "starvation_s"):  # starvation_s above includes the ongoing one
                values[key] = f"{value:.6g}" if isinstance(value, float) else str(value)
        if executor is None:
            level, message = Level.OK, "unconfigured"
        elif executor.stats.chunks_accepted == 0 and executor.output is None:
            level, message = Level.OK, "waiting for the first chunk"
        elif starved:
            level, message = Level.WARN, "starved: holding"
        elif not enabled:
            level, message = Level.OK, "stopped (software stop)"
        else:
            level, message = Level.OK, "executing"
        name = f"{self.get_fully_qualified_name()}: action executor"
        status = diagnostic_status(name, level, message, values, hardware_id="policy")
        self._diagnostics.publish(self._guard.annotate(status))


def main(args: list[str] | None = None) -> int:
    # The tick thread must get the GIL back quickly from the spinning thread: 1 ms instead of Python's 5 ms.
    sys.setswitchinterval(0.001)
    # One thread for callbacks: they only store input; the tick thread does the work.
    return run_lifecycle_node(
        ExecutorNode, "action_executor", ExecutorNode.stop_thread, args=args, executor=SingleThreadedExecutor
    )


if __name__ == "__main__":
    sys.exit(main())
