"""Recorder node: ROS topics straight into a LeRobot v3 dataset, with `lerobot-record`'s episode workflow.

A lifecycle node and a thin shell: sampling (`recorder.sampler`), the workflow (`recorder.workflow`) and the
dataset thread (`recorder.sink`) are pure cores. Interfaces (relative to the node, default name `recorder`):

* subscriptions: every contract topic, raw (serialized bytes; images are only decoded for frames that use them)
* `~/record_episode` (lerobot_msgs/action/RecordEpisode): record one episode, feedback frames/dropped/elapsed
* `~/start_session`, `~/next_episode` (right arrow), `~/rerecord_episode` (left arrow), `~/stop_recording`
  (Esc): std_srvs/Trigger
* `~/status` (lerobot_msgs/RecorderStatus, latched), `~/episode_start` (RecorderStatus whose stamp is the
  episode start: the marker topic for `bag2dataset --split marker:...`), `/diagnostics`
"""

from __future__ import annotations

import os
import sys
import threading
import time
from pathlib import Path
from typing import Any

from diagnostic_msgs.msg import DiagnosticArray, DiagnosticStatus, KeyValue
from rcl_interfaces.msg import FloatingPointRange, IntegerRange, ParameterDescriptor, SetParametersResult
from rclpy.action import ActionServer, CancelResponse, GoalResponse
from rclpy.callback_groups import MutuallyExclusiveCallbackGroup, ReentrantCallbackGroup
from rclpy.lifecycle import LifecycleNode, LifecycleState, TransitionCallbackReturn
from rclpy.parameter import Parameter
from rclpy.qos import DurabilityPolicy, QoSProfile, ReliabilityPolicy
from rosbags.serde import SerdeError
from std_msgs.msg import String
from std_srvs.srv import Trigger

from lerobot_contract import ClockJumpError, Contract, ContractError, MessageMismatchError, load_contract
from lerobot_contract.align import AlignFeature
from lerobot_contract.frames import FrameDecoder
from lerobot_contract.sampler import STAMP_REJECTIONS, LiveSampler
from lerobot_contract.time import NS
from lerobot_msgs.action import RecordEpisode
from lerobot_msgs.msg import RecorderStatus
from lerobot_recorder.dataset import DatasetError, DatasetWriter, feature_specs
from lerobot_recorder.dataset.writer import uncommitted_dataset
from lerobot_recorder.recorder import RecorderError, WorkflowError
from lerobot_recorder.recorder.messages import build_typestore, has_header, header_stamp_ns
from lerobot_recorder.recorder.sink import EpisodeSink, SinkEvent, disk_free_bytes
from lerobot_recorder.recorder.workflow import Action, Command, EpisodeWorkflow, State, WorkflowConfig, validate_task
from lerobot_ros.executors import ThreadPoolExecutor
from lerobot_ros.message_conversion import import_message_type
from lerobot_ros.node_main import autostart, run_node
from lerobot_ros.worker_guard import WorkerGuard

WAITING_FOR_CLOCK = "waiting for /clock (use_sim_time is true and no clock message came yet)"
LATCHED = QoSProfile(depth=1, durability=DurabilityPolicy.TRANSIENT_LOCAL, reliability=ReliabilityPolicy.RELIABLE)


