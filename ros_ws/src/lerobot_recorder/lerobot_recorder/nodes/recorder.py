"""Recorder node: ROS topics straight into a LeRobot v3 dataset, with `lerobot-record`'s episode workflow.

A lifecycle node and a thin shell: the episode session (`recorder.session`: messages -> sampler -> dataset
thread, the workflow, counters), the status and /diagnostics contents (`recorder.status`) and the parameter
table (`recorder.parameters`) are pure cores; the node holds the ROS wiring. Interfaces (relative to the node,
default name `recorder`):

* subscriptions: every contract topic, raw (serialized bytes; images are only decoded for frames that use them)
* `~/record_episode` (lerobot_msgs/action/RecordEpisode): record one episode, feedback frames/dropped/elapsed
* `~/start_session`, `~/next_episode` (right arrow), `~/rerecord_episode` (left arrow), `~/stop_recording`
  (Esc): std_srvs/Trigger
* `~/status` (lerobot_msgs/RecorderStatus, latched), `~/episode_start` (RecorderStatus whose stamp is the
  episode start: the marker topic for `bag2dataset --split marker:...`), `/diagnostics`
"""

from __future__ import annotations

import functools
import os
import sys
import time
from pathlib import Path
from typing import Any

from rclpy.action import ActionServer, CancelResponse, GoalResponse
from rclpy.callback_groups import MutuallyExclusiveCallbackGroup, ReentrantCallbackGroup
from rclpy.lifecycle import LifecycleNode, LifecycleState, TransitionCallbackReturn
from rclpy.parameter import Parameter
from rclpy.qos import DurabilityPolicy, QoSProfile, ReliabilityPolicy
from std_msgs.msg import String
from std_srvs.srv import Trigger

from lerobot_contract import Contract, ContractError, load_contract
from lerobot_contract.time import NS
from lerobot_dataset import DatasetError
from lerobot_msgs.action import RecordEpisode
from lerobot_msgs.msg import RecorderStatus
from lerobot_recorder.recorder import RecorderError, WorkflowError
from lerobot_recorder.recorder.messages import SequenceGaps, build_typestore
from lerobot_recorder.recorder.parameters import RecorderParameters
from lerobot_recorder.recorder.session import (
    RecordingSession,
    SamplingOptions,
    SessionHooks,
    SessionOptions,
    header_topics,
    open_dataset,
)
from lerobot_recorder.recorder.status import StatusSnapshot
from lerobot_recorder.recorder.workflow import WorkflowConfig, validate_task
from lerobot_ros.executors import ThreadPoolExecutor
from lerobot_ros.message_conversion import import_message_type
from lerobot_ros.node_kit.diagnostics import DiagnosticsPublisher, diagnostic_status
from lerobot_ros.node_kit.lifecycle import configure_transition
from lerobot_ros.node_kit.ros import declare_parameters
from lerobot_ros.node_main import autostart, run_node
from lerobot_ros.worker_guard import WorkerGuard

LATCHED = QoSProfile(depth=1, durability=DurabilityPolicy.TRANSIENT_LOCAL, reliability=ReliabilityPolicy.RELIABLE)
CONTROLS = {
    "~/start_session": "start session",
    "~/next_episode": "next",
    "~/rerecord_episode": "re-record",
    "~/stop_recording": "stop",
}


