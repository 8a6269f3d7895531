"""The policy node serving several robots at once (its `robots` parameter): one lane per robot, batched inference.

Each robot (a namespace, `core.batching.robot_contract` moves the contract's topics there) gets what the
single-robot node has: its own observation assembler, inference scheduler, chunk topic
(``<robot><chunk_topic>``, e.g. /robot_0/policy/action_chunk) and latched status (``<robot>/policy/status``).
One dispatcher thread looks at every lane: when at least one robot's inference is due, every robot whose
inference is due within `batch_window` seconds joins, and the policy computes all their chunks as one batch
(`RobotBatchPolicy`); each chunk is published on its robot's topic, stamped with its own observation's time.
The batch sizes are counted and reported on /diagnostics (`batch_sizes`, `batched_inferences`) from the first batch on.
The first batch after activation is the warm-up (measured, not published) unless `warmup` is false.
Real-time chunking (`blend` rtc) and a policy server are refused with several robots (configure fails).
"""

from __future__ import annotations

import threading
import time
import traceback
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

import numpy as np
from builtin_interfaces.msg import Duration
from rclpy.time import Time

from lerobot_contract import Contract
from lerobot_contract.time import NS
from lerobot_msgs.msg import ActionChunk, PolicyStatus
from lerobot_policy_node.core.batching import BatchSizes, RobotBatchPolicy, robot_contract
from lerobot_policy_node.core.errors import ObservationError, PolicyConfigError
from lerobot_policy_node.core.observations import ActionMapping, ObservationAssembler
from lerobot_policy_node.core.policies import TASK_KEY, ChunkPolicy
from lerobot_policy_node.core.scheduling import InferenceScheduler, ObservationVerdict, SchedulerConfig
from lerobot_ros.message_conversion import import_message_type


class LaneHost(Protocol):
    """What the lanes use of the policy node that owns them (`nodes.policy_node.PolicyNode`): its rclpy API,
    parameters, lock, clock, task, action check and worker-thread guard."""

    params: Any
    context: Any
    _lock: Any
    _task: str
    _guard: Any

    def _now_ns(self) -> int: ...
    def _check_actions(self, actions: np.ndarray) -> str: ...
    def create_publisher(self, *args: Any, **kwargs: Any) -> Any: ...
    def create_subscription(self, *args: Any, **kwargs: Any) -> Any: ...
    def destroy_publisher(self, publisher: Any) -> bool: ...
    def destroy_subscription(self, subscription: Any) -> bool: ...
    def get_clock(self) -> Any: ...
    def get_logger(self) -> Any: ...


