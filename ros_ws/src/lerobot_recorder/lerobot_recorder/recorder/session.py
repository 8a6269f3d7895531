"""The live recorder's episode session without ROS: messages in, frames to the dataset, controls, counters.

`RecordingSession` is what the recorder node (`lerobot_recorder.nodes.recorder`) drives: the node owns the
subscriptions, services, action, timers and publishers and hands the session plain values (raw CDR bytes of a
topic, the node clock's reading in nanoseconds, a control). The session owns the rest:

* the data path: a raw message -> its stamp (header or receive time) and payloads -> `LiveSampler` -> sampled
  frames -> `EpisodeSink` (the dataset thread); bad messages and refused stamps are counted and named;
* the episode workflow (`EpisodeWorkflow`): a control or a tick is one workflow step under the session lock,
  whose commands (start / save / discard) it carries out on the sampler and the sink;
* the task, the counters (episode index, episodes saved, frames and drops), the outcome of an episode goal,
  the session end (push to the Hub, the exit code for `shutdown_when_done`);
* silent topics: a contract topic that delivered no usable sample for `topic_timeout_s` (a camera that died)
  ends the episode being recorded early (saved, with what it has), and no episode starts while it stays silent:
  a session's next one waits (resetting, the reason on the status and /diagnostics) and the session stops in the
  error state after `topic_wait_s` (never recording episodes without frames for ever); an episode goal is
  refused with the reason.

What it must tell the node comes back through `SessionHooks` (publish the status, publish the episode-start
marker); the status and /diagnostics contents are assembled in `recorder.status`.
"""

from __future__ import annotations

import functools
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from rosbags.serde import SerdeError

from lerobot_bags import cdr
from lerobot_contract import ClockJumpError, Contract, MessageMismatchError
from lerobot_contract.align import AlignFeature
from lerobot_contract.frames import FrameDecoder
from lerobot_contract.sampler import STAMP_REJECTIONS, LiveSampler
from lerobot_contract.time import NS
from lerobot_dataset import DatasetWriter, feature_specs
from lerobot_dataset.commit import uncommitted_dataset
from lerobot_recorder.recorder import status as status_mod
from lerobot_recorder.recorder.errors import RecorderError, WorkflowError
from lerobot_recorder.recorder.messages import has_header, header_stamp_ns
from lerobot_recorder.recorder.sink import EpisodeSink, SinkEvent, disk_free_bytes
from lerobot_recorder.recorder.workflow import Action, Command, EpisodeWorkflow, State, WorkflowConfig, validate_task

WAITING_FOR_CLOCK = "waiting for /clock (use_sim_time is true and no clock message came yet)"
WARN_EVERY_S = 2.0
# Episodes in a row that ran their time and had no frames to save before a session stops in the error state: each
# one is recorded again, and whatever keeps every sample out of them (stamps on a clock the recorder does not
# follow) would otherwise keep the session recording empty episodes for ever. (An episode a silent topic ended
# does not count: that wait has its own bound, topic_wait_s.)
EMPTY_EPISODES_LIMIT = 3
STATUS_EVERY_S = 0.5

Step = Callable[[EpisodeWorkflow, float], list[Command]]


class SessionLog(Protocol):
    """The node's logger (rclpy's `get_logger()` fits)."""

    def info(self, message: str, /) -> Any: ...

    def warning(self, message: str, /) -> Any: ...

    def error(self, message: str, /) -> Any: ...


@dataclass(frozen=True)
class SessionHooks:
    """What the session asks of the node: its clock (ns; 0 = not set yet), its logger and two publications."""

    now_ns: Callable[[], int]
    log: SessionLog
    publish_status: Callable[[], None]
    publish_marker: Callable[[status_mod.StatusSnapshot, int], None]  # the status, stamped at the episode start


