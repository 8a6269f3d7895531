"""Lifecycle node running a policy on contract topics and publishing `lerobot_msgs/ActionChunk`s.

configure: load the policy (`checkpoint`: a checkpoint directory, a Hub repo id, ``grpc://HOST:PORT`` of a policy
server, or ``scripted[:options]``)
and the contract (`contract`, default: the one stored in the checkpoint), check that the contract supplies
every input the policy needs and its action dimension, subscribe to the input topics.
activate: start the dispatcher thread. Subscription callbacks only hand messages to the observation
assembler (newest-at-or-before frames on the contract's grid, as the recorder samples them). The dispatcher
decides when the next inference is due (`InferenceScheduler`: threshold adapted to the measured inference
time), takes the newest complete, fresh frame and hands it to an inference worker (`inference_workers` of
them; never a subscription callback). A worker runs the policy, converts the actions to ROS units and
publishes the chunk stamped with the observation's time and carrying the inference time. The first inference
after activation is a warm-up (measured, not published) unless `warmup` is false.
`~/status` (lerobot_msgs/PolicyStatus, latched) says what the node is doing and the last problem.
The task text (`task` parameter, changeable at run time, or a std_msgs/String on `~/task`) goes with every
observation to the policy; each ActionChunk carries the task it was computed for.
With `blend` rtc (real-time chunking, `core/rtc.py`) each inference gets the last published chunk's remaining
steps, the inference delay (`rtc_inference_delay`, measured when -1), the execution horizon and the guidance
weight cap; a policy that cannot inpaint (ACT, a policy server) is refused at configure.
When inferences are too slow to keep the chunk fed, one throttled log line and /diagnostics (`bottleneck`,
`advice`) say what to change (`core/bottleneck.py`): with a policy server, whether the link (bytes per
observation over the measured time on the wire: `image_encoding`) or the inference (`inference_workers`, a faster
device) is what limits it.

Clocks: observation stamps come from the robot's clock, which on another host need not agree with this node's.
The node estimates the offset (receive time - stamp, the smallest seen; `clock_offset_s` on /diagnostics) and
judges freshness and schedules on the stamps' clock, so chunks (stamped with their observation's time) are on
the robot's clock whatever this host's clock says. A first observation further than `max_clock_offset` from
this node's clock is refused with the reason. Test-only hook: `LEROBOT_ROS_TEST_CLOCK_OFFSET_S` (seconds)
shifts every clock reading of this node, to play a second host's clock on one machine.
"""

from __future__ import annotations

import dataclasses
import functools
import math
import os
import queue
import sys
import threading
import time
import traceback
from collections.abc import Callable
from typing import Any

import numpy as np
from diagnostic_msgs.msg import DiagnosticStatus
from rclpy.lifecycle import LifecycleNode, LifecycleState, TransitionCallbackReturn
from rclpy.parameter import Parameter
from rclpy.qos import DurabilityPolicy, QoSProfile, ReliabilityPolicy
from rclpy.time import Time
from std_msgs.msg import String

from lerobot_contract import ContractError
from lerobot_contract.time import NS
from lerobot_msgs.msg import ActionChunk, PolicyStatus
from lerobot_policy_node.core.batching import parse_robots
from lerobot_policy_node.core.bottleneck import Advice, Bottleneck, advise
from lerobot_policy_node.core.errors import ObservationError, PolicyConfigError, PolicyLoadError
from lerobot_policy_node.core.executor import BlendMode
from lerobot_policy_node.core.observations import ActionMapping, ObservationAssembler
from lerobot_policy_node.core.policies import TASK_KEY, CheckpointPolicy, ChunkPolicy, RemoteAccess, RemotePolicy
from lerobot_policy_node.core.resolve import resolve_policy
from lerobot_policy_node.core.rtc import ChunkPrefix, RtcSettings, make_prefix, measured_delay_steps, remaining_steps
from lerobot_policy_node.core.scheduling import InferenceScheduler, ObservationVerdict, SchedulerConfig
from lerobot_policy_node.nodes.robot_lanes import RobotLanes, chunk_message
from lerobot_ros import executors as ros_executors
from lerobot_ros.message_conversion import import_message_type
from lerobot_ros.node_kit.diagnostics import DiagnosticsPublisher, diagnostic_status
from lerobot_ros.node_kit.lifecycle import configure_transition
from lerobot_ros.node_kit.parameters import param
from lerobot_ros.node_kit.ros import declare_parameters
from lerobot_ros.node_main import run_lifecycle_node
from lerobot_ros.worker_guard import WorkerGuard