def chunk_message(
    observation_ns: int,
    joint_names: Sequence[str],
    actions: np.ndarray,
    period_ns: int,
    chunk_id: int,
    duration: float,
    policy: str,
    task: str,
) -> ActionChunk:
    """The ActionChunk of `actions` (horizon x joints) computed from the observation stamped `observation_ns`."""
    msg = ActionChunk()
    msg.header.stamp = Time(nanoseconds=observation_ns).to_msg()
    msg.names = list(joint_names)
    msg.horizon = int(actions.shape[0])
    msg.period = Duration(sec=period_ns // NS, nanosec=period_ns % NS)
    msg.data = actions.astype(np.float32).reshape(-1).tolist()
    msg.chunk_id = chunk_id
    msg.inference_time = float(duration)
    msg.policy = policy
    msg.task = task
    return msg


@dataclass
class RobotLane:
    """One robot's observation assembly, scheduling, chunk output and counters."""

    index: int
    namespace: str
    assembler: ObservationAssembler
    scheduler: InferenceScheduler
    mapping: ActionMapping
    chunk_pub: Any
    status_pub: Any
    subscriptions: list[Any] = field(default_factory=list)
    chunks: int = 0
    stale: int = 0
    observation_age: float = 0.0
    message: str = ""
    clock_jumps: int = 0


class RobotLanes:
    """See the module docstring. Built at configure; `start`/`stop` with activate/deactivate; `destroy` at cleanup."""

    def __init__(
        self,
        node: LaneHost,
        policy: ChunkPolicy,
        contract: Contract,
        robots: tuple[str, ...],
        scheduler_config: SchedulerConfig,
        qos: dict[str, Any],
    ) -> None:
        if str(node.params.config.blend) == "rtc":
            raise PolicyConfigError("blend rtc serves one robot: leave `robots` empty or use another blend")
        self.node = node
        self.policy = policy
        self.batch_policy = RobotBatchPolicy(policy, len(robots))
        self.batch_sizes = BatchSizes()
        self.period_ns = round(NS / (policy.fps or contract.fps))
        self.stamp_from_header = contract.stamp == "header"
        self.window_ns = round(float(node.params.config.batch_window) * NS)
        self.lanes: list[RobotLane] = []
        self._stop = threading.Event()
        self._wake = threading.Event()
        self._thread: threading.Thread | None = None
        self._warm = True
        self.last_inference = 0.0
        config = node.params.config
        chunk_topic = str(config.chunk_topic)
        for index, robot in enumerate(robots):
            moved = robot_contract(contract, robot)
            assembler = ObservationAssembler(
                moved,
                policy.inputs,
                latency_s=float(config.observation_latency),
                future_tolerance_s=float(config.future_tolerance),
                max_clock_offset_s=float(config.max_clock_offset),
            )
            lane = RobotLane(
                index=index,
                namespace=robot,
                assembler=assembler,
                scheduler=InferenceScheduler(scheduler_config),
                mapping=ActionMapping(moved, policy.action_dim, policy.action_names),
                chunk_pub=node.create_publisher(ActionChunk, robot + "/" + chunk_topic.lstrip("/"), qos["chunk"]),
                status_pub=node.create_publisher(PolicyStatus, robot + "/policy/status", qos["status"]),
            )
            for topic, keys in assembler.topics.items():
                feature = moved.features[keys[0]]
                lane.subscriptions.append(
                    node.create_subscription(
                        import_message_type(feature.type),
                        topic,
                        self._callback(lane, topic),
                        qos["image"] if feature.is_image else qos["vector"],
                    )
                )
            self.lanes.append(lane)

    @property
    def chunks_published(self) -> int:
        return sum(lane.chunks for lane in self.lanes)

    @property
    def stale(self) -> int:
        return sum(lane.stale for lane in self.lanes)

    def _callback(self, lane: RobotLane, topic: str) -> Any:
        def on_message(msg: Any) -> None:
            receive = self.node._now_ns()
            stamp = Time.from_msg(msg.header.stamp).nanoseconds if self.stamp_from_header else receive
            with self.node._lock:
                lane.assembler.push(topic, msg, stamp, receive)
            self._wake.set()

        return on_message

    def set_scheduler_config(self, config: SchedulerConfig) -> None:
        for lane in self.lanes:
            lane.scheduler.config = config

    def start(self) -> None:
        now = self.node._now_ns()
        with self.node._lock:
            for lane in self.lanes:
                lane.assembler.start(now)
                lane.scheduler.reset()
        self._warm = not bool(self.node.params.config.warmup)
        self._stop = threading.Event()
        self._thread = self.node._guard.thread("batch dispatch", self._dispatch, self._stop)

    def stop(self) -> None:
        self._stop.set()
        self._wake.set()
        if self._thread is not None and self._thread is not threading.current_thread():
            self._thread.join(timeout=5.0)
        self._thread = None

    def destroy(self) -> None:
        self.stop()
        for lane in self.lanes:
            for sub in lane.subscriptions:
                self.node.destroy_subscription(sub)
            self.node.destroy_publisher(lane.chunk_pub)
            self.node.destroy_publisher(lane.status_pub)
        self.lanes.clear()

    def _dispatch(self, stop: threading.Event) -> None:
        """Collect the robots whose inference is due (or due within the batch window) and run them as one batch."""
        pause = 0.0
        while not stop.wait(pause):
            self._wake.wait(0.0 if pause > 0 else 0.05)
            self._wake.clear()
            pause = 0.0
            now_node = self.node._now_ns()
            due: list[tuple[RobotLane, int, dict[str, Any]]] = []
            waits: list[float] = []
            with self.node._lock:
                candidates = []
                for lane in self.lanes:
                    lane.assembler.poll(now_node)
                    if lane.assembler.stats.clock_jumps != lane.clock_jumps:
                        lane.clock_jumps = lane.assembler.stats.clock_jumps
                        lane.scheduler.reset()
                        lane.message = lane.assembler.stats.last_problem
                    now = lane.assembler.stamp_clock(now_node)
                    if lane.scheduler.in_flight:
                        continue
                    start = lane.scheduler.start_at_ns()
                    if start is None or start <= now:
                        candidates.append((lane, now, True))
                    elif start - now <= self.window_ns:
                        candidates.append((lane, now, False))
                    else:
                        waits.append((start - now) / NS)
                if any(is_due for _, _, is_due in candidates):
                    for lane, now, _ in candidates:
                        item = self._observation(lane, now)
                        if item is not None:
                            due.append(item)
                elif candidates:
                    waits.append(0.005)
            if not due:
                pause = min([0.05, *waits]) if waits else 0.0
                continue
            publish = self._warm
            self._warm = True
            self._infer(stop, due, publish)

    def _observation(self, lane: RobotLane, now: int) -> tuple[RobotLane, int, dict[str, Any]] | None:
        """The lane's newest usable observation, marked as started (call under the node's lock)."""
        frame = lane.assembler.newest()
        if frame is None:
            waiting = lane.assembler.waiting_for
            lane.message = f"waiting for {sorted(waiting)}" if waiting else "waiting for a complete observation"
            return None
        verdict = lane.scheduler.check_observation(frame.time_ns, now)
        if verdict is ObservationVerdict.ALREADY_USED:
            return None
        if verdict is not ObservationVerdict.OK:
            lane.stale += 1
            lane.message = f"newest observation is {verdict.value} (age {(now - frame.time_ns) / NS:.3f} s)"
            return None
        lane.observation_age = (now - frame.time_ns) / NS
        try:
            observation = lane.assembler.build(frame)
        except ObservationError as err:
            lane.message = str(err)
            return None
        lane.scheduler.inference_started(frame.time_ns, self.period_ns, self.policy.horizon)
        observation[TASK_KEY] = self.node._task
        return lane, frame.time_ns, observation

    def _infer(self, stop: threading.Event, due: list[tuple[RobotLane, int, dict[str, Any]]], publish: bool) -> None:
        start = time.perf_counter()
        results: list[np.ndarray | None] = [None] * len(due)
        try:
            results = list(self.batch_policy.predict([(lane.index, obs) for lane, _, obs in due]))
        except Exception as err:  # a failing model must not kill the node: report it and keep trying
            if stop.is_set() or not self.node.context.ok():
                return
            for lane, _, _ in due:
                lane.message = f"inference failed: {type(err).__name__}: {err}"
            self.node.get_logger().error(traceback.format_exc(), throttle_duration_sec=5.0)
        duration = time.perf_counter() - start
        self.last_inference = duration
        if stop.is_set():
            return
        if publish:
            self.batch_sizes.add(len(due))
        for (lane, observation_ns, observation), actions in zip(due, results, strict=True):
            published = False
            if actions is not None:
                problem = self.node._check_actions(np.asarray(actions))
                if problem:
                    lane.message = problem
                elif publish:
                    self._publish(lane, observation_ns, lane.mapping.to_ros(actions), duration, observation)
                    published = True
            with self.node._lock:
                lane.scheduler.inference_finished(observation_ns, duration, published)

    def _publish(
        self, lane: RobotLane, observation_ns: int, actions: np.ndarray, duration: float, observation: dict[str, Any]
    ) -> None:
        lane.chunks += 1
        msg = chunk_message(
            observation_ns, lane.mapping.joint_names, actions, self.period_ns, lane.chunks, duration,
            self.policy.name, str(observation[TASK_KEY]),
        )  # fmt: skip
        lane.chunk_pub.publish(msg)
        if lane.message.startswith(("waiting", "newest observation", "the policy returned", "inference failed")):
            lane.message = ""

    def publish_status(self, state: str, device: str, task: str) -> None:
        """Each robot's latched PolicyStatus."""
        for lane in self.lanes:
            msg = PolicyStatus()
            msg.header.stamp = self.node.get_clock().now().to_msg()
            msg.state = state
            msg.policy = self.policy.name
            msg.device = device
            msg.chunks_published = lane.chunks
            msg.last_inference_time = float(self.last_inference)
            msg.mean_inference_time = float(lane.scheduler.mean_inference_s)
            msg.observation_age = float(lane.observation_age)
            msg.stale_observations = lane.stale
            msg.message = lane.message
            msg.task = task
            lane.status_pub.publish(msg)

    def problems(self) -> str:
        """Each robot's current problem, prefixed with its namespace (empty when none has one)."""
        return "; ".join(f"{lane.namespace}: {lane.message}" for lane in self.lanes if lane.message)

    def diagnostic_values(self) -> dict[str, str]:
        return {
            "robots": ",".join(lane.namespace for lane in self.lanes),
            "chunks_per_robot": ",".join(str(lane.chunks) for lane in self.lanes),
            **self.batch_sizes.diagnostic_values(),
        }