class Recorder(LifecycleNode):
    """The live recorder (see the module docstring)."""

    def __init__(self, name: str = "recorder", **kwargs: Any) -> None:
        super().__init__(name, **kwargs)
        self._declare_parameters()
        self.add_on_set_parameters_callback(self._on_set_parameters)
        self._lock = threading.RLock()
        self._contract: Contract | None = None
        self._sampler: LiveSampler | None = None
        self._sink: EpisodeSink | None = None
        self._workflow: EpisodeWorkflow | None = None
        # Not `_subscriptions`: that is rclpy's list of the node's subscriptions (the executor waits on it);
        # replacing it dropped the /clock subscription of use_sim_time, so sim time never advanced here.
        self._contract_subscriptions: list[Any] = []
        self._tick_timer: Any = None
        self._typestore: Any = None
        self._header_topics: set[str] = set()
        self._by_topic: dict[str, list[Any]] = {}
        self._root = Path(self._param("root")).expanduser()
        self._episode_index = 0
        self._episode_start_ns = 0
        self._num_saved = 0
        self._bad_messages = 0
        self._last_warn = 0.0
        self._outcome: dict[str, Any] | None = None
        self._last_episode: dict[str, Any] = {}
        self._status_dirty = True
        self._last_status = 0.0
        self._exit_code: int | None = None
        self._session_pending = False
        self._last_problem = ""
        self._config_error = ""
        self._control_group = ReentrantCallbackGroup()
        self._tick_group = MutuallyExclusiveCallbackGroup()
        self._sub_group = MutuallyExclusiveCallbackGroup()
        self._status_pub = self.create_publisher(RecorderStatus, "~/status", LATCHED)
        self._marker_pub = self.create_publisher(RecorderStatus, "~/episode_start", 10)
        self._diag_pub = self.create_publisher(DiagnosticArray, "/diagnostics", 10)
        # The sampling tick: an unexpected exception is logged, ERROR on /diagnostics and the lifecycle error path.
        self._guard = WorkerGuard.for_node(self, hardware_id="recorder")
        for name_, handler in (
            ("~/start_session", self._srv_start),
            ("~/next_episode", self._srv_next),
            ("~/rerecord_episode", self._srv_rerecord),
            ("~/stop_recording", self._srv_stop),
        ):
            self.create_service(Trigger, name_, handler, callback_group=self._control_group)
        self._action = ActionServer(
            self,
            RecordEpisode,
            "~/record_episode",
            execute_callback=self._execute_goal,
            goal_callback=self._on_goal,
            cancel_callback=lambda _goal: CancelResponse.ACCEPT,
            callback_group=self._control_group,
        )
        # The task of the next episodes, also from a topic (e.g. the one the policy node reads, remapped to both).
        self.create_subscription(String, "~/task", self._on_task, 10, callback_group=self._control_group)
        self.create_timer(
            float(self._param("diagnostics_period")), self._publish_diagnostics, callback_group=self._tick_group
        )
        self._publish_status()

    def _declare_parameters(self) -> None:
        def desc(text: str, *, read_only: bool = True, **kw: Any) -> ParameterDescriptor:
            return ParameterDescriptor(description=text, read_only=read_only, **kw)

        def frange(lo: float, hi: float) -> list[FloatingPointRange]:
            return [FloatingPointRange(from_value=lo, to_value=hi)]

        p = self.declare_parameter
        p("contract", "", desc("robot contract YAML (topics, fields, units, fps of every feature)"))
        p("root", "", desc("dataset folder"))
        p("repo_id", "", desc("dataset repo id (user/name); default local/<root folder name>"))
        p("fps", 0, desc("dataset fps; 0 = the contract's", integer_range=[IntegerRange(from_value=0, to_value=1000)]))
        p("task", "", desc("task text of the next episodes (changeable at run time)", read_only=False))
        p("episode_time_s", 60.0, desc("length of each episode", floating_point_range=frange(0.01, 86400.0)))
        p(
            "reset_time_s",
            60.0,
            desc("pause between episodes to reset the scene", floating_point_range=frange(0, 86400)),
        )
        p("num_episodes", 50, desc("episodes of a session", integer_range=[IntegerRange(from_value=1, to_value=10**6)]))
        p("resume", False, desc("append to the dataset at root (it must exist and have the contract's schema)"))
        p("video", True, desc("encode cameras as video (false: PNG images in the parquet files)"))
        p("video_codec", "libsvtav1", desc("libsvtav1 (LeRobot's default) or h264 (faster)"))
        p("push_to_hub", False, desc("upload the dataset to the Hub at the end of a session"))
        p("private", False, desc("with push_to_hub: create a private repo"))
        p("start_session", True, desc("start a session of num_episodes at activation (false: wait for controls)"))
        p("autostart", True, desc("configure and activate at start-up"))
        p("shutdown_when_done", False, desc("exit once the session has stopped (for launch files and scripts)"))
        p("latency_s", 0.15, desc("how long a frame waits for late messages", floating_point_range=frange(0.0, 5.0)))
        p(
            "startup_timeout_s",
            10.0,
            desc(
                "wait this long at configure for the contract topics; 0 = do not check",
                floating_point_range=frange(0.0, 3600.0),
            ),
        )
        p("reliable", False, desc("subscribe RELIABLE (needs reliable publishers); default BEST_EFFORT"))
        p("queue_depth", 30, desc("subscription depth", integer_range=[IntegerRange(from_value=1, to_value=10000)]))
        p(
            "max_queue_s",
            2.0,
            desc(
                "sampled frames waiting for the writer, in seconds, before frames are dropped",
                floating_point_range=frange(0.1, 600.0),
            ),
        )
        p(
            "min_free_mb",
            100.0,
            desc("stop recording below this much free disk space", floating_point_range=frange(0.0, 1e7)),
        )
        p(
            "clock_jump_s",
            1.0,
            desc(
                "a stamp or clock going back more than this is a clock reset", floating_point_range=frange(0.001, 1e6)
            ),
        )
        p(
            "diagnostics_period",
            1.0,
            desc("seconds between /diagnostics reports", floating_point_range=frange(0.05, 60)),
        )

    def _param(self, name: str) -> Any:
        return self.get_parameter(name).value

    def _on_task(self, msg: String) -> None:
        """A task on `~/task` becomes the `task` parameter (validated there); a refused one is logged."""
        result = self.set_parameters([Parameter("task", Parameter.Type.STRING, msg.data)])[0]
        if not result.successful:
            self.get_logger().error(f"task on ~/task refused: {result.reason}")

    def _on_set_parameters(self, params: list[Parameter]) -> SetParametersResult:
        for param in params:
            if param.name == "task" and param.value:
                try:
                    validate_task(str(param.value))
                except ValueError as err:
                    return SetParametersResult(successful=False, reason=str(err))
                with self._lock:
                    if self._workflow is not None:
                        self._workflow.set_task(str(param.value))
                        self._status_dirty = True
        return SetParametersResult(successful=True)

    # Lifecycle

    def on_configure(self, state: LifecycleState) -> TransitionCallbackReturn:
        try:
            self._configure()
        except (ContractError, DatasetError, RecorderError, ValueError) as err:
            self.get_logger().error(f"configure failed: {err}")
            self._set_error(str(err))
            return TransitionCallbackReturn.FAILURE
        return TransitionCallbackReturn.SUCCESS

    def _configure(self) -> None:
        if not self._param("contract"):
            raise RecorderError("parameter `contract` is empty: pass contract:=<robot contract YAML>")
        if not str(self._root) or str(self._root) == ".":
            raise RecorderError("parameter `root` is empty: pass root:=<dataset folder>")
        contract = load_contract(self._param("contract"))
        fps = int(self._param("fps")) or contract.fps
        config = WorkflowConfig(
            episode_time_s=float(self._param("episode_time_s")),
            reset_time_s=float(self._param("reset_time_s")),
            num_episodes=int(self._param("num_episodes")),
        )
        task = str(self._param("task"))
        if task:
            validate_task(task)
        elif self._param("start_session"):
            raise RecorderError("parameter `task` is empty: pass task:='what the episodes show' (LeRobot's --task)")
        prefixes = [p for p in os.environ.get("AMENT_PREFIX_PATH", "").split(os.pathsep) if p]
        self._typestore = build_typestore([f.type for f in contract.features.values()], prefixes)
        self._header_topics = {f.topic for f in contract.features.values() if has_header(self._typestore, f.type)}
        if contract.stamp == "header":
            no_header = sorted({f.topic for f in contract.features.values()} - self._header_topics)
            if no_header:
                raise RecorderError(
                    f"contract {contract.source}: stamp: header, but {', '.join(no_header)} carry no header; "
                    "set `stamp: receive` in the contract"
                )
        self._wait_for_topics(contract, float(self._param("startup_timeout_s")))
        writer = self._open_dataset(contract, fps)
        self._contract = contract
        self._episode_index = writer.num_episodes
        self._num_saved = writer.num_episodes
        features = [
            AlignFeature(f.key, max_age_ns=None if f.max_age_s is None else round(f.max_age_s * NS), image=f.is_image)
            for f in contract.features.values()
        ]
        tolerance = contract.sync_tolerance_s
        self._sampler = LiveSampler(
            features,
            fps,
            tolerance_ns=None if tolerance is None else round(tolerance * NS),
            latency_ns=round(float(self._param("latency_s")) * NS),
            clock_jump_ns=round(float(self._param("clock_jump_s")) * NS),
            max_samples=max(32, int(fps * 2)),
        )
        values = FrameDecoder(contract, self._typestore.deserialize_cdr, deserialize_errors=(SerdeError,))
        self._sink = EpisodeSink(
            writer,
            values,
            self._on_sink_event,
            max_queue=max(2, round(float(self._param("max_queue_s")) * fps)),
            min_free_bytes=round(float(self._param("min_free_mb")) * 1e6),
        )
        self._workflow = EpisodeWorkflow(config)
        if task:
            self._workflow.task = task
        if self._now_ns() == 0:
            self._workflow.message = WAITING_FOR_CLOCK
        self._by_topic = {}
        for feat in contract.features.values():
            self._by_topic.setdefault(feat.topic, []).append(feat)
        reliability = ReliabilityPolicy.RELIABLE if self._param("reliable") else ReliabilityPolicy.BEST_EFFORT
        qos = QoSProfile(depth=int(self._param("queue_depth")), reliability=reliability)
        for topic, feats in self._by_topic.items():
            self._contract_subscriptions.append(
                self.create_subscription(
                    import_message_type(feats[0].type),
                    topic,
                    lambda raw, topic=topic: self._on_message(topic, raw),
                    qos,
                    callback_group=self._sub_group,
                    raw=True,
                )
            )
        self.get_logger().info(
            f"recording {', '.join(contract.features)} at {fps} fps into {self._root} "
            f"({writer.num_episodes} episode(s) there)"
        )
        self._status_dirty = True
        self._publish_status()

    def _wait_for_topics(self, contract: Contract, timeout: float) -> None:
        if timeout <= 0:
            return
        deadline = time.monotonic() + timeout
        while True:
            missing = []
            for feat in contract.features.values():
                infos = self.get_publishers_info_by_topic(feat.topic)
                types = {i.topic_type for i in infos}
                if types and feat.type not in types:
                    raise RecorderError(
                        f"{feat.topic} is published as {', '.join(sorted(types))} but contract {contract.source} "
                        f"declares {feat.type} for {feat.key}; fix the contract or the publisher"
                    )
                if not infos:
                    missing.append(feat.topic)
            if not missing:
                return
            if time.monotonic() >= deadline:
                raise RecorderError(
                    f"contract topic(s) never appeared within {timeout:g} s: {', '.join(dict.fromkeys(missing))}; "
                    "start the drivers/cameras (or the sim bridge) first, check namespaces and ROS_DOMAIN_ID, "
                    "or raise startup_timeout_s"
                )
            time.sleep(0.1)

    def _open_dataset(self, contract: Contract, fps: int) -> DatasetWriter:
        features = feature_specs(contract, video=bool(self._param("video")))
        codec = str(self._param("video_codec"))
        exists = (self._root / "meta" / "info.json").is_file()
        # A root left by a recorder killed before its first save holds no episode: this run takes it over.
        leftover = uncommitted_dataset(self._root)
        if self._param("resume") and not leftover:
            if not exists:
                raise RecorderError(f"resume:=true but {self._root} holds no dataset (no meta/info.json)")
            return DatasetWriter.open(self._root, expect_features=features, expect_fps=fps, video_codec=codec)
        if self._root.exists() and any(self._root.iterdir()) and not leftover:
            raise RecorderError(
                f"{self._root} already exists; pass resume:=true to add episodes to it, or choose another root"
            )
        repo_id = str(self._param("repo_id")) or f"local/{self._root.resolve().name}"
        return DatasetWriter.create(
            self._root,
            repo_id=repo_id,
            fps=fps,
            features=features,
            robot_type=contract.robot_type,
            video_codec=codec,
            contract=contract.to_dict(),
        )

    def on_activate(self, state: LifecycleState) -> TransitionCallbackReturn:
        assert self._sampler is not None
        fps = self._sampler.fps
        self._tick_timer = self.create_timer(
            1.0 / (2 * fps), self._guard.wrap("sampling tick", self._tick), callback_group=self._tick_group
        )
        # Like lerobot-record, which connects the robot first: the session starts once every topic delivers.
        self._session_pending = bool(self._param("start_session"))
        return super().on_activate(state)

    def on_deactivate(self, state: LifecycleState) -> TransitionCallbackReturn:
        self._control(lambda wf, now: wf.stop(now))
        if self._tick_timer is not None:
            self.destroy_timer(self._tick_timer)
            self._tick_timer = None
        return super().on_deactivate(state)

    def on_cleanup(self, state: LifecycleState) -> TransitionCallbackReturn:
        self.release()
        return TransitionCallbackReturn.SUCCESS

    def on_shutdown(self, state: LifecycleState) -> TransitionCallbackReturn:
        self.release()
        return TransitionCallbackReturn.SUCCESS

    def on_error(self, state: LifecycleState) -> TransitionCallbackReturn:
        """A worker failed (WorkerGuard) or a transition did: release as cleanup does, to unconfigured."""
        self.release()
        return TransitionCallbackReturn.SUCCESS

    def release(self) -> None:
        """Stop subscriptions and close the dataset (an episode not yet saved is discarded)."""
        subscriptions, self._contract_subscriptions = self._contract_subscriptions, []
        for sub in subscriptions:
            self.destroy_subscription(sub)
        if self._tick_timer is not None:
            self.destroy_timer(self._tick_timer)
            self._tick_timer = None
        sink, self._sink = self._sink, None
        if sink is not None:
            sink.close(timeout=600.0)  # a save in progress (a long episode) finishes first
        # An episode goal still waiting for its outcome ends (aborted) instead of waiting forever.
        self._finish_outcome(False, self._episode_index, self._last_episode, "the recorder stopped")
        with self._lock:
            self._sampler = None
            self._workflow = None

    # Data path

    def _now_ns(self) -> int:
        return int(self.get_clock().now().nanoseconds)

    def _on_message(self, topic: str, raw: bytes) -> None:
        sampler = self._sampler
        if sampler is None:
            return
        now = self._now_ns()
        if now == 0:
            # use_sim_time and no /clock yet (ROS time 0 is "not set"): no receive time to judge the stamp by, and
            # no episode yet (one starts on a tick of that clock). Taking it would tie the stamps to time 0.
            return
        try:
            stamp = header_stamp_ns(raw) if topic in self._header_topics and self._stamp_header else now
            payloads = {}
            for feat in self._by_topic[topic]:
                if feat.is_image:
                    payloads[feat.key] = raw
                else:
                    msg = self._typestore.deserialize_cdr(raw, feat.type)
                    payloads[feat.key] = feat.joint_units().apply(feat.raw_vector(msg))
        except (MessageMismatchError, RecorderError, SerdeError, ValueError, KeyError) as err:
            self._bad_messages += 1
            self._warn_throttled(f"{topic}: message ignored: {err}")
            with self._lock:
                if self._workflow is not None:
                    self._workflow.message = f"{topic}: message ignored: {err}"
            return
        with self._lock:
            try:
                refused = [
                    sampler.push(key, stamp, payload, now) in STAMP_REJECTIONS for key, payload in payloads.items()
                ]
            except ClockJumpError as err:
                self._on_clock_jump(str(err))
                return
            if any(refused):
                # One bad stamp is refused and counted (status, /diagnostics); the episode goes on.
                problem = f"{topic}: {sampler.last_rejection}"
                self._warn_throttled(problem)
                if self._workflow is not None:
                    self._workflow.message = problem
                    self._status_dirty = True

    @property
    def _stamp_header(self) -> bool:
        return self._contract is not None and self._contract.stamp == "header"

    def _warn_throttled(self, text: str) -> None:
        now = time.monotonic()
        if now - self._last_warn >= 2.0:
            self._last_warn = now
            self.get_logger().warning(text)

    def _on_clock_jump(self, text: str) -> None:
        message = f"{text}; the episode was ended there and saved (frames before the jump are consistent)"
        self.get_logger().warning(message)
        self._control(lambda wf, now: wf.next(now) if wf.state is State.RECORDING else [], message=message)

    def _tick(self) -> None:
        sampler, sink = self._sampler, self._sink
        if sampler is None or sink is None:
            return
        with self._lock:
            workflow = self._workflow
            if workflow is None:
                return
            if workflow.state is State.RECORDING and sampler.active:
                try:
                    end_ns = self._episode_start_ns + round(workflow.duration_s * NS)
                    for frame in sampler.poll(self._now_ns(), end_ns):
                        sink.put_frame(frame)
                except ClockJumpError as err:
                    self._on_clock_jump(str(err))
            if workflow.message == WAITING_FOR_CLOCK:
                workflow.message = ""  # the clock runs: this tick is on it
            problem = sink.counters.last_problem
            if problem and problem != self._last_problem:
                self._last_problem = problem
                workflow.message = f"frames dropped: {problem}"
                self.get_logger().error(workflow.message)
                self._status_dirty = True
            if self._session_pending:
                if sampler.silent:
                    workflow.message = f"waiting for the first message on {', '.join(sampler.silent)}"
                elif not sampler.clock_settled:
                    workflow.message = "waiting for the topics' stamps to agree on a clock"
                else:
                    self._session_pending = False
                    workflow.message = ""
                    self._control(lambda wf, now: wf.begin_session(wf.task, now))
            self._control(lambda wf, now: wf.tick(now))
        if self._status_dirty or time.monotonic() - self._last_status > 0.5:
            self._publish_status()

    def _control(self, step: Any, message: str | None = None) -> list[Command]:
        """Run one workflow step (under the lock) and carry out its commands."""
        with self._lock:
            workflow = self._workflow
            if workflow is None:
                raise WorkflowError("the recorder is not configured")
            before = workflow.state
            now_ns = self._now_ns()
            commands: list[Command] = step(workflow, now_ns / NS)
            if message:
                workflow.message = message
            for command in commands:
                self._execute(command, now_ns)
            if workflow.state is not before:
                self._on_state_change(before, workflow.state)
                self._publish_status()
            return commands

    def _execute(self, command: Command, now_ns: int) -> None:
        sampler, sink = self._sampler, self._sink
        assert sampler is not None and sink is not None
        if command.action is Action.START:
            self._episode_start_ns = now_ns
            start = sampler.start(now_ns)
            sink.start_episode(command.task)
            marker = self._status_msg()
            marker.header.stamp.sec, marker.header.stamp.nanosec = divmod(start, NS)
            self._marker_pub.publish(marker)
            self.get_logger().info(f"recording episode {self._episode_index}: {command.task!r}")
            return
        end_ns = now_ns
        if self._workflow is not None:
            # A tick that runs late (a busy machine) does not make the episode longer than asked.
            end_ns = min(now_ns, self._episode_start_ns + round(self._workflow.duration_s * NS))
        frames = sampler.stop(end_ns)
        if command.action is Action.SAVE:
            for frame in frames:
                sink.put_frame(frame)
            self._last_episode = self._episode_counts()
            sink.save_episode()
        else:
            self._last_episode = self._episode_counts()
            sink.discard_episode()
            self.get_logger().info(f"episode {self._episode_index} discarded")

    def _on_state_change(self, before: State, after: State) -> None:
        workflow = self._workflow
        assert workflow is not None
        if after is State.RESETTING:
            self.get_logger().info(f"reset the environment ({workflow.config.reset_time_s:g} s)")
        if after is State.STOPPED and before is not State.IDLE:
            self.get_logger().info(f"recording stopped; {self._num_saved} episode(s) in {self._root}")
            if self._param("push_to_hub") and self._sink is not None:
                self._sink.run_after(self._push_to_hub)
            elif self._param("shutdown_when_done"):
                self._exit_code = 0
        if after is State.ERROR:
            self.get_logger().error(f"recording stopped: {workflow.message}")
            if self._param("shutdown_when_done"):
                self._exit_code = 1

    def _push_to_hub(self) -> None:
        from lerobot_recorder.hub import HubError, push_dataset

        repo_id = str(self._param("repo_id")) or f"local/{self._root.resolve().name}"
        try:
            url = push_dataset(self._root, repo_id, private=bool(self._param("private")))
            self.get_logger().info(f"pushed {self._root} to {url}")
            code = 0
        except (HubError, OSError) as err:
            self.get_logger().error(f"push to the Hub failed: {err}; the dataset is still at {self._root}")
            code = 1
        if self._param("shutdown_when_done"):
            self._exit_code = code

    def _on_sink_event(self, event: SinkEvent) -> None:
        """Runs in the sink thread."""
        if event.kind == "saved":
            self._num_saved = event.episode_index + 1
            self._episode_index = event.episode_index + 1
            counts = {**self._last_episode, "frames": event.frames}
            self.get_logger().info(
                f"saved episode {event.episode_index}: {event.frames} frames, {counts.get('dropped', 0)} dropped"
            )
            self._finish_outcome(True, event.episode_index, counts, "saved")
            self._control(lambda wf, now: wf.saved(now) if wf.state is State.SAVING else [])
        elif event.kind == "discarded":
            self._finish_outcome(False, self._episode_index, self._last_episode, "discarded")
        elif event.kind == "failed":
            self.get_logger().error(event.message)
            self._finish_outcome(False, self._episode_index, self._last_episode, event.message)

            def on_failure(wf: EpisodeWorkflow, now: float) -> list[Command]:
                if wf.state is State.SAVING:
                    return wf.save_failed(event.message, now, fatal=event.fatal)
                if event.fatal:
                    return wf.fail(event.message, now)
                return wf.discard(event.message, now)

            self._control(on_failure)

    def _finish_outcome(self, saved: bool, index: int, counts: dict[str, Any], message: str) -> None:
        with self._lock:
            if self._outcome is not None and "done" not in self._outcome:
                self._outcome.update(done=True, saved=saved, index=index, message=message, **counts)

    def _set_error(self, message: str) -> None:
        with self._lock:
            if self._workflow is not None:
                self._workflow.fail(message, self._now_ns() / NS)
            self._config_error = message
        self._status_dirty = True
        self._publish_status()

    # Counters and status

    def _episode_counts(self) -> dict[str, int]:
        sampler, sink = self._sampler, self._sink
        if sampler is None or sink is None:
            return {"frames": 0, "dropped": 0}
        report = sampler.report
        dropped = report.frames_dropped + sink.counters.overrun + sink.counters.bad_frames
        return {"frames": report.frames_kept - sink.counters.overrun - sink.counters.bad_frames, "dropped": dropped}

    def _status_msg(self) -> RecorderStatus:
        msg = RecorderStatus()
        msg.header.stamp = self.get_clock().now().to_msg()
        workflow = self._workflow
        state = workflow.state if workflow is not None else State.IDLE
        if workflow is None and self._config_error:
            state = State.ERROR
        msg.state = int(state)
        msg.state_name = state.name.lower()
        msg.dataset_root = str(self._root)
        msg.repo_id = str(self._param("repo_id"))
        if workflow is None:
            msg.task = str(self._param("task"))
        else:
            msg.task = workflow.episode_task if state in (State.RECORDING, State.SAVING) else workflow.task
        msg.episode_index = self._episode_index
        msg.num_episodes = self._num_saved
        counts = self._episode_counts() if state is State.RECORDING else self._last_episode or self._episode_counts()
        msg.frames = max(0, int(counts.get("frames", 0)))
        msg.dropped = int(counts.get("dropped", 0))
        if workflow is not None:
            msg.elapsed_s = float(workflow.elapsed(self._now_ns() / NS))
            msg.message = workflow.message
        else:
            msg.message = self._config_error
        return msg

    def _publish_status(self) -> None:
        with self._lock:
            msg = self._status_msg()
            self._status_dirty = False
            self._last_status = time.monotonic()
        self._status_pub.publish(msg)

    def _publish_diagnostics(self) -> None:
        status = DiagnosticStatus(name=f"lerobot_recorder: {self.get_fully_qualified_name()}", hardware_id="dataset")
        values: dict[str, str] = {"root": str(self._root)}
        with self._lock:
            workflow, sampler, sink = self._workflow, self._sampler, self._sink
            state = workflow.state if workflow is not None else State.IDLE
            values["state"] = state.name.lower()
            values["episodes_saved"] = str(self._num_saved)
            values["bad_messages"] = str(self._bad_messages)
            if sampler is not None and sink is not None:
                report, live = sampler.report, sampler.live
                counts = self._episode_counts()
                values.update(
                    frames=str(counts["frames"]),
                    dropped=str(counts["dropped"]),
                    dropped_stale=str(report.frames_dropped_stale),
                    dropped_sync=str(report.frames_dropped_tolerance),
                    dropped_overrun=str(sink.counters.overrun),
                    dropped_bad_input=str(sink.counters.bad_frames),
                    late_samples=str(live.late_samples),
                    queued_frames=str(sink.queued_frames),
                    encoder_lag_frames=str(sink.encode_lag_frames),
                )
                for reason in STAMP_REJECTIONS:
                    values[f"rejected_stamps.{reason}"] = str(sampler.rejected.get(reason, 0))
                for key, feat in report.features.items():
                    mean = feat.sum_skew_s / report.frames_kept if report.frames_kept else 0.0
                    values[f"{key}.skew_max_s"] = f"{feat.max_skew_s:.4f}"
                    values[f"{key}.skew_mean_s"] = f"{mean:.4f}"
                    values[f"{key}.stale_drops"] = str(feat.stale_drops)
                    if feat.image:
                        values[f"{key}.images_reused"] = str(feat.reused)
                        values[f"{key}.images_unused"] = str(feat.unused)
                if sampler.active and sampler.waiting_for:
                    values["waiting_for"] = ", ".join(sampler.waiting_for)
            problem = workflow.message if workflow is not None else self._config_error
        try:
            free = disk_free_bytes(self._root)
            values["disk_free_mb"] = f"{free / 1e6:.1f}"
        except OSError:
            free = None
        low = free is not None and free < float(self._param("min_free_mb")) * 1e6
        if low and state is State.RECORDING:
            message = (
                f"disk almost full: {free / 1e6:.1f} MB free at {self._root} (min_free_mb="  # type: ignore[operator]
                f"{self._param('min_free_mb')}); recording stopped, saved episodes are intact"
            )
            self._control(lambda wf, now: wf.fail(message, now))
            problem = message
            state = State.ERROR
        if state is State.ERROR:
            status.level = DiagnosticStatus.ERROR
        elif (
            low
            or (sampler is not None and (sampler.report.frames_dropped or sampler.live.rejected))
            or (sink and sink.counters.overrun)
        ):
            status.level = DiagnosticStatus.WARN
        else:
            status.level = DiagnosticStatus.OK
        status.message = problem or values["state"]
        status.values = [KeyValue(key=k, value=v) for k, v in values.items()]
        array = DiagnosticArray()
        array.header.stamp = self.get_clock().now().to_msg()
        array.status = [status]
        self._diag_pub.publish(array)
        if self._status_dirty:
            self._publish_status()

    # Controls

    def _trigger(self, step: Any, response: Trigger.Response, what: str) -> Trigger.Response:
        try:
            commands = self._control(step)
        except (WorkflowError, ValueError) as err:
            response.success, response.message = False, str(err)
            return response
        workflow = self._workflow
        state = workflow.state.name.lower() if workflow is not None else "unconfigured"
        response.success = bool(commands) or what == "stop"
        response.message = f"{what}: now {state}" if response.success else f"{what}: nothing to do while {state}"
        self._publish_status()
        return response

    def _srv_start(self, request: Trigger.Request, response: Trigger.Response) -> Trigger.Response:
        return self._trigger(lambda wf, now: wf.begin_session(wf.task, now), response, "start session")

    def _srv_next(self, request: Trigger.Request, response: Trigger.Response) -> Trigger.Response:
        return self._trigger(lambda wf, now: wf.next(now), response, "next")

    def _srv_rerecord(self, request: Trigger.Request, response: Trigger.Response) -> Trigger.Response:
        return self._trigger(lambda wf, now: wf.rerecord(now), response, "re-record")

    def _srv_stop(self, request: Trigger.Request, response: Trigger.Response) -> Trigger.Response:
        return self._trigger(lambda wf, now: wf.stop(now), response, "stop")

    def _on_goal(self, goal: Any) -> GoalResponse:
        with self._lock:
            workflow = self._workflow
            if workflow is None or self._tick_timer is None:
                self.get_logger().warning("episode goal rejected: the recorder is not active")
                return GoalResponse.REJECT
            if workflow.state not in (State.IDLE, State.STOPPED) or self._outcome is not None:
                self.get_logger().warning(f"episode goal rejected: the recorder is {workflow.state.name.lower()}")
                return GoalResponse.REJECT
            self._outcome = {}
        return GoalResponse.ACCEPT

    def _execute_goal(self, goal_handle: Any) -> RecordEpisode.Result:
        result = RecordEpisode.Result()
        result.path = str(self._root)
        request = goal_handle.request
        try:
            self._control(lambda wf, now: wf.request_episode(request.task or wf.task, request.duration_s, now))
        except (WorkflowError, ValueError) as err:
            with self._lock:
                self._outcome = None
            goal_handle.abort()
            result.saved, result.message = False, str(err)
            return result
        feedback = RecordEpisode.Feedback()
        start = time.monotonic()
        cancelled = False
        while True:
            with self._lock:
                outcome = dict(self._outcome or {})
                counts = self._episode_counts()
            if outcome.get("done"):
                break
            if goal_handle.is_cancel_requested and not cancelled:
                cancelled = True
                self._control(lambda wf, now: wf.rerecord(now))
            feedback.frames = max(0, counts["frames"])
            feedback.dropped = counts["dropped"]
            feedback.elapsed_s = time.monotonic() - start
            goal_handle.publish_feedback(feedback)
            time.sleep(0.1)
        with self._lock:
            self._outcome = None
        result.saved = bool(outcome["saved"])
        result.episode_index = int(outcome["index"])
        result.frames = max(0, int(outcome.get("frames", 0)))
        result.dropped = int(outcome.get("dropped", 0))
        result.message = str(outcome["message"])
        if cancelled:
            goal_handle.canceled()
        elif result.saved:
            goal_handle.succeed()
        else:
            goal_handle.abort()
        return result

    def publish_final_status(self, linger_s: float = 0.3) -> None:
        """Publish the status once more and give subscribers a moment to receive it before the node exits."""
        self._publish_status()
        time.sleep(linger_s)

    def autostart(self) -> None:
        """Configure and activate when `autostart` is set; with `shutdown_when_done`, a failure ends `main` with 1."""
        if not autostart(self) and self._param("shutdown_when_done"):
            self.request_exit(1)

    def shutdown(self) -> None:
        """`main`'s last step while ROS still runs: final status, then close the dataset.

        An episode not yet saved (Ctrl-C, SIGTERM) is discarded; saved episodes are safe.
        """
        self.publish_final_status()
        self.release()

    def request_exit(self, code: int) -> None:
        """Make `main` exit with `code`."""
        self._exit_code = code

    @property
    def exit_code(self) -> int | None:
        """Set once the node should exit (shutdown_when_done)."""
        return self._exit_code


def main(args: list[str] | None = None) -> int:
    return run_node(
        Recorder,
        "recorder",
        args=args,
        executor=lambda: ThreadPoolExecutor(num_threads=4),
        start=lambda node, _executor: node.autostart(),
        finished=lambda node: node.exit_code,
        shutdown=Recorder.shutdown,
    )


if __name__ == "__main__":
    sys.exit(main())
