"""The sim bridge node: a simulated robot that publishes and accepts what the real arm stack does.

A worker thread owns the simulation: it publishes the observation (joint_states, cameras, task signals,
/clock), waits as the pacing mode says, asks the real arm driver's `ArmController` for the joint target
(same command, trajectory-splice, timeout and NaN rules as the hardware) and steps. Subscription and
service callbacks only hand data to the controller or queue a reset for the worker. A camera is rendered only
while its image topic has a subscriber (`lazy_cameras`, like a camera driver that captures on demand): rendering
is most of a step's CPU, and a sim behind real time changes what the robot does. Its camera_info goes out with
every image, and every step while camera_info itself has a subscriber.

Stamps: with `stamp_clock: auto` the realtime mode stamps with the wall (ROS) clock like a real driver,
and lockstep/fast stamp with simulated time (run consumers with `use_sim_time:=true`). `/clock` always
carries simulated time, which starts at 0 and advances by one control period per step and per reset.
With `realtime` (`lerobot_ros.realtime`) the simulation loop runs SCHED_FIFO, except in mode fast, which never
sleeps between steps; /diagnostics say what applied.
"""

from __future__ import annotations

import sys
import threading
import time
from collections import OrderedDict
from dataclasses import dataclass
from typing import Any

import numpy as np
from builtin_interfaces.msg import Time as TimeMsg
from geometry_msgs.msg import Pose, PoseArray
from rclpy.node import Node
from rclpy.qos import DurabilityPolicy, QoSProfile, ReliabilityPolicy
from rclpy.time import Time
from rosgraph_msgs.msg import Clock
from sensor_msgs.msg import CameraInfo, Image, JointState
from std_msgs.msg import Bool, Float64, String
from std_srvs.srv import Trigger
from trajectory_msgs.msg import JointTrajectory

from lerobot_drivers.arms.controller import ArmController, CommandRejected, ControllerConfig
from lerobot_msgs.msg import StepOutcome as StepOutcomeMsg
from lerobot_msgs.srv import ResetEnv
from lerobot_ros.node_kit.diagnostics import DiagnosticsPublisher, Level, diagnostic_status
from lerobot_ros.node_kit.parameters import param
from lerobot_ros.node_kit.realtime import declare_realtime
from lerobot_ros.node_kit.ros import declare_parameters
from lerobot_ros.node_main import run_node
from lerobot_ros.worker_guard import WorkerGuard
from lerobot_sim_bridge import topics
from lerobot_sim_bridge.adapters import CameraConfig, SimAdapter, SimConfig, StepOutcome, make_adapter
from lerobot_sim_bridge.errors import InvalidConfigError, SimBridgeError
from lerobot_sim_bridge.pacing import LockstepGate, PacingMode, RealTimeFactorMeter, RealTimePacer

STATE_QOS = QoSProfile(depth=topics.STATE_QOS_DEPTH, reliability=ReliabilityPolicy.RELIABLE)
COMMAND_QOS = QoSProfile(depth=topics.COMMAND_QOS_DEPTH, reliability=ReliabilityPolicy.RELIABLE)
IMAGE_QOS = QoSProfile(depth=topics.IMAGE_QOS_DEPTH, reliability=ReliabilityPolicy.RELIABLE)
# Latched, so a late subscriber still learns how the last episode ended.
EVENT_QOS = QoSProfile(depth=1, reliability=ReliabilityPolicy.RELIABLE, durability=DurabilityPolicy.TRANSIENT_LOCAL)
OUTCOME_QOS = QoSProfile(
    depth=topics.OUTCOME_QOS_DEPTH, reliability=ReliabilityPolicy.RELIABLE, durability=DurabilityPolicy.TRANSIENT_LOCAL
)
RESET_WAIT_S = 10.0
# Resets remembered by request id, so a client's retry (its reply was lost or late) is answered, not reset again.
RESET_MEMORY = 16
LOCKSTEP_REPUBLISH_S = 0.5
# How long shutdown waits for the simulation thread (a step takes milliseconds; a render under load longer).
THREAD_STOP_WAIT_S = 10.0