# Parameters that change the running scheduler -> SchedulerConfig field.
SCHEDULER_PARAMETERS = {
    "threshold": "threshold",
    "margin": "margin_s",
    "max_observation_age": "max_observation_age_s",
    "future_tolerance": "future_tolerance_s",
}


@dataclasses.dataclass(frozen=True)
class PolicyNodeParameters:
    """The policy node's parameters (README table: `python -m lerobot_ros.node_kit markdown <this>`)."""

    checkpoint: str = param("", "checkpoint directory, Hub repo id, or scripted[:options]")
    contract: str = param("", "contract YAML; empty = the checkpoint's contract.yaml")
    device: str = param("cpu", "torch device of the policy (cpu, cuda, cuda:1, mps)")
    task: str = param("", "task text given to the policy with every observation (also ~/task)", read_only=False)
    chunk_topic: str = param("/policy/action_chunk", "ActionChunk output")
    threshold: float = param(
        0.5, "start inference at the latest when this fraction of the chunk is left", low=0, high=1, read_only=False
    )
    margin: float = param(0.03, "slack added to the expected inference time (s)", low=0.0, high=10.0, read_only=False)
    max_observation_age: float = param(
        0.2, "observations older than this are not used (s)", low=0.001, high=60, read_only=False
    )
    future_tolerance: float = param(
        0.05, "stamps this far ahead of the clock are accepted (s)", low=0, high=10, read_only=False
    )
    max_clock_offset: float = param(
        1.0,
        "largest offset between this host's clock and the observations' stamps that is compensated (s)",
        low=0.0,
        high=3600.0,
    )
    observation_latency: float = param(0.01, "wait this long for late samples of a frame (s)", low=0, high=1)
    inference_workers: int = param(1, "inferences that may overlap", low=1, high=16)
    warmup: bool = param(True, "run (and time) one unpublished inference before publishing")
    autostart: bool = param(True, "configure and activate at start-up")
    blend: str = param(
        BlendMode.CROSSFADE.value,
        "the executor's blend; rtc makes each chunk continue the previous one (real-time chunking)",
        choices=tuple(m.value for m in BlendMode),
    )
    rtc_inference_delay: int = param(
        -1,
        "RTC: steps frozen to the previous chunk (d); -1 = measured (observation age + expected inference time)",
        low=-1,
        high=10000,
    )
    rtc_execution_horizon: int = param(
        0,
        "RTC: execution horizon s (steps): the guided overlap ends at horizon - s; 0 = all the last chunk has left",
        low=0,
        high=10000,
    )
    rtc_max_guidance_weight: float = param(5.0, "RTC: guidance weight cap (beta)", low=0.001, high=1000.0)
    rtc_start_noise_level: float = param(
        1.0,
        "RTC: 1 = sample from pure noise (the paper); below 1 = from the previous chunk noised to this level",
        low=0.01,
        high=1.0,
    )
    remote_timeout: float = param(5.0, "per-call timeout of a grpc:// policy server (s)", low=0.01, high=600.0)
    remote_token_file: str = param(
        "", "file holding the grpc:// policy server's token; empty = $LEROBOT_POLICY_SERVER_TOKEN, else none"
    )
    remote_tls_ca: str = param("", "TLS to the grpc:// policy server: CA (PEM) of its certificate; empty = no TLS")
    remote_tls_cert: str = param("", "mutual TLS: this node's certificate (PEM) for the policy server")
    remote_tls_key: str = param("", "mutual TLS: the key (PEM) of remote_tls_cert")
    image_encoding: str = param(
        "raw",
        "how camera images travel to a grpc:// policy server: raw, jpeg (lossy, ~20x smaller) or png (lossless)",
        choices=("raw", "jpeg", "png"),
    )
    jpeg_quality: int = param(90, "JPEG quality of image_encoding jpeg", low=1, high=100, step=1)
    robots: tuple[str, ...] | None = param(
        None,
        "serve these robots (namespaces, e.g. [/robot_0, /robot_1]) from this one node, inferences due together "
        "in one batch; each gets the contract's topics in its namespace, <robot><chunk_topic> and "
        "<robot>/policy/status; unset = the contract's own robot",
    )
    batch_window: float = param(
        0.05, "robots: a robot whose inference is due within this time joins a batch that starts now (s)", low=0.0,
        high=10.0,
    )  # fmt: skip