@dataclass(frozen=True)
class SessionOptions:
    """The node's start-up settings that the session reads."""

    root: Path
    repo_id: str = ""
    private: bool = False
    push_to_hub: bool = False
    shutdown_when_done: bool = False
    min_free_mb: float = 100.0

    @property
    def hub_repo_id(self) -> str:
        """`repo_id`, or local/<root folder name>."""
        return self.repo_id or f"local/{self.root.resolve().name}"


@dataclass(frozen=True)
class SamplingOptions:
    """How messages become frames and frames reach the writer."""

    fps: int
    latency_s: float = 0.15
    clock_jump_s: float = 1.0
    max_queue_s: float = 2.0
    topic_timeout_s: float = 5.0  # a contract topic without a usable sample this long is silent


def header_topics(contract: Contract, typestore: Any) -> set[str]:
    """The contract topics whose messages carry a header; RecorderError when `stamp: header` needs one that does not."""
    topics = {f.topic for f in contract.features.values() if has_header(typestore, f.type)}
    if contract.stamp == "header":
        no_header = sorted({f.topic for f in contract.features.values()} - topics)
        if no_header:
            raise RecorderError(
                f"contract {contract.source}: stamp: header, but {', '.join(no_header)} carry no header; "
                "set `stamp: receive` in the contract"
            )
    return topics


def open_dataset(
    root: Path, contract: Contract, fps: int, *, video: bool, codec: str, resume: bool, repo_id: str
) -> DatasetWriter:
    """The dataset writer of a recording: `resume` appends to the dataset at `root`, else a new one is created.

    A root left by a recorder killed before its first save holds no episode: this run takes it over.
    """
    features = feature_specs(contract, video=video)
    exists = (root / "meta" / "info.json").is_file()
    leftover = uncommitted_dataset(root)
    if resume and not leftover:
        if not exists:
            raise RecorderError(f"resume:=true but {root} holds no dataset (no meta/info.json)")
        return DatasetWriter.open(root, expect_features=features, expect_fps=fps, video_codec=codec)
    if root.exists() and any(root.iterdir()) and not leftover:
        raise RecorderError(f"{root} already exists; pass resume:=true to add episodes to it, or choose another root")
    return DatasetWriter.create(
        root,
        repo_id=repo_id or f"local/{root.resolve().name}",
        fps=fps,
        features=features,
        robot_type=contract.robot_type,
        video_codec=codec,
        contract=contract.to_dict(),
    )