@dataclass
class _Snapshot:
    """Everything published after one step, captured under the simulation lock."""

    sim_time: float
    stamp: TimeMsg
    positions: np.ndarray
    velocities: np.ndarray
    efforts: np.ndarray
    poses: tuple[Any, ...]
    frames: dict[str, np.ndarray]
    outcome: StepOutcome | None
    episode_index: int = 0
    episode_steps: int = 0
    episode_end: str = ""


@dataclass
class _ResetRequest:
    seed: int
    done: threading.Event
    error: str = ""
    episode_index: int = 0
    stamp: TimeMsg | None = None


def _time_msg(seconds: float) -> TimeMsg:
    nanoseconds = round(seconds * 1e9)
    return TimeMsg(sec=nanoseconds // 1_000_000_000, nanosec=nanoseconds % 1_000_000_000)


@dataclass(frozen=True)
class SimBridgeParameters:
    """The sim bridge's parameters, all read-only (README table: `python -m lerobot_ros.node_kit markdown <this>`)."""

    env_id: str = param("so101_pick_place", "environment id (so101_pick_place, pusht, plugins)")
    fps: float = param(30.0, "control and publish rate (Hz)", low=1.0, high=1000.0)
    substeps: int = param(16, "physics steps per control step", low=1, high=1000)
    cameras: str = param("front:320x240", "comma-separated cameras as name[:WIDTHxHEIGHT]; empty for none")
    lazy_cameras: bool = param(
        True,
        "render and publish a camera only while its image topic has a subscriber (a 320x240 frame costs about 12 ms "
        "of CPU); false: always",
    )
    mode: str = param("realtime", "realtime | lockstep | fast")
    stamp_clock: str = param("auto", "auto (wall in realtime, sim otherwise) | sim | wall")
    seed: int = param(-1, "seed of the first episode (later resets without a seed count up); -1 = random")
    lockstep_timeout: float = param(
        0.0,
        "lockstep: wall seconds to wait for a command before stepping anyway; 0 = wait forever",
        low=0.0,
        high=3600.0,
    )
    lockstep_real_time_factor: float = param(
        0.0,
        "lockstep: at most this many simulated seconds per wall second (1 = never faster than real time, slower "
        "when the controller or the machine is); 0 = as fast as commands come",
        low=0.0,
        high=1000.0,
    )
    command_timeout: float = param(
        0.5, "simulated seconds after which a streamed command is stale (hold)", low=0.01, high=3600.0
    )
    max_episode_steps: int = param(900, "steps after which an episode ends as time_limit; 0 = never", low=0, high=10**9)
    auto_reset: bool = param(False, "start the next episode (next seed) as soon as one ends")
    diagnostics_period: float = param(1.0, "wall seconds between /diagnostics reports")


class SimBridge(Node):
    """See the module docstring. Raises `SimBridgeError` from the constructor on bad configuration."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__("sim_bridge", **kwargs)
        self.params = declare_parameters(self, SimBridgeParameters)
        self._realtime = declare_realtime(self)  # the simulation loop's scheduling (lerobot_ros.realtime)
        env_id = str(self.params.config.env_id)
        cameras = tuple(CameraConfig.parse(text) for text in str(self.params.config.cameras).split(",") if text.strip())
        self._mode = PacingMode.parse(str(self.params.config.mode))
        stamp_clock = str(self.params.config.stamp_clock)
        if stamp_clock not in ("auto", "sim", "wall"):
            raise InvalidConfigError(f"stamp_clock {stamp_clock!r} must be auto, sim or wall")
        self._sim_stamps = stamp_clock == "sim" or (stamp_clock == "auto" and self._mode is not PacingMode.REALTIME)
        config = SimConfig(fps=self.params.config.fps, substeps=self.params.config.substeps, cameras=cameras)
        self._adapter: SimAdapter = make_adapter(env_id, config)
        try:
            limits = self._adapter.joint_limits
            self._controller = ArmController(
                ControllerConfig(
                    joint_names=self._adapter.joint_names,
                    lower=tuple(float(x) for x in limits[:, 0]),
                    upper=tuple(float(x) for x in limits[:, 1]),
                    command_timeout=float(self.params.config.command_timeout),
                )
            )
        except ValueError as exc:
            self._adapter.close()
            raise InvalidConfigError(str(exc)) from None
        self._env_id = env_id
        self._dt = self._adapter.control_dt
        self._max_episode_steps = int(self.params.config.max_episode_steps)
        self._auto_reset = bool(self.params.config.auto_reset)
        seed = int(self.params.config.seed)
        self._next_seed = seed if seed >= 0 else int(np.random.SeedSequence().entropy % (2**31))

        self._lock = threading.Lock()
        self._wake = threading.Condition()
        self._stop = threading.Event()
        self._pacer = RealTimePacer(self._dt)
        self._gate = LockstepGate(float(self.params.config.lockstep_timeout))
        # Lockstep capped at a real-time factor: the gate decides *whether* to step (the command arrived), this
        # pacer *when* (not before the scaled wall deadline); stamps stay simulated time either way.
        factor = float(self.params.config.lockstep_real_time_factor)
        self._lockstep_pacer = (
            RealTimePacer(self._dt / factor) if factor > 0 and self._mode is PacingMode.LOCKSTEP else None
        )
        self._rtf = RealTimeFactorMeter()
        self._sim_time = 0.0
        self._episode_index = -1
        self._episode_steps = 0
        self._episode_done = False
        self._episode_end = ""
        self._pending_reset: _ResetRequest | None = None
        self._resets_by_id: OrderedDict[int, _ResetRequest] = OrderedDict()
        self._repeated_resets = 0
        self._last_snapshot: _Snapshot | None = None
        self._rejected = 0
        self._last_rejection = ""
        self._steps = 0

        self._joint_states_pub = self.create_publisher(JointState, topics.JOINT_STATES, STATE_QOS)
        self._clock_pub = self.create_publisher(Clock, topics.CLOCK, STATE_QOS)
        self._reward_pub = self.create_publisher(Float64, topics.SIM_REWARD, STATE_QOS)
        self._success_pub = self.create_publisher(Bool, topics.SIM_SUCCESS, STATE_QOS)
        self._episode_end_pub = self.create_publisher(String, topics.SIM_EPISODE_END, EVENT_QOS)
        self._outcome_pub = self.create_publisher(StepOutcomeMsg, topics.SIM_STEP_OUTCOME, OUTCOME_QOS)
        self._poses_pub = self.create_publisher(PoseArray, topics.SIM_OBJECT_POSES, STATE_QOS)
        self._diagnostics = DiagnosticsPublisher(self, topics.DIAGNOSTICS)
        self._image_pubs = {
            c.name: self.create_publisher(Image, topics.image_topic(c.name), IMAGE_QOS) for c in cameras
        }
        self._info_pubs = {
            c.name: self.create_publisher(CameraInfo, topics.camera_info_topic(c.name), IMAGE_QOS) for c in cameras
        }
        self._camera_infos = {c.name: self._camera_info(c.name) for c in cameras}
        self._frames_rendered = {c.name: 0 for c in cameras}
        self._lazy_cameras = bool(self.params.config.lazy_cameras)
        self.create_subscription(JointState, topics.JOINT_COMMANDS, self._on_joint_commands, COMMAND_QOS)
        self.create_subscription(JointTrajectory, topics.JOINT_TRAJECTORY, self._on_joint_trajectory, COMMAND_QOS)
        self.create_service(ResetEnv, topics.SIM_RESET, self._on_reset)
        self.create_service(Trigger, topics.SIM_GET_SUCCESS, self._on_get_success)
        self._diagnostics_period = float(self.params.config.diagnostics_period)

        self._reset_locked(self._next_seed)
        # A crash of the loop is logged with its traceback and stays ERROR on /diagnostics.
        self._guard = WorkerGuard.for_node(self, hardware_id="sim")
        self._thread = threading.Thread(
            target=self._guard.wrap("simulation loop", self._run), name="sim_bridge_loop", daemon=True
        )
        self.get_logger().info(
            f"sim bridge ready: env {env_id}, {1.0 / self._dt:g} fps, {config.substeps} substeps, mode "
            f"{self._mode.value}, {'sim' if self._sim_stamps else 'wall'} stamps, cameras "
            f"{', '.join(f'{c.name}:{c.width}x{c.height}' for c in cameras) or 'none'}, joints "
            f"{', '.join(self._adapter.joint_names)}"
        )

    def _camera_info(self, camera: str) -> CameraInfo:
        k = self._adapter.intrinsics(camera)
        info = CameraInfo()
        info.header.frame_id = topics.camera_frame_id(camera)
        info.width, info.height = k.width, k.height
        info.distortion_model = "plumb_bob"
        info.d = [0.0] * 5
        info.k = [k.fx, 0.0, k.cx, 0.0, k.fy, k.cy, 0.0, 0.0, 1.0]
        info.r = [1.0, 0.0, 0.0, 0.0, 1.0, 0.0, 0.0, 0.0, 1.0]
        info.p = [k.fx, 0.0, k.cx, 0.0, 0.0, k.fy, k.cy, 0.0, 0.0, 0.0, 1.0, 0.0]
        return info

    # Inputs: hand over, never step here.

    def _to_sim_time(self, stamp: TimeMsg) -> float:
        """A header stamp (in the bridge's stamp clock) as simulated time; 0 means now."""
        seconds = Time.from_msg(stamp).nanoseconds * 1e-9
        if seconds == 0.0:
            return self._sim_time
        if self._sim_stamps:
            return seconds
        return self._sim_time + (seconds - self.get_clock().now().nanoseconds * 1e-9)

    def _answer(self, stamp: TimeMsg) -> None:
        if self._mode is PacingMode.LOCKSTEP:
            seconds = Time.from_msg(stamp).nanoseconds * 1e-9
            with self._wake:
                self._gate.command(seconds if self._sim_stamps else 0.0)
                self._wake.notify_all()

    def _on_joint_commands(self, msg: JointState) -> None:
        try:
            with self._lock:
                self._controller.command(list(msg.name), list(msg.position), self._sim_time)
        except CommandRejected as err:
            self._reject(f"joint_commands: {err}")
        self._answer(msg.header.stamp)

    def _on_joint_trajectory(self, msg: JointTrajectory) -> None:
        times = [p.time_from_start.sec + p.time_from_start.nanosec * 1e-9 for p in msg.points]
        points = [list(p.positions) for p in msg.points]
        try:
            with self._lock:
                start = self._to_sim_time(msg.header.stamp)
                self._controller.trajectory(list(msg.joint_names), start, times, points, self._sim_time)
        except CommandRejected as err:
            self._reject(f"joint_trajectory: {err}")
        self._answer(msg.header.stamp)

    def _reject(self, reason: str) -> None:
        self._rejected += 1
        self._last_rejection = reason
        self.get_logger().warning(f"rejected {reason}", throttle_duration_sec=1.0)

    def _on_reset(self, request: ResetEnv.Request, response: ResetEnv.Response) -> ResetEnv.Response:
        request_id = int(request.request_id)
        with self._wake:
            earlier = self._resets_by_id.get(request_id) if request_id else None
            if earlier is not None:
                # A retry of a reset whose reply was lost or late: answer it, never reset twice.
                pending = earlier
                self._repeated_resets += 1
            else:
                seed = int(request.seed) if request.use_seed else self._next_seed
                pending = _ResetRequest(seed=seed, done=threading.Event())
                if request_id:
                    self._resets_by_id[request_id] = pending
                    while len(self._resets_by_id) > RESET_MEMORY:
                        self._resets_by_id.popitem(last=False)
                self._pending_reset = pending
                self._wake.notify_all()
        seed = pending.seed
        if earlier is None and not self._thread.is_alive():
            with self._lock:
                self._apply_reset(pending)
        if not pending.done.wait(RESET_WAIT_S):
            response.success = False
            response.message = f"reset did not complete within {RESET_WAIT_S:g} s"
            return response
        response.success = not pending.error
        response.message = pending.error or f"episode {pending.episode_index} started with seed {seed}"
        response.seed = seed
        response.episode_index = max(pending.episode_index, 0)
        if pending.stamp is not None:
            response.stamp = pending.stamp
        return response

    def _on_get_success(self, request: Trigger.Request, response: Trigger.Response) -> Trigger.Response:
        with self._lock:
            response.success = self._adapter.success()
            response.message = (
                f"episode {self._episode_index}, step {self._episode_steps}: "
                f"{'success' if response.success else 'not (yet) successful'}"
            )
        return response

    # The worker.

    def _reset_locked(self, seed: int) -> None:
        self._adapter.reset(seed)
        self._controller.activate(self._adapter.joint_positions(), self._sim_time)
        self._episode_index += 1
        self._episode_steps = 0
        self._episode_started_wall = time.monotonic()
        self._episode_done = False
        self._episode_end = ""
        self._next_seed = seed + 1

    def _apply_reset(self, request: _ResetRequest) -> _Snapshot:
        """Reset and capture the first observation of the new episode (call with the lock held)."""
        try:
            self._reset_locked(request.seed)
            request.episode_index = self._episode_index
        except (SimBridgeError, ValueError) as err:
            request.error = f"reset with seed {request.seed} failed: {err}"
            self.get_logger().error(request.error)
        try:
            snap = self._snapshot(None)
            request.stamp = snap.stamp
            return snap
        finally:
            request.done.set()

    def _snapshot(self, outcome: StepOutcome | None) -> _Snapshot:
        adapter = self._adapter
        frames = {}
        for camera in adapter.cameras:
            if self._stop.is_set():
                break  # stopping: this snapshot is not published, the remaining cameras need no rendering
            if self._lazy_cameras and self._image_pubs[camera.name].get_subscription_count() == 0:
                continue  # nobody looks at it: no render
            frames[camera.name] = adapter.render(camera.name).copy()
            self._frames_rendered[camera.name] += 1
        return _Snapshot(
            sim_time=self._sim_time,
            stamp=self._stamp(self._sim_time),
            positions=adapter.joint_positions(),
            velocities=adapter.joint_velocities(),
            efforts=adapter.joint_efforts(),
            poses=adapter.object_poses(),
            frames=frames,
            outcome=outcome,
            episode_index=max(self._episode_index, 0),
            episode_steps=self._episode_steps,
            episode_end=self._episode_end,
        )

    def _stamp(self, sim_time: float) -> TimeMsg:
        return _time_msg(sim_time) if self._sim_stamps else self.get_clock().now().to_msg()

    def _publish(self, snap: _Snapshot, notify_gate: bool = True) -> None:
        self._last_snapshot = snap
        stamp = snap.stamp
        if notify_gate and self._mode is PacingMode.LOCKSTEP:
            # Armed before the first message leaves: a controller may answer the joint states before this
            # thread runs again (under load), and an answer handled before the gate was armed for this
            # observation was forgotten: the step then waited forever (issue 18).
            with self._wake:
                self._gate.observed(
                    Time.from_msg(stamp).nanoseconds * 1e-9 if self._sim_stamps else 0.0, time.monotonic()
                )
        # The step's outcome goes out before its observation, stamped like it: a consumer holding the
        # observation waits for this very outcome (the unstamped topics below may arrive after the
        # observation, or be read for the wrong step).
        self._outcome_pub.publish(self._outcome_message(snap))
        self._clock_pub.publish(Clock(clock=_time_msg(snap.sim_time)))
        if snap.outcome is not None:
            self._reward_pub.publish(Float64(data=snap.outcome.reward))
            self._success_pub.publish(Bool(data=snap.outcome.success))
        if snap.poses:
            poses = PoseArray()
            poses.header.stamp = stamp
            poses.header.frame_id = "world"
            for item in snap.poses:
                pose = Pose()
                pose.position.x, pose.position.y, pose.position.z = item.position
                pose.orientation.w, pose.orientation.x, pose.orientation.y, pose.orientation.z = item.orientation
                poses.poses.append(pose)
            self._poses_pub.publish(poses)
        for name in self._info_pubs:
            if self._stop.is_set():
                return  # a publish can wait on a slow reliable subscriber: do not queue more when stopping
            self._publish_camera(name, snap.frames.get(name), stamp)
        state = JointState()
        state.header.stamp = stamp
        state.name = list(self._adapter.joint_names)
        state.position = snap.positions.tolist()
        state.velocity = snap.velocities.tolist()
        state.effort = snap.efforts.tolist()
        self._joint_states_pub.publish(state)

    def _publish_camera(self, name: str, frame: np.ndarray | None, stamp: TimeMsg) -> None:
        """The camera's image when it was rendered; its camera_info with every image, and every step to a node
        that reads only the calibration (it costs no rendering)."""
        if frame is not None:
            image = Image()
            image.header.stamp = stamp
            image.header.frame_id = topics.camera_frame_id(name)
            image.height, image.width = int(frame.shape[0]), int(frame.shape[1])
            image.encoding = "rgb8"
            image.step = image.width * 3
            image.data = frame.tobytes()
            self._image_pubs[name].publish(image)
        if frame is not None or self._info_pubs[name].get_subscription_count() > 0:
            info = self._camera_infos[name]
            info.header.stamp = stamp
            self._info_pubs[name].publish(info)

    @staticmethod
    def _outcome_message(snap: _Snapshot) -> StepOutcomeMsg:
        message = StepOutcomeMsg()
        message.header.stamp = snap.stamp
        message.episode_index = snap.episode_index
        message.step_index = snap.episode_steps
        if snap.outcome is not None:
            message.reward = float(snap.outcome.reward)
            message.success = bool(snap.outcome.success)
        message.episode_end = snap.episode_end
        message.terminated = snap.episode_end in ("success", "terminated")
        message.truncated = snap.episode_end in ("truncated", "time_limit")
        return message

    def _wait_turn(self) -> bool:
        """Wait until the pacing mode allows a step (or a reset is pending); False when stopping."""
        if self._mode is PacingMode.REALTIME:
            while not self._stop.is_set() and self._pending_reset is None:
                delay = self._pacer.delay(time.monotonic())
                if delay <= 0:
                    self._pacer.stepped(time.monotonic())
                    break
                with self._wake:
                    self._wake.wait(min(delay, 0.05))
        elif self._mode is PacingMode.LOCKSTEP:
            # An ended episode waits for its reset, so episode lengths never depend on timing.
            republish_at = time.monotonic() + LOCKSTEP_REPUBLISH_S
            pacer = self._lockstep_pacer
            with self._wake:
                while (
                    not self._stop.is_set()
                    and self._pending_reset is None
                    and (
                        self._episode_done
                        or not self._gate.ready(time.monotonic())
                        or (pacer is not None and pacer.delay(time.monotonic()) > 0)
                    )
                ):
                    self._wake.wait(0.01 if pacer is None else min(0.01, max(pacer.delay(time.monotonic()), 0.001)))
                    if time.monotonic() >= republish_at and self._last_snapshot is not None:
                        # A controller that joined after the observation went out never saw it: send it
                        # again (same stamp, same state), which changes nothing for one that did.
                        republish_at = time.monotonic() + LOCKSTEP_REPUBLISH_S
                        self._wake.release()
                        try:
                            self._publish(self._last_snapshot, notify_gate=False)
                        finally:
                            self._wake.acquire()
            if pacer is not None and self._pending_reset is None and not self._stop.is_set():
                pacer.stepped(time.monotonic())
        return not self._stop.is_set()

    def _step_once(self) -> _Snapshot:
        with self._lock:
            pending, self._pending_reset = self._pending_reset, None
            if pending is not None:
                # A reset takes one control period of simulated time, so stamps stay unique.
                self._sim_time += self._dt
                return self._apply_reset(pending)
            out = self._controller.update(self._sim_time, self._adapter.joint_positions())
            outcome = self._adapter.step(out.target)
            self._sim_time += self._dt
            self._steps += 1
            self._episode_steps += 1
            reason = "" if self._episode_done else outcome.end_reason(self._episode_steps, self._max_episode_steps)
            if reason:
                self._episode_done = True
                self._episode_end = reason
            snap = self._snapshot(outcome)
        if reason:
            self._episode_end_pub.publish(String(data=reason))
            self.get_logger().info(f"episode {self._episode_index} ended: {reason} after {self._episode_steps} steps")
            if self._auto_reset:
                with self._wake:
                    self._pending_reset = _ResetRequest(seed=self._next_seed, done=threading.Event())
        return snap

    def _run(self) -> None:
        never_sleeps = "mode fast steps without sleeping: SCHED_FIFO would starve the machine"
        self._realtime.apply("simulation loop", fifo_refusal=never_sleeps if self._mode is PacingMode.FAST else "")
        next_diagnostics = time.monotonic()
        try:
            with self._lock:
                first = self._snapshot(None)
            self._publish(first)
            while self._wait_turn():
                snap = self._step_once()
                if self._stop.is_set():
                    break
                self._publish(snap)
                now = time.monotonic()
                self._rtf.add(snap.sim_time, now)
                if now >= next_diagnostics:
                    self._publish_diagnostics()
                    next_diagnostics = now + self._diagnostics_period
        except (SimBridgeError, ValueError) as err:
            self.get_logger().error(f"simulation loop stopped: {err}")
        except Exception as err:  # the node must report, not vanish silently, if MuJoCo or rclpy fails
            if self._stop.is_set() or not self.context.ok():
                return  # stopping (or rclpy shut down by other code) while a step was being published
            self.get_logger().error(f"simulation loop crashed: {type(err).__name__}: {err}")
            raise
        finally:
            # Renderers belong to this thread's GL contexts: release them here.
            with self._lock:
                self._adapter.close()

    def _publish_diagnostics(self) -> None:
        level, message = Level.OK, f"real-time factor {self._rtf.value:.2f}"
        if self._mode is PacingMode.REALTIME and 0 < self._rtf.value < 0.9:
            level = Level.WARN
            message += " (cannot keep up with real time; fewer or smaller cameras help)"
        values = {
            "real_time_factor": f"{self._rtf.value:.3f}",
            "sim_time": f"{self._sim_time:.3f}",
            "steps": str(self._steps),
            "episode": str(self._episode_index),
            "episode_steps": str(self._episode_steps),
            **self._episode_lag_values(),
            "overruns": str(self._pacer.overruns),
            "lockstep_timeouts": str(self._gate.timeouts),
            "repeated_reset_requests": str(self._repeated_resets),
            "rejected_inputs": str(self._rejected),
            "last_rejection": self._last_rejection,
            **{f"frames_rendered.{name}": str(count) for name, count in self._frames_rendered.items()},
            **self._realtime.diagnostic_values(),
        }
        name = f"{self.get_fully_qualified_name()}: simulation"
        self._diagnostics.publish(diagnostic_status(name, level, message, values, hardware_id=self._env_id))

    def _episode_lag_values(self) -> dict[str, str]:
        """The episode's simulated and wall seconds so far, and how far the simulation is behind the wall clock
        (in realtime a positive lag means the episode took that much longer than real time)."""
        sim_s = self._episode_steps * self._dt
        wall_s = time.monotonic() - self._episode_started_wall
        return {
            "episode_sim_s": f"{sim_s:.3f}",
            "episode_wall_s": f"{wall_s:.3f}",
            "episode_lag_s": f"{wall_s - sim_s:.3f}",
        }

    def start(self) -> None:
        """Start the simulation thread."""
        self._thread.start()

    def shutdown(self) -> None:
        """Stop the simulation thread, which releases the simulation (its renderers belong to that thread).

        `main` calls this while ROS still runs: the thread finishes the step in hand (a render, a publish),
        sees the stop and closes the simulation before the node and its publishers are destroyed.
        """
        self._stop.set()
        with self._wake:
            self._wake.notify_all()
        if self._thread.is_alive():
            self._thread.join(timeout=THREAD_STOP_WAIT_S)
            if self._thread.is_alive():
                self.get_logger().error(
                    f"the simulation thread did not stop within {THREAD_STOP_WAIT_S:g} s; exiting without it"
                )
        elif self._thread.ident is None:
            self._adapter.close()

    @property
    def real_time_factor(self) -> float:
        """Simulated seconds per wall second over the last steps."""
        return self._rtf.value


def main(args: list[str] | None = None) -> int:
    """Console script `sim_bridge`."""
    return run_node(
        SimBridge,
        "sim_bridge",
        args=args,
        start=lambda node, _executor: node.start(),
        shutdown=SimBridge.shutdown,
        startup_errors=(SimBridgeError,),
        what="the sim bridge",
    )


if __name__ == "__main__":
    sys.exit(main())