CHUNK_QOS = QoSProfile(depth=5, reliability=ReliabilityPolicy.RELIABLE)
STATUS_QOS = QoSProfile(depth=1, durability=DurabilityPolicy.TRANSIENT_LOCAL, reliability=ReliabilityPolicy.RELIABLE)
# Reliable and volatile: matches reliable publishers, latched or not.
TASK_QOS = QoSProfile(depth=5, reliability=ReliabilityPolicy.RELIABLE)
VECTOR_QOS = QoSProfile(depth=10, reliability=ReliabilityPolicy.BEST_EFFORT)
IMAGE_QOS = QoSProfile(depth=2, reliability=ReliabilityPolicy.BEST_EFFORT)
# How long deactivating (or stopping the node) waits for an inference still running before it gives up on it.
INFERENCE_STOP_WAIT_S = 2.0
# Test-only: shift this node's clock readings by this many seconds (a second host's clock on one machine).
CLOCK_OFFSET_ENV = "LEROBOT_ROS_TEST_CLOCK_OFFSET_S"


def injected_clock_offset_ns(environ: dict[str, str] | None = None) -> int:
    """The test-only clock shift from `LEROBOT_ROS_TEST_CLOCK_OFFSET_S` (0 when unset)."""
    text = (os.environ if environ is None else environ).get(CLOCK_OFFSET_ENV, "")
    if not text:
        return 0
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not math.isfinite(value):
        raise PolicyConfigError(f"{CLOCK_OFFSET_ENV}={text!r} is not a number of seconds; unset it (test-only hook)")
    return round(value * NS)


class InferenceWorkers:
    """`count` daemon threads running the inferences handed to `submit`.

    concurrent.futures' workers are joined at interpreter exit, so a long inference (a big model on a CPU)
    would keep a stopped node alive until it ends; these can be left behind (`stop` says whether any was).
    """

    def __init__(self, count: int, guard: WorkerGuard | None = None) -> None:
        self._jobs: queue.SimpleQueue[Callable[[], None] | None] = queue.SimpleQueue()
        if guard is None:
            self._threads = [
                threading.Thread(target=self._work, name=f"inference_{i}", daemon=True) for i in range(count)
            ]
            for thread in self._threads:
                thread.start()
        else:
            self._threads = [guard.thread(f"inference worker {i}", self._work) for i in range(count)]

    def submit(self, job: Callable[[], None]) -> None:
        self._jobs.put(job)

    def _work(self) -> None:
        while (job := self._jobs.get()) is not None:
            job()

    def stop(self, timeout: float) -> bool:
        """Drop queued jobs, let running ones end within `timeout` s; False when one is still running."""
        while True:
            try:
                self._jobs.get_nowait()
            except queue.Empty:
                break
        for _ in self._threads:
            self._jobs.put(None)
        deadline = time.monotonic() + timeout
        for thread in self._threads:
            thread.join(max(0.0, deadline - time.monotonic()))
        return not any(thread.is_alive() for thread in self._threads)