class RecordingSession:
    """The recorder's episode session (see the module docstring). Thread-safe: one re-entrant lock.

    Lives as long as the node: `configure` installs the sampler, sink and workflow of a dataset, `release`
    drops them; the counters and the configure error stay for the status.
    """

    def __init__(self, options: SessionOptions, hooks: SessionHooks, task: str = "") -> None:
        self.options = options
        self.lock = threading.RLock()
        self._hooks = hooks
        self._log = hooks.log
        self.contract: Contract | None = None
        self.sampler: LiveSampler | None = None
        self.sink: EpisodeSink | None = None
        self.workflow: EpisodeWorkflow | None = None
        self.task_parameter = task
        self.episode_index = 0
        self.num_saved = 0
        self.bad_messages = 0
        # Per topic, the messages left out as damaged, by reason (values are counts).
        self.bad_message_reasons: dict[str, dict[str, int]] = {}
        # Messages published on a contract topic that never reached the session (a gap in the publisher's
        # sequence numbers: the subscription queue overflowed, or a best-effort transport lost them), per topic.
        self.lost_messages: dict[str, int] = {}
        self.config_error = ""
        self.status_dirty = True
        self.exit_code: int | None = None
        self.last_episode: dict[str, Any] = {}
        self._typestore: Any = None
        self._header_topics: set[str] = set()
        self._by_topic: dict[str, list[Any]] = {}
        self._episode_start_ns = 0
        self._last_warn = 0.0
        self._last_status = 0.0
        self._outcome: dict[str, Any] | None = None
        self._session_pending = False
        self._last_problem = ""
        self._topic_timeout_ns = 5 * NS
        # Per feature, the node clock when the sampler last took a sample of it; before any, the time the watch
        # started (the first tick with a running clock after activation), which is also when a pending session
        # started waiting for its topics.
        self._last_sample_ns: dict[str, int] = {}
        self._watch_from_ns: int | None = None
        self.silent: set[str] = set()  # the contract topics silent at the last tick
        self._empty_in_a_row = 0
        self._ended_by_silence = False  # the episode being saved was ended early by a silent topic

    @property
    def root(self) -> Path:
        return self.options.root

    # Configuration

    def configure(
        self,
        contract: Contract,
        writer: DatasetWriter,
        workflow: WorkflowConfig,
        sampling: SamplingOptions,
        typestore: Any,
        header_topics: Iterable[str],
    ) -> None:
        """Record `contract` into `writer`: build the sampler, the dataset thread and the workflow."""
        self.config_error = ""  # configured now: an earlier failure is no longer the state
        fps = sampling.fps
        self._typestore = typestore
        self._header_topics = set(header_topics)
        self.contract = contract
        self.episode_index = writer.num_episodes
        self.num_saved = writer.num_episodes
        features = [
            AlignFeature(f.key, max_age_ns=None if f.max_age_s is None else round(f.max_age_s * NS), image=f.is_image)
            for f in contract.features.values()
        ]
        tolerance = contract.sync_tolerance_s
        self.sampler = LiveSampler(
            features,
            fps,
            tolerance_ns=None if tolerance is None else round(tolerance * NS),
            latency_ns=round(sampling.latency_s * NS),
            clock_jump_ns=round(sampling.clock_jump_s * NS),
            max_samples=max(32, int(fps * 2)),
        )
        values = FrameDecoder(
            contract, functools.partial(cdr.deserialize_cdr, typestore), deserialize_errors=(SerdeError,)
        )
        self.sink = EpisodeSink(
            writer,
            values,
            self._on_sink_event,
            max_queue=max(2, round(sampling.max_queue_s * fps)),
            min_free_bytes=round(self.options.min_free_mb * 1e6),
        )
        now_ns = self._hooks.now_ns()
        self.workflow = EpisodeWorkflow(workflow, now=now_ns / NS if now_ns else None)
        self._topic_timeout_ns = round(sampling.topic_timeout_s * NS)
        self._last_sample_ns = {}
        self._watch_from_ns = None
        if self.task_parameter:
            self.workflow.task = self.task_parameter
        if self._hooks.now_ns() == 0:
            self.workflow.message = WAITING_FOR_CLOCK
        self._by_topic = {}
        for feat in contract.features.values():
            self._by_topic.setdefault(feat.topic, []).append(feat)

    @property
    def topics(self) -> dict[str, str]:
        """Topic -> message type of every contract topic (what the node subscribes to)."""
        return {topic: feats[0].type for topic, feats in self._by_topic.items()}

    def activate(self, start_session: bool) -> None:
        """Sampling starts; with `start_session`, a session starts once every topic delivers (like lerobot-record,
        which connects the robot first)."""
        self._session_pending = start_session
        self._watch_from_ns = None  # sampling paused while inactive: silence counts from the next tick on
        self._last_sample_ns = {}

    def release(self) -> None:
        """Close the dataset (an episode not yet saved is discarded) and drop the sampler and workflow."""
        sink, self.sink = self.sink, None
        if sink is not None:
            sink.close(timeout=600.0)  # a save in progress (a long episode) finishes first
        # An episode goal still waiting for its outcome ends (aborted) instead of waiting forever.
        self._finish_outcome(False, self.episode_index, self.last_episode, "the recorder stopped")
        with self.lock:
            self.sampler = None
            self.workflow = None

    def set_task(self, task: str) -> None:
        """The `task` parameter changed (an empty one is allowed and changes nothing but the status)."""
        if task:
            validate_task(task)
        with self.lock:
            self.task_parameter = task
            if task and self.workflow is not None:
                self.workflow.set_task(task)
                self.status_dirty = True

    def set_error(self, message: str) -> None:
        """Configure failed (or the dataset is unusable): the status says ERROR with `message`."""
        with self.lock:
            if self.workflow is not None:
                self.workflow.fail(message, self._hooks.now_ns() / NS)
            self.config_error = message
        self.status_dirty = True
        self._hooks.publish_status()

    # Data path

    def on_message(self, topic: str, raw: bytes, lost: int = 0) -> None:
        """One raw (CDR) message of a contract topic; `lost`: messages its publisher sent since the previous one
        that never arrived here (from the publisher's sequence numbers, see `recorder.messages.SequenceGaps`)."""
        sampler = self.sampler
        if sampler is None:
            return
        if lost:
            self._on_lost(topic, lost)
        now = self._hooks.now_ns()
        if now == 0:
            # use_sim_time and no /clock yet (ROS time 0 is "not set"): no receive time to judge the stamp by, and
            # no episode yet (one starts on a tick of that clock). Taking it would tie the stamps to time 0.
            return
        try:
            stamp = header_stamp_ns(raw) if topic in self._header_topics and self._stamp_header else now
            payloads = self._payloads(topic, raw)
        except (MessageMismatchError, RecorderError, SerdeError, ValueError, KeyError) as err:
            self._bad_message(topic, str(err))
            return
        with self.lock:
            try:
                refused = [
                    sampler.push(key, stamp, payload, now, lost=lost) in STAMP_REJECTIONS
                    for key, payload in payloads.items()
                ]
            except ClockJumpError as err:
                self._on_clock_jump(str(err))
                return
            for key, was_refused in zip(payloads, refused, strict=True):
                if not was_refused:
                    self._last_sample_ns[key] = now
            if any(refused):
                # One bad stamp is refused and counted (status, /diagnostics); the episode goes on.
                problem = f"{topic}: {sampler.last_rejection}"
                self._warn_throttled(problem)
                if self.workflow is not None:
                    self.workflow.message = problem
                    self.status_dirty = True

    def _payloads(self, topic: str, raw: bytes) -> dict[str, Any]:
        """Per feature of `topic`, what the sampler keeps of a message: values in dataset units, or an image's raw
        bytes (decoded only for the frames that use it). A damaged message (the bag converter's checks:
        `lerobot_bags.cdr.checked_message`, and for images `FeatureContract.image_problem`, without decoding)
        raises MessageMismatchError with the reason, so frames hold the previous sound sample."""
        payloads: dict[str, Any] = {}
        msg: Any = None
        for feat in self._by_topic[topic]:
            if msg is None:
                msg, reason = cdr.checked_message(self._typestore, memoryview(raw), feat.type)
                if reason is not None:
                    raise MessageMismatchError(reason)
            if feat.is_image:
                if (problem := feat.image_problem(msg)) is not None:
                    raise MessageMismatchError(problem)
                payloads[feat.key] = raw
            else:
                payloads[feat.key] = feat.joint_units().apply(feat.raw_vector(msg))
        return payloads

    def _bad_message(self, topic: str, reason: str) -> None:
        """Count a message left out (per topic and reason: /diagnostics) and name it (log, status)."""
        with self.lock:
            self.bad_messages += 1
            reasons = self.bad_message_reasons.setdefault(topic, {})
            reasons[reason] = reasons.get(reason, 0) + 1
            self._warn_throttled(f"{topic}: message ignored: {reason}")
            if self.workflow is not None:
                self.workflow.message = f"{topic}: message ignored: {reason}"
                self.status_dirty = True

    def _on_lost(self, topic: str, lost: int) -> None:
        """Count and name messages that never reached the recorder (they cannot be taken, but are not hidden):
        the log and /diagnostics (WARN during an episode); the status message only when they cost frames (frame 0)."""
        with self.lock:
            self.lost_messages[topic] = self.lost_messages.get(topic, 0) + lost
            self._warn_throttled(
                f"{topic}: {lost} message(s) lost before the recorder took them (subscription queue overflow "
                f"or transport loss; {self.lost_messages[topic]} in all): raise queue_depth or reduce the load"
            )

    @property
    def _stamp_header(self) -> bool:
        return self.contract is not None and self.contract.stamp == "header"

    def _warn_throttled(self, text: str) -> None:
        now = time.monotonic()
        if now - self._last_warn >= WARN_EVERY_S:
            self._last_warn = now
            self._log.warning(text)

    def _on_frame0(self, sampler: LiveSampler) -> None:
        """Frame 0 was placed: say so when it is later after the start than the latency window (a topic had no
        sample until then: those slots hold no frame by the rule, and are not drops, but the episode is shorter),
        or when messages lost on the way cost the slots before it (counted as dropped)."""
        delay = sampler.frame0_delay_ns
        lost = sampler.live.frames_dropped_lost
        if delay is None or (delay <= sampler.latency_ns and not lost) or self.workflow is None:
            return
        late = sampler.first_after(sampler.latency_ns)
        text = f"frame 0 is {delay / NS:.3f} s after the episode start"
        if late:
            text += f": no sample of {', '.join(late)} until then"
        if lost:
            text += f" ({lost} frame(s) before it dropped: messages lost on the way)"
        self._log.warning(text)
        self.workflow.message = text
        self.status_dirty = True

    def _on_clock_jump(self, text: str) -> None:
        message = f"{text}; the episode was ended there and saved (frames before the jump are consistent)"
        self._log.warning(message)
        self.control(lambda wf, now: wf.next(now) if wf.state is State.RECORDING else [], message=message)

    def tick(self) -> None:
        """The sampling tick (twice per frame period): take due frames, time the workflow, start a pending session."""
        sampler, sink = self.sampler, self.sink
        if sampler is None or sink is None:
            return
        with self.lock:
            workflow = self.workflow
            if workflow is None:
                return
            in_flight = False
            if workflow.state is State.RECORDING and sampler.active:
                try:
                    end_ns = self._episode_start_ns + round(workflow.duration_s * NS)
                    now_ns = self._hooks.now_ns()
                    placed = sampler.t0_ns is not None
                    for frame in sampler.poll(now_ns, end_ns):
                        sink.put_frame(frame)
                    if not placed and sampler.t0_ns is not None:
                        self._on_frame0(sampler)
                    # The episode's time is up only once its last frames' samples are in (or late for good).
                    in_flight = not sampler.can_end(now_ns, end_ns)
                except ClockJumpError as err:
                    self._on_clock_jump(str(err))
            if workflow.message == WAITING_FOR_CLOCK:
                workflow.message = ""  # the clock runs: this tick is on it
            self._watch_silence(workflow, sampler)
            problem = sink.counters.last_problem
            if problem and problem != self._last_problem:
                self._last_problem = problem
                workflow.message = f"frames dropped: {problem}"
                self._log.error(workflow.message)
                self.status_dirty = True
            if self._session_pending:
                if sampler.silent or workflow.waiting_for:
                    self._wait_for_session_topics(workflow, sampler)
                elif not sampler.clock_settled:
                    workflow.message = "waiting for the topics' stamps to agree on a clock"
                else:
                    self._session_pending = False
                    workflow.message = ""
                    self.control(lambda wf, now: wf.begin_session(wf.task, now))
            if not (in_flight and workflow.state is State.RECORDING):
                self.control(lambda wf, now: wf.tick(now))
        if self.status_dirty or time.monotonic() - self._last_status > STATUS_EVERY_S:
            self._hooks.publish_status()

    def silent_topics(self, now_ns: int) -> dict[str, float]:
        """Contract topics whose features had no usable sample for longer than `topic_timeout_s` at `now_ns`, with
        how long (s). A clock that went back (a sim reset) restarts the count."""
        if self._watch_from_ns is None or self.contract is None:
            return {}
        silent: dict[str, float] = {}
        for key, feat in self.contract.features.items():
            last = self._last_sample_ns.get(key, self._watch_from_ns)
            if last > now_ns:
                last = self._last_sample_ns[key] = now_ns
            if now_ns - last > self._topic_timeout_ns:
                silent[feat.topic] = max(silent.get(feat.topic, 0.0), (now_ns - last) / NS)
        return silent

    def _silence_text(self, silent: dict[str, float]) -> str:
        assert self.contract is not None
        parts = []
        for topic, seconds in silent.items():
            keys = ", ".join(k for k, f in self.contract.features.items() if f.topic == topic)
            parts.append(f"{topic} ({keys}) sent nothing usable for {seconds:.1f} s")
        return "; ".join(parts)

    def _watch_silence(self, workflow: EpisodeWorkflow, sampler: LiveSampler) -> None:
        """Name the silent topics as the reason no episode can start, and end an episode they stopped feeding
        (saved: its frames so far are good)."""
        now_ns = self._hooks.now_ns()
        if now_ns == 0:
            return
        if self._watch_from_ns is None:
            self._watch_from_ns = now_ns
        silent = self.silent_topics(now_ns)
        workflow.waiting_for = self._silence_text(silent) if silent else ""
        if set(silent) != self.silent:
            if set(silent) - self.silent:
                self._log.warning(workflow.waiting_for)
            elif not silent:
                self._log.info(f"{', '.join(sorted(self.silent))} deliver(s) again")
            self.silent = set(silent)
            self.status_dirty = True
        text = workflow.waiting_for
        if text and workflow.state is State.RECORDING and sampler.active:
            index = self.episode_index
            self._ended_by_silence = True
            self.control(lambda wf, now: wf.next(now) if wf.state is State.RECORDING else [])
            # The save was just handed to the dataset thread with the episode's frames (its counts): an episode
            # the topic stopped before its first frame has nothing to save, and its save fails saying so.
            frames = int(self.last_episode.get("frames", 0))
            ended = f"{text} (topic_timeout_s={self._topic_timeout_ns / NS:g}): episode {index} ended early"
            if frames:
                message = f"{ended} and saved ({frames} frames)"
            else:
                message = f"{ended} before its first frame: nothing to save"
            workflow.message = message
            self._log.error(message)

    def _wait_for_session_topics(self, workflow: EpisodeWorkflow, sampler: LiveSampler) -> None:
        """The session waits to start (`start_session`) for topics that never delivered or went silent; after
        `topic_wait_s` it stops in the error state instead of waiting for ever."""
        first = sampler.silent
        reason = f"waiting for the first message on {', '.join(first)}" if first else workflow.waiting_for
        workflow.message = reason
        now_ns = self._hooks.now_ns()
        if self._watch_from_ns is None or now_ns == 0:
            return
        waited = (now_ns - self._watch_from_ns) / NS
        if waited >= workflow.config.topic_wait_s:
            self._session_pending = False
            message = f"{reason}: no session started after {waited:.1f} s (topic_wait_s); start the publishers"
            self.control(lambda wf, now: wf.fail(message, now))

    # Controls

    def control(self, step: Step, message: str | None = None) -> list[Command]:
        """Run one workflow step (under the lock) and carry out its commands."""
        with self.lock:
            workflow = self.workflow
            if workflow is None:
                raise WorkflowError("the recorder is not configured")
            before = workflow.state
            now_ns = self._hooks.now_ns()
            commands = step(workflow, now_ns / NS)
            if message:
                workflow.message = message
            for command in commands:
                self._execute(command, now_ns)
            if workflow.state is not before:
                self._on_state_change(before, workflow.state)
                self._hooks.publish_status()
            return commands

    def trigger(self, what: str) -> tuple[bool, str]:
        """A control service: `start session`, `next`, `re-record` or `stop`; (success, message) for its response.

        Raises WorkflowError (not configured, or the control means nothing now) or ValueError (no valid task).
        """
        steps: dict[str, Step] = {
            "start session": lambda wf, now: wf.begin_session(wf.task, now),
            "next": lambda wf, now: wf.next(now),
            "re-record": lambda wf, now: wf.rerecord(now),
            "stop": lambda wf, now: wf.stop(now),
        }
        commands = self.control(steps[what])
        workflow = self.workflow
        state = workflow.state.name.lower() if workflow is not None else "unconfigured"
        success = bool(commands) or what == "stop"
        return success, f"{what}: now {state}" if success else f"{what}: nothing to do while {state}"

    def stop(self) -> None:
        """Esc: save the episode being recorded and stop (deactivation)."""
        self.control(lambda wf, now: wf.stop(now))

    def _execute(self, command: Command, now_ns: int) -> None:
        sampler, sink = self.sampler, self.sink
        assert sampler is not None and sink is not None
        if command.action is Action.START:
            self._episode_start_ns = now_ns
            self._ended_by_silence = False
            self._last_problem = ""  # the sink's counters start afresh with the episode
            start = sampler.start(now_ns)
            sink.start_episode(command.task)
            self._hooks.publish_marker(self.status(), start)
            self._log.info(f"recording episode {self.episode_index}: {command.task!r}")
            return
        end_ns = now_ns
        if self.workflow is not None:
            # A tick that runs late (a busy machine) does not make the episode longer than asked.
            end_ns = min(now_ns, self._episode_start_ns + round(self.workflow.duration_s * NS))
        frames = sampler.stop(end_ns)
        if command.action is Action.SAVE:
            for frame in frames:
                sink.put_frame(frame)
            self.last_episode = self.episode_counts()
            sink.save_episode()
        else:
            self.last_episode = self.episode_counts()
            sink.discard_episode()
            self._log.info(f"episode {self.episode_index} discarded")

    def _on_state_change(self, before: State, after: State) -> None:
        workflow = self.workflow
        assert workflow is not None
        if after is State.RESETTING:
            self._log.info(f"reset the environment ({workflow.config.reset_time_s:g} s)")
        if after is State.STOPPED and before is not State.IDLE:
            self._log.info(f"recording stopped; {self.num_saved} episode(s) in {self.root}")
            if self.options.push_to_hub and self.sink is not None:
                self.sink.run_after(self._push_to_hub)
            elif self.options.shutdown_when_done:
                self.exit_code = 0
        if after is State.ERROR:
            self._log.error(f"recording stopped: {workflow.message}")
            if self.options.shutdown_when_done:
                self.exit_code = 1

    def _push_to_hub(self) -> None:
        from lerobot_dataset.hub import HubError, push_dataset

        try:
            url = push_dataset(self.root, self.options.hub_repo_id, private=self.options.private)
            self._log.info(f"pushed {self.root} to {url}")
            code = 0
        except (HubError, OSError) as err:
            self._log.error(f"push to the Hub failed: {err}; the dataset is still at {self.root}")
            code = 1
        if self.options.shutdown_when_done:
            self.exit_code = code

    def _on_sink_event(self, event: SinkEvent) -> None:
        """Runs in the sink thread."""
        if event.kind == "saved":
            self._empty_in_a_row = 0
            self.num_saved = event.episode_index + 1
            self.episode_index = event.episode_index + 1
            counts = {**self.last_episode, "frames": event.frames}
            self._log.info(
                f"saved episode {event.episode_index}: {event.frames} frames, {counts.get('dropped', 0)} dropped"
            )
            self._finish_outcome(True, event.episode_index, counts, "saved")
            self.control(lambda wf, now: wf.saved(now) if wf.state is State.SAVING else [])
        elif event.kind == "discarded":
            self._finish_outcome(False, self.episode_index, self.last_episode, "discarded")
        elif event.kind == "failed":
            self._log.error(event.message)
            self._finish_outcome(False, self.episode_index, self.last_episode, event.message)
            if not event.empty:
                self._empty_in_a_row = 0
            elif not self._ended_by_silence:
                self._empty_in_a_row += 1
            message, fatal = event.message, event.fatal
            if self._empty_in_a_row >= EMPTY_EPISODES_LIMIT:
                rejection = self.sampler.last_rejection if self.sampler is not None else ""
                message = (
                    f"{self._empty_in_a_row} episodes in a row had no frames (last stamp problem: "
                    f"{rejection or 'none'}); recording stopped, the saved episodes are intact"
                )
                fatal = True

            def on_failure(wf: EpisodeWorkflow, now: float) -> list[Command]:
                if wf.state is State.SAVING:
                    return wf.save_failed(message, now, fatal=fatal)
                if fatal:
                    return wf.fail(message, now)
                return wf.discard(message, now)

            self.control(on_failure)

    # Episode goals (the RecordEpisode action)

    def accept_goal(self, active: bool) -> str | None:
        """Reserve the session for one episode goal; the reason when it cannot take one (`active`: sampling runs)."""
        with self.lock:
            workflow = self.workflow
            if workflow is None or not active:
                return "the recorder is not active"
            if workflow.state not in (State.IDLE, State.STOPPED) or self._outcome is not None:
                return f"the recorder is {workflow.state.name.lower()}"
            self._outcome = {}
        return None

    def start_goal(self, task: str, duration_s: float) -> None:
        """Record the accepted goal's episode (`task` empty: the session task); WorkflowError/ValueError end it."""
        try:
            self.control(lambda wf, now: wf.request_episode(task or wf.task, duration_s, now))
        except (WorkflowError, ValueError):
            self.end_goal()
            raise

    def cancel_goal(self) -> None:
        """The goal was cancelled: discard its episode (as re-record does)."""
        self.control(lambda wf, now: wf.rerecord(now))

    def goal_progress(self) -> tuple[dict[str, Any], dict[str, int]]:
        """The goal's outcome so far (`done`, `saved`, `index`, `message`, counts) and the episode's counts."""
        with self.lock:
            return dict(self._outcome or {}), self.episode_counts()

    def end_goal(self) -> None:
        """The goal's result was sent: the session takes another goal."""
        with self.lock:
            self._outcome = None

    def _finish_outcome(self, saved: bool, index: int, counts: dict[str, Any], message: str) -> None:
        with self.lock:
            if self._outcome is not None and "done" not in self._outcome:
                self._outcome.update(done=True, saved=saved, index=index, message=message, **counts)

    # Counters, status, diagnostics

    def episode_counts(self) -> dict[str, int]:
        """Frames kept and dropped so far in the episode being recorded."""
        return status_mod.episode_counts(self.sampler, self.sink)

    def status(self) -> status_mod.StatusSnapshot:
        """What `~/status` says now."""
        with self.lock:
            return status_mod.status_snapshot(self, self._hooks.now_ns())

    def take_status(self) -> status_mod.StatusSnapshot:
        """The status to publish now (clears `status_dirty`)."""
        with self.lock:
            snapshot = self.status()
            self.status_dirty = False
            self._last_status = time.monotonic()
        return snapshot

    def diagnostics(self) -> status_mod.DiagnosticsReport:
        """The /diagnostics report; a disk below `min_free_mb` while recording stops the recording here."""
        with self.lock:
            report = status_mod.diagnostics_report(self)
        try:
            free: int | None = disk_free_bytes(self.root)
        except OSError:
            free = None
        report = status_mod.with_disk(report, free, self.options.min_free_mb)
        if free is not None and report.disk_low and report.state is State.RECORDING:
            message = (
                f"disk almost full: {free / 1e6:.1f} MB free at {self.root} (min_free_mb="
                f"{self.options.min_free_mb}); recording stopped, saved episodes are intact"
            )
            self.control(lambda wf, now: wf.fail(message, now))
            report = status_mod.stopped_by_disk(report, message)
        return report