class Recorder(LifecycleNode):
    """The live recorder (see the module docstring)."""

    def __init__(self, name: str = "recorder", **kwargs: Any) -> None:
        super().__init__(name, **kwargs)
        self._params = declare_parameters(
            self, RecorderParameters, check=self._check_parameters, applied=self._parameters_applied
        )
        config = self._params.config
        self._root = Path(config.root).expanduser()
        # Not `_subscriptions`: that is rclpy's list of the node's subscriptions (the executor waits on it);
        # replacing it dropped the /clock subscription of use_sim_time, so sim time never advanced here.
        self._contract_subscriptions: list[Any] = []
        self._gaps = SequenceGaps()
        self._tick_timer: Any = None
        self._control_group = ReentrantCallbackGroup()
        self._tick_group = MutuallyExclusiveCallbackGroup()
        self._sub_group = MutuallyExclusiveCallbackGroup()
        self._status_pub = self.create_publisher(RecorderStatus, "~/status", LATCHED)
        self._marker_pub = self.create_publisher(RecorderStatus, "~/episode_start", 10)
        self._diagnostics = DiagnosticsPublisher(self)
        options = SessionOptions(
            root=self._root,
            repo_id=config.repo_id,
            private=config.private,
            push_to_hub=config.push_to_hub,
            shutdown_when_done=config.shutdown_when_done,
            min_free_mb=config.min_free_mb,
        )
        hooks = SessionHooks(
            now_ns=self._now_ns,
            log=self.get_logger(),
            publish_status=self._publish_status,
            publish_marker=self._publish_marker,
        )
        self._session = RecordingSession(options, hooks, task=config.task)
        # The sampling tick: an unexpected exception is logged, ERROR on /diagnostics and the lifecycle error path.
        self._guard = WorkerGuard.for_node(self, hardware_id="recorder")
        for service, what in CONTROLS.items():
            self.create_service(
                Trigger,
                service,
                lambda _request, response, what=what: self._trigger(what, response),
                callback_group=self._control_group,
            )
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
        self.create_timer(config.diagnostics_period, self._publish_diagnostics, callback_group=self._tick_group)
        self._publish_status()

    # Parameters

    def _check_parameters(
        self, _old: RecorderParameters, new: RecorderParameters, changed: frozenset[str]
    ) -> str | None:
        if "task" in changed and new.task:
            try:
                validate_task(new.task)
            except ValueError as err:
                return str(err)
        return None

    def _parameters_applied(self, config: RecorderParameters, changed: frozenset[str]) -> None:
        if "task" in changed:
            self._session.set_task(config.task)

    def _on_task(self, msg: String) -> None:
        """A task on `~/task` becomes the `task` parameter (validated there); a refused one is logged."""
        result = self.set_parameters([Parameter("task", Parameter.Type.STRING, msg.data)])[0]
        if not result.successful:
            self.get_logger().error(f"task on ~/task refused: {result.reason}")

    # Lifecycle

    def on_configure(self, state: LifecycleState) -> TransitionCallbackReturn:
        return configure_transition(
            self,
            self._configure,
            expected=(ContractError, DatasetError, RecorderError, ValueError),
            on_failure=self._configure_failed,
        )

    def _configure_failed(self, reason: str) -> None:
        """Release what configure made (a failure after the dataset opened must not keep its writer lock)."""
        self.release()
        self._session.set_error(reason)

    def _configure(self) -> None:
        config = self._params.config
        if not config.contract:
            raise RecorderError("parameter `contract` is empty: pass contract:=<robot contract YAML>")
        if not str(self._root) or str(self._root) == ".":
            raise RecorderError("parameter `root` is empty: pass root:=<dataset folder>")
        contract = load_contract(config.contract)
        fps = config.fps or contract.fps
        workflow = WorkflowConfig(
            episode_time_s=config.episode_time_s,
            reset_time_s=config.reset_time_s,
            num_episodes=config.num_episodes,
            topic_wait_s=config.topic_wait_s,
        )
        if config.task:
            validate_task(config.task)
        elif config.start_session:
            raise RecorderError("parameter `task` is empty: pass task:='what the episodes show' (LeRobot's --task)")
        prefixes = [p for p in os.environ.get("AMENT_PREFIX_PATH", "").split(os.pathsep) if p]
        typestore = build_typestore([f.type for f in contract.features.values()], prefixes)
        with_header = header_topics(contract, typestore)
        self._wait_for_topics(contract, config.startup_timeout_s)
        writer = open_dataset(
            self._root,
            contract,
            fps,
            video=config.video,
            codec=config.video_codec,
            resume=config.resume,
            repo_id=config.repo_id,
        )
        sampling = SamplingOptions(
            fps=fps,
            latency_s=config.latency_s,
            clock_jump_s=config.clock_jump_s,
            max_queue_s=config.max_queue_s,
            topic_timeout_s=config.topic_timeout_s,
        )
        self._session.configure(contract, writer, workflow, sampling, typestore, with_header)
        reliability = ReliabilityPolicy.RELIABLE if config.reliable else ReliabilityPolicy.BEST_EFFORT
        # A message queued longer than latency_s is late for its frame anyway (the tick releases due frames
        # whether or not the backlog was taken): the depth needs rate x latency_s (100 Hz x 0.15 s = 15), and
        # deeper queues only turn a stall into latency for every later frame. Overflow is counted (SequenceGaps).
        qos = QoSProfile(depth=config.queue_depth, reliability=reliability)
        for topic, msgtype in self._session.topics.items():
            self._contract_subscriptions.append(
                self.create_subscription(
                    import_message_type(msgtype),
                    topic,
                    functools.partial(self._on_message, topic),  # (raw, info): with the sequence numbers
                    qos,
                    callback_group=self._sub_group,
                    raw=True,
                )
            )
        self.get_logger().info(
            f"recording {', '.join(contract.features)} at {fps} fps into {self._root} "
            f"({writer.num_episodes} episode(s) there)"
        )
        self._session.status_dirty = True
        self._publish_status()

    def _on_message(self, topic: str, raw: bytes, info: Any) -> None:
        """A contract topic's message, with the count of its publisher's messages lost before it (queue overflow)."""
        self._session.on_message(topic, raw, lost=self._gaps.lost_from_info(topic, info))

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

    def on_activate(self, state: LifecycleState) -> TransitionCallbackReturn:
        sampler = self._session.sampler
        assert sampler is not None
        self._tick_timer = self.create_timer(
            1.0 / (2 * sampler.fps),
            self._guard.wrap("sampling tick", self._session.tick),
            callback_group=self._tick_group,
        )
        # Like lerobot-record, which connects the robot first: the session starts once every topic delivers.
        self._session.activate(self._params.config.start_session)
        return super().on_activate(state)

    def on_deactivate(self, state: LifecycleState) -> TransitionCallbackReturn:
        self._session.stop()
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
        self._gaps = SequenceGaps()  # new subscriptions see the publishers afresh
        if self._tick_timer is not None:
            self.destroy_timer(self._tick_timer)
            self._tick_timer = None
        self._session.release()

    def _now_ns(self) -> int:
        return int(self.get_clock().now().nanoseconds)

    # Status and diagnostics

    def _status_msg(self, status: StatusSnapshot) -> RecorderStatus:
        msg = RecorderStatus()
        msg.header.stamp = self.get_clock().now().to_msg()
        msg.state = int(status.state)
        msg.state_name = status.state.name.lower()
        msg.dataset_root = status.dataset_root
        msg.repo_id = status.repo_id
        msg.task = status.task
        msg.episode_index = status.episode_index
        msg.num_episodes = status.num_episodes
        msg.frames = status.frames
        msg.dropped = status.dropped
        msg.elapsed_s = status.elapsed_s
        msg.message = status.message
        return msg

    def _publish_status(self) -> None:
        self._status_pub.publish(self._status_msg(self._session.take_status()))

    def _publish_marker(self, status: StatusSnapshot, start_ns: int) -> None:
        marker = self._status_msg(status)
        marker.header.stamp.sec, marker.header.stamp.nanosec = divmod(start_ns, NS)
        self._marker_pub.publish(marker)

    def _publish_diagnostics(self) -> None:
        report = self._session.diagnostics()
        name = f"lerobot_recorder: {self.get_fully_qualified_name()}"
        self._diagnostics.publish(
            diagnostic_status(name, report.level, report.message, report.values, hardware_id="dataset")
        )
        if self._session.status_dirty:
            self._publish_status()

    # Controls

    def _trigger(self, what: str, response: Trigger.Response) -> Trigger.Response:
        try:
            response.success, response.message = self._session.trigger(what)
        except (WorkflowError, ValueError) as err:
            response.success, response.message = False, str(err)
            return response
        self._publish_status()
        return response

    def _on_goal(self, goal: Any) -> GoalResponse:
        refused = self._session.accept_goal(active=self._tick_timer is not None)
        if refused is not None:
            self.get_logger().warning(f"episode goal rejected: {refused}")
            return GoalResponse.REJECT
        return GoalResponse.ACCEPT

    def _execute_goal(self, goal_handle: Any) -> RecordEpisode.Result:
        result = RecordEpisode.Result()
        result.path = str(self._root)
        request = goal_handle.request
        try:
            self._session.start_goal(request.task, request.duration_s)
        except (WorkflowError, ValueError) as err:
            goal_handle.abort()
            result.saved, result.message = False, str(err)
            return result
        feedback = RecordEpisode.Feedback()
        start = time.monotonic()
        cancelled = False
        while True:
            outcome, counts = self._session.goal_progress()
            if outcome.get("done"):
                break
            if goal_handle.is_cancel_requested and not cancelled:
                cancelled = True
                self._session.cancel_goal()
            feedback.frames = max(0, counts["frames"])
            feedback.dropped = counts["dropped"]
            feedback.elapsed_s = time.monotonic() - start
            goal_handle.publish_feedback(feedback)
            time.sleep(0.1)
        self._session.end_goal()
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
        if not autostart(self) and self._params.config.shutdown_when_done:
            self.request_exit(1)

    def shutdown(self) -> None:
        """`main`'s last step while ROS still runs: final status, then close the dataset.

        An episode not yet saved (Ctrl-C, SIGTERM) is discarded; saved episodes are safe.
        """
        self.publish_final_status()
        self.release()

    def request_exit(self, code: int) -> None:
        """Make `main` exit with `code`."""
        self._session.exit_code = code

    @property
    def exit_code(self) -> int | None:
        """Set once the node should exit (shutdown_when_done)."""
        return self._session.exit_code


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