class PolicyNode(LifecycleNode):
    """See the module docstring."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__("policy", **kwargs)
        self.params = declare_parameters(
            self, PolicyNodeParameters, check=self._check_change, applied=self._apply, defer_errors=True
        )
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._new_message = threading.Event()
        self._dispatcher: threading.Thread | None = None
        self._workers: InferenceWorkers | None = None
        self._policy: ChunkPolicy | None = None
        self._assembler: ObservationAssembler | None = None
        self._mapping: ActionMapping | None = None
        self._scheduler: InferenceScheduler | None = None
        self._subscriptions_made: list[Any] = []
        self._period_ns = 0
        self._chunk_id = 0
        self._state = "unconfigured"
        self._message = ""
        self._stale = 0
        self._observation_age = 0.0
        self._last_inference = 0.0
        self._advice = Advice(Bottleneck.NONE)
        self._warm = False
        self._stamp_from_header = True
        self._task = str(self._param("task"))
        self._chunk_task = ""
        self._rtc: RtcSettings | None = None
        self._rtc_last: tuple[int, np.ndarray] | None = None  # (observation stamp, actions) of the last chunk published
        self._lanes: RobotLanes | None = None  # with `robots`: one lane per robot (nodes/robot_lanes.py)
        self._chunk_pub = self.create_publisher(ActionChunk, str(self._param("chunk_topic")), CHUNK_QOS)
        self._status_pub = self.create_publisher(PolicyStatus, "~/status", STATUS_QOS)
        self._diagnostics = DiagnosticsPublisher(self)
        # Dispatcher, inference workers and the status timer: an unexpected exception in any of them is an error
        # state (ERROR status and diagnostics, lifecycle error transition), never a silently dead thread.
        self._guard = WorkerGuard.for_node(self, hardware_id="policy")
        self._status_timer = self.create_timer(1.0, self._guard.wrap("status", self._publish_status))
        self._task_sub = self.create_subscription(String, "~/task", self._on_task, TASK_QOS)
        self._clock_shift_ns = injected_clock_offset_ns()
        if self._clock_shift_ns:
            self.get_logger().warning(
                f"test hook {CLOCK_OFFSET_ENV}: this node's clock reads {self._clock_shift_ns / NS:+.3f} s off"
            )
        self._publish_status()

    def _now_ns(self) -> int:
        """This node's clock (shifted by the test-only hook, if set)."""
        return int(self.get_clock().now().nanoseconds) + self._clock_shift_ns

    def _on_task(self, msg: String) -> None:
        """A task on `~/task` becomes the `task` parameter (validated there; a refused one is logged)."""
        result = self.set_parameters([Parameter("task", Parameter.Type.STRING, msg.data)])[0]
        if not result.successful:
            self.get_logger().error(f"task on ~/task refused: {result.reason}")

    def _check_change(
        self, old: PolicyNodeParameters, new: PolicyNodeParameters, changed: frozenset[str]
    ) -> str | None:
        """Scheduling, freshness and task parameters apply to the running node; the others are read-only."""
        if "task" in changed:
            bad = sorted({f"U+{ord(c):04X}" for c in new.task if (ord(c) < 32 and c != "\t") or ord(c) == 127})
            if bad:
                return f"task contains control characters ({', '.join(bad)}); use printable text on one line"
        if self._scheduler is not None and changed & SCHEDULER_PARAMETERS.keys():
            try:
                self._scheduler_config_of(new)
            except PolicyConfigError as err:
                return str(err)
        return None

    def _apply(self, config: PolicyNodeParameters, changed: frozenset[str]) -> None:
        if "task" in changed:
            self._task = config.task
            self.get_logger().info(f"task: {config.task!r}")
        if changed & SCHEDULER_PARAMETERS.keys() and self._scheduler is not None:
            scheduler_config = self._scheduler_config_of(config)
            with self._lock:
                self._scheduler.config = scheduler_config
        if changed & SCHEDULER_PARAMETERS.keys() and self._lanes is not None:
            lanes_config = self._scheduler_config()
            with self._lock:
                self._lanes.set_scheduler_config(lanes_config)

    def _scheduler_config_of(self, config: PolicyNodeParameters) -> SchedulerConfig:
        assert self._scheduler is not None
        changes = {field: float(getattr(config, name)) for name, field in SCHEDULER_PARAMETERS.items()}
        return dataclasses.replace(self._scheduler.config, **changes)

    def _param(self, name: str) -> Any:
        """A parameter's current value, from the table's config."""
        return getattr(self.params.config, name)

    def _scheduler_config(self) -> SchedulerConfig:
        return SchedulerConfig(
            threshold=float(self._param("threshold")),
            margin_s=float(self._param("margin")),
            max_observation_age_s=float(self._param("max_observation_age")),
            future_tolerance_s=float(self._param("future_tolerance")),
        )

    def on_configure(self, state: LifecycleState) -> TransitionCallbackReturn:
        self._guard.clear()
        result = configure_transition(
            self,
            lambda: (self.params.require(), self._configure()),
            expected=(PolicyLoadError, PolicyConfigError, ObservationError, ContractError),
            on_failure=lambda reason: self._set_state("error", reason),
        )
        if result == TransitionCallbackReturn.SUCCESS:
            self._set_state("inactive", "")
        return result

    def _configure(self) -> None:
        spec = str(self._param("checkpoint"))
        if not spec:
            raise PolicyLoadError(
                "parameter `checkpoint` is empty: set a checkpoint directory, Hub repo id or scripted"
            )
        robots = parse_robots(self._param("robots"))
        policy, contract = resolve_policy(
            spec,
            str(self._param("contract")),
            device=str(self._param("device")),
            remote_timeout=float(self._param("remote_timeout")),
            remote_access=RemoteAccess(
                str(self._param("remote_token_file")),
                str(self._param("remote_tls_ca")),
                str(self._param("remote_tls_cert")),
                str(self._param("remote_tls_key")),
            ),
            image_encoding=str(self._param("image_encoding")),
            jpeg_quality=int(self._param("jpeg_quality")),
        )
        if not isinstance(policy, RemotePolicy) and str(self._param("image_encoding")) != "raw":
            self.get_logger().warning(
                f"image_encoding {self._param('image_encoding')} applies to a grpc:// policy server; {spec} runs in "
                "this process, which gets the images as they are"
            )
        if robots:
            qos = {"chunk": CHUNK_QOS, "status": STATUS_QOS, "image": IMAGE_QOS, "vector": VECTOR_QOS}
            self._lanes = RobotLanes(self, policy, contract, robots, self._scheduler_config(), qos)
            self._policy, self._period_ns = policy, self._lanes.period_ns
            self.get_logger().info(
                f"configured: {policy.name} ({policy.horizon} steps at {NS / self._period_ns:g} Hz) for "
                f"{len(robots)} robots {list(robots)}, batched; task {self._param('task')!r}"
            )
            return
        self._mapping = ActionMapping(contract, policy.action_dim, policy.action_names)
        self._assembler = ObservationAssembler(
            contract,
            policy.inputs,
            latency_s=float(self._param("observation_latency")),
            future_tolerance_s=float(self._param("future_tolerance")),
            max_clock_offset_s=float(self._param("max_clock_offset")),
        )
        self._scheduler = InferenceScheduler(self._scheduler_config())
        self._rtc = self._rtc_settings(policy)
        self._policy = policy
        self._period_ns = round(NS / (policy.fps or contract.fps))
        self._stamp_from_header = contract.stamp == "header"
        for topic, keys in self._assembler.topics.items():
            feature = contract.features[keys[0]]
            qos = IMAGE_QOS if feature.is_image else VECTOR_QOS
            callback = self._make_callback(topic)
            self._subscriptions_made.append(
                self.create_subscription(import_message_type(feature.type), topic, callback, qos)
            )
        relative = ""
        if isinstance(policy, CheckpointPolicy) and policy.relative_joints:
            relative = f"; actions relative to observation.state for {', '.join(policy.relative_joints)}"
        self.get_logger().info(
            f"configured: {policy.name} ({policy.horizon} steps at {NS / self._period_ns:g} Hz) on "
            f"{sorted(self._assembler.topics)}; task {self._param('task')!r}{relative}"
        )

    def _rtc_settings(self, policy: ChunkPolicy) -> RtcSettings | None:
        """RTC settings when `blend` is rtc (PolicyConfigError when the policy cannot inpaint)."""
        blend = str(self._param("blend"))
        if blend not in tuple(m.value for m in BlendMode):
            raise PolicyConfigError(f"blend must be one of {[m.value for m in BlendMode]}, got {blend!r}")
        if blend != BlendMode.RTC.value:
            return None
        if not getattr(policy, "can_inpaint", False):
            raise PolicyConfigError(
                f"blend rtc needs a policy that can inpaint its chunk (diffusion); {policy.name} cannot: "
                "use blend replace, crossfade or ensemble"
            )
        delay, horizon = int(self._param("rtc_inference_delay")), int(self._param("rtc_execution_horizon"))
        return RtcSettings(
            inference_delay=None if delay < 0 else delay,
            execution_horizon=None if horizon == 0 else horizon,
            max_guidance_weight=float(self._param("rtc_max_guidance_weight")),
            start_noise_level=float(self._param("rtc_start_noise_level")),
        )

    def _rtc_prefix(self, observation_ns: int, now_ns: int) -> ChunkPrefix | None:
        """The previous chunk's steps from `observation_ns` on, for the next inference (call under the lock)."""
        if self._rtc is None or self._rtc_last is None or self._policy is None or self._scheduler is None:
            return None
        stamp_ns, actions = self._rtc_last
        previous = remaining_steps(actions, stamp_ns, self._period_ns, observation_ns)
        scheduler = self._scheduler
        delay = measured_delay_steps(
            (now_ns - observation_ns) / NS, scheduler.expected_inference_s, scheduler.config.margin_s, self._period_ns
        )
        return make_prefix(self._rtc, previous, self._policy.horizon, delay)

    def _make_callback(self, topic: str) -> Any:
        def on_message(msg: Any) -> None:
            receive = self._now_ns()
            stamp = Time.from_msg(msg.header.stamp).nanoseconds if self._stamp_from_header else receive
            with self._lock:
                if self._assembler is not None:
                    self._assembler.push(topic, msg, stamp, receive)
            self._new_message.set()

        return on_message

    def on_activate(self, state: LifecycleState) -> TransitionCallbackReturn:
        if self._lanes is not None:
            self._lanes.start()
            self._set_state("active", "")
            self.get_logger().info("active")
            return super().on_activate(state)
        assert self._assembler is not None and self._scheduler is not None
        with self._lock:
            self._assembler.start(self._now_ns())
            self._scheduler.reset()
            self._rtc_last = None
        self._warm = not bool(self._param("warmup"))
        # A fresh stop event per activation: an inference left running by the last deactivation stays stopped.
        self._stop = threading.Event()
        self._workers = InferenceWorkers(int(self._param("inference_workers")), self._guard)
        self._dispatcher = self._guard.thread("inference dispatch", self._dispatch, self._stop, self._workers)
        self._set_state("active", "")
        self.get_logger().info("active")
        return super().on_activate(state)

    def on_deactivate(self, state: LifecycleState) -> TransitionCallbackReturn:
        self.stop_threads()
        self._set_state("inactive", "")
        return super().on_deactivate(state)

    def on_cleanup(self, state: LifecycleState) -> TransitionCallbackReturn:
        self.stop_threads()
        for sub in self._subscriptions_made:
            self.destroy_subscription(sub)
        self._subscriptions_made.clear()
        if self._lanes is not None:
            self._lanes.destroy()
            self._lanes = None
        if isinstance(self._policy, RemotePolicy):
            self._policy.close()
        self._policy = self._assembler = self._mapping = self._scheduler = None
        self._set_state("unconfigured", "")
        return TransitionCallbackReturn.SUCCESS

    def on_shutdown(self, state: LifecycleState) -> TransitionCallbackReturn:
        self.stop_threads()
        return TransitionCallbackReturn.SUCCESS

    def on_error(self, state: LifecycleState) -> TransitionCallbackReturn:
        """A worker failed (or a transition did): stop inferring and release, to unconfigured; no more chunks, so
        the executor holds. Configure + activate start again."""
        self.on_cleanup(state)
        self._set_state("error", "; ".join(f.message for f in self._guard.failures) or "a transition failed")
        return TransitionCallbackReturn.SUCCESS

    def stop_threads(self) -> None:
        """Stop dispatching; results of inferences still running are dropped (deactivate, cleanup, `main`)."""
        self._stop.set()
        self._new_message.set()
        if self._lanes is not None:
            self._lanes.stop()
        if self._dispatcher is not None and self._dispatcher is not threading.current_thread():
            self._dispatcher.join(timeout=5.0)
        self._dispatcher = None
        if self._workers is not None:
            if not self._workers.stop(INFERENCE_STOP_WAIT_S):
                self.get_logger().warning(
                    f"an inference still running after {INFERENCE_STOP_WAIT_S:g} s was left behind; "
                    "its result will not be published"
                )
            self._workers = None

    def _dispatch(self, stop: threading.Event, workers_pool: InferenceWorkers) -> None:
        """Start inferences when due, on the newest usable frame (runs in its own thread)."""
        assert self._assembler is not None and self._scheduler is not None
        workers = int(self._param("inference_workers"))
        last_jumps = 0
        pause = 0.0
        while not stop.wait(pause):
            self._new_message.wait(self._idle_wait(pause))
            self._new_message.clear()
            pause = 0.0
            with self._lock:
                self._assembler.poll(self._now_ns())
                if self._assembler.stats.clock_jumps != last_jumps:
                    last_jumps = self._assembler.stats.clock_jumps
                    self._scheduler.reset()
                    self._rtc_last = None
                    self._note(self._assembler.stats.last_problem)
                # Freshness and scheduling on the stamps' (the robot's) clock, whatever this host's clock says.
                now = self._assembler.stamp_clock(self._now_ns())
                frame = self._assembler.newest()
                if not self._scheduler.should_start(now, 1 if not self._warm else workers):
                    start = self._scheduler.start_at_ns()
                    # Due but every worker busy: look again soon; else sleep until due (capped).
                    pause = 0.005 if start is None or start <= now else min((start - now) / NS, 0.05)
                    continue
                if frame is None:
                    self._note_waiting(now)
                    continue
                verdict = self._scheduler.check_observation(frame.time_ns, now)
                if verdict is ObservationVerdict.ALREADY_USED:
                    continue  # wait for the next message
                if verdict is not ObservationVerdict.OK:
                    self._stale += 1
                    age = (now - frame.time_ns) / NS
                    self._note(f"newest observation is {verdict.value} (age {age:.3f} s); waiting for a usable one")
                    continue
                self._observation_age = (now - frame.time_ns) / NS
                try:
                    observation = self._assembler.build(frame)
                except ObservationError as err:
                    self._note(str(err))
                    continue
                horizon = self._policy.horizon if self._policy is not None else 1
                self._scheduler.inference_started(frame.time_ns, self._period_ns, horizon)
                prefix = self._rtc_prefix(frame.time_ns, now)
            observation[TASK_KEY] = self._task
            publish = self._warm  # the first inference after activation is the warm-up
            self._warm = True
            workers_pool.submit(functools.partial(self._infer, stop, frame.time_ns, observation, publish, prefix))

    @staticmethod
    def _idle_wait(pause: float) -> float:
        """How long to wait for a message: not at all after a timed pause, else until one arrives (capped)."""
        return 0.0 if pause > 0 else 0.05

    def _note_waiting(self, now: int) -> None:
        assert self._assembler is not None
        waiting = self._assembler.waiting_for
        problem = self._assembler.stats.last_problem
        if waiting:
            topics = sorted({self._assembler.sources[k].topic for k in waiting})
            self._note(f"waiting for the first usable message on {topics}" + (f": {problem}" if problem else ""))
        elif problem:
            self._note(problem)
        else:
            self._note("waiting for a complete observation (stale or out-of-sync inputs)")

    def _note(self, message: str) -> None:
        if message and message != self._message:
            self.get_logger().warning(message, throttle_duration_sec=2.0)
        self._message = message

    def _infer(
        self,
        stop: threading.Event,
        observation_ns: int,
        observation: dict[str, Any],
        publish: bool,
        prefix: ChunkPrefix | None = None,
    ) -> None:
        """One inference (in a worker thread); once `stop` is set its result is dropped. `prefix`: real-time
        chunking's previous chunk (only with blend rtc)."""
        policy, scheduler, mapping = self._policy, self._scheduler, self._mapping
        assert policy is not None and scheduler is not None and mapping is not None
        start = time.perf_counter()
        published = False
        try:
            if prefix is None:
                actions = np.asarray(policy.predict_chunk(observation), dtype=np.float64)
            else:
                actions = np.asarray(policy.predict_chunk(observation, prefix), dtype=np.float64)  # type: ignore[call-arg]
            duration = time.perf_counter() - start
            if stop.is_set():
                return  # deactivated or shutting down while the inference ran
            problem = self._check_actions(actions)
            if problem:
                self._note(problem)
                self.get_logger().error(problem, throttle_duration_sec=2.0)
            elif publish:
                self._publish_chunk(observation_ns, mapping.to_ros(actions), duration, str(observation[TASK_KEY]))
                published = True
                if self._rtc is not None:
                    with self._lock:
                        if self._rtc_last is None or observation_ns > self._rtc_last[0]:
                            self._rtc_last = (observation_ns, actions)
        except Exception as err:  # a failing model must not kill the node: report it and keep trying
            duration = time.perf_counter() - start
            if stop.is_set() or not self.context.ok():
                return  # stopping: nothing to report
            self._note(f"inference failed: {type(err).__name__}: {err}")
            self.get_logger().error(traceback.format_exc(), throttle_duration_sec=5.0)
        self._last_inference = duration
        with self._lock:
            scheduler.inference_finished(observation_ns, duration, published)
            expected = scheduler.expected_inference_s + scheduler.config.margin_s
        self._advise(policy, expected)

    def _advise(self, policy: ChunkPolicy, expected_s: float) -> None:
        """Name the bottleneck when inferences cannot keep the chunk fed: one throttled line, and /diagnostics."""
        remote = policy if isinstance(policy, RemotePolicy) else None
        self._advice = advise(
            expected_s,
            policy.horizon * self._period_ns / NS,
            int(self._param("inference_workers")),
            remote.link.figures() if remote is not None else None,
            image_encoding=remote.image_encoding if remote is not None else "raw",
            jpeg_quality=remote.jpeg_quality if remote is not None else 90,
            has_images=any(f.visual for f in policy.inputs),
        )
        if self._advice.message:
            self.get_logger().warning(self._advice.message, throttle_duration_sec=10.0)

    def _check_actions(self, actions: np.ndarray) -> str:
        assert self._policy is not None
        expected = self._policy.action_dim
        if actions.ndim != 2 or actions.shape[1] != expected or actions.shape[0] < 1:
            return f"the policy returned actions of shape {actions.shape}, not (horizon, {expected}); not published"
        if not np.all(np.isfinite(actions)):
            return "the policy returned NaN/inf actions; chunk not published (the executor holds)"
        return ""

    def _publish_chunk(self, observation_ns: int, actions: np.ndarray, duration: float, task: str) -> None:
        assert self._mapping is not None and self._policy is not None
        with self._lock:
            self._chunk_id += 1
            chunk_id = self._chunk_id
        msg = chunk_message(
            observation_ns, self._mapping.joint_names, actions, self._period_ns, chunk_id, duration,
            self._policy.name, task,
        )  # fmt: skip
        self._chunk_task = task
        self._chunk_pub.publish(msg)
        if self._message.startswith(("waiting", "newest observation", "the policy returned", "inference failed")):
            self._message = ""

    def _set_state(self, state: str, message: str) -> None:
        self._state = state
        self._message = message
        self._publish_status()

    def _publish_status(self) -> None:
        msg = PolicyStatus()
        msg.header.stamp = self.get_clock().now().to_msg()
        msg.state = self._state
        failures = self._guard.failures
        if failures:
            msg.state = "error"
        msg.policy = self._policy.name if self._policy is not None else str(self._param("checkpoint"))
        msg.device = str(self._param("device"))
        msg.chunks_published = self._chunk_id if self._lanes is None else self._lanes.chunks_published
        msg.last_inference_time = float(self._last_inference if self._lanes is None else self._lanes.last_inference)
        msg.mean_inference_time = float(self._scheduler.mean_inference_s) if self._scheduler is not None else 0.0
        msg.observation_age = float(self._observation_age)
        msg.stale_observations = self._stale if self._lanes is None else self._lanes.stale
        msg.message = "; ".join(f.message for f in failures) if failures else self._message
        if self._lanes is not None and not failures and not msg.message:
            msg.message = self._lanes.problems()
        msg.task = self._task
        msg.last_chunk_task = self._chunk_task
        self._status_pub.publish(msg)
        if self._lanes is not None:
            self._lanes.publish_status(msg.state, msg.device, msg.task)
        self._publish_diagnostics(msg)

    def _clock_offset_text(self) -> str:
        """This node's clock minus the observations' stamps (s), smallest transport delay included."""
        assembler = self._assembler
        offset = assembler.clock_offset_ns if assembler is not None else None
        return "unknown" if offset is None else f"{offset / NS:.4f}"

    def _link_values(self) -> dict[str, str]:
        """The policy server link's figures (means over the last calls); none for a local policy."""
        policy = self._policy
        figures = policy.link.figures() if isinstance(policy, RemotePolicy) else None
        if figures is None:
            return {}
        assert isinstance(policy, RemotePolicy)
        return {
            "image_encoding": policy.image_encoding,
            "link_request_bytes": f"{figures.request_bytes:.0f}",
            "link_transfer_s": f"{figures.transfer_s:.4f}",
            "link_mbit_s": f"{figures.mbit_s:.3f}",
            "server_inference_s": f"{figures.server_inference_s:.4f}",
            "image_encode_s": f"{figures.encode_s:.4f}",
        }

    def _publish_diagnostics(self, status: PolicyStatus) -> None:
        scheduler = self._scheduler
        level = DiagnosticStatus.OK
        if status.state == "error":
            level = DiagnosticStatus.ERROR
        elif status.state == "active" and status.message:
            level = DiagnosticStatus.WARN
        values = {
            "state": status.state,
            "policy": status.policy,
            "device": status.device,
            "chunks_published": str(status.chunks_published),
            "last_inference_s": f"{status.last_inference_time:.4f}",
            "mean_inference_s": f"{status.mean_inference_time:.4f}",
            "expected_inference_s": f"{scheduler.expected_inference_s:.4f}" if scheduler is not None else "",
            "inferences_in_flight": str(scheduler.in_flight) if scheduler is not None else "0",
            "observation_age_s": f"{status.observation_age:.4f}",
            "stale_observations": str(status.stale_observations),
            "clock_offset_s": self._clock_offset_text(),
            "bottleneck": self._advice.bottleneck.value,
            "advice": self._advice.message,
            **self._link_values(),
            "task": status.task,
            "last_chunk_task": status.last_chunk_task,
        }
        if self._lanes is not None:
            values.update(self._lanes.diagnostic_values())
        name = f"{self.get_fully_qualified_name()}: policy"
        self._diagnostics.publish(
            diagnostic_status(name, level, status.message or status.state, values, hardware_id="policy"),
            stamp=status.header.stamp,
        )


def main(args: list[str] | None = None) -> int:
    return run_lifecycle_node(
        PolicyNode,
        "policy",
        PolicyNode.stop_threads,
        args=args,
        executor=lambda: ros_executors.ThreadPoolExecutor(num_threads=2),
    )


if __name__ == "__main__":
    sys.exit(main())
