"""What the recorder reports: the `~/status` contents and the /diagnostics values, from a `RecordingSession`
(read through `SessionView`: the session calls these functions on itself).

Pure (no rclpy): the node turns a `StatusSnapshot` into a lerobot_msgs/RecorderStatus and a `DiagnosticsReport`
into a diagnostic_msgs/DiagnosticStatus.
"""

from __future__ import annotations

import dataclasses
import enum
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from lerobot_contract.sampler import STAMP_REJECTIONS, LiveSampler
from lerobot_contract.time import NS
from lerobot_recorder.recorder.sink import EpisodeSink
from lerobot_recorder.recorder.workflow import EpisodeWorkflow, State


class _Options(Protocol):
    @property
    def repo_id(self) -> str: ...


class SessionView(Protocol):
    """What the status is made of: the fields of the recorder's session (`session.RecordingSession`) it reads."""

    @property
    def workflow(self) -> EpisodeWorkflow | None: ...
    @property
    def sampler(self) -> LiveSampler | None: ...
    @property
    def sink(self) -> EpisodeSink | None: ...
    @property
    def options(self) -> _Options: ...
    @property
    def root(self) -> Path: ...
    @property
    def config_error(self) -> str: ...
    @property
    def task_parameter(self) -> str: ...
    @property
    def episode_index(self) -> int: ...
    @property
    def num_saved(self) -> int: ...
    @property
    def last_episode(self) -> dict[str, Any]: ...
    @property
    def bad_messages(self) -> int: ...
    @property
    def bad_message_reasons(self) -> dict[str, dict[str, int]]: ...
    @property
    def lost_messages(self) -> dict[str, int]: ...
    @property
    def silent(self) -> set[str]: ...
    def episode_counts(self) -> dict[str, int]: ...


class Level(enum.IntEnum):
    """diagnostic_msgs/DiagnosticStatus levels."""

    OK = 0
    WARN = 1
    ERROR = 2


@dataclass(frozen=True)
class StatusSnapshot:
    """The fields of lerobot_msgs/RecorderStatus (without the stamp)."""

    state: State
    task: str
    dataset_root: str
    repo_id: str
    episode_index: int
    num_episodes: int
    frames: int
    dropped: int
    elapsed_s: float
    message: str


@dataclass(frozen=True)
class DiagnosticsReport:
    """One /diagnostics status of the recorder: `values` in report order, the level and message derived."""

    state: State
    problem: str
    values: dict[str, str]
    dropping: bool  # frames dropped, stamps refused, writer overrun or a silent topic: WARN
    disk_free_bytes: int | None = None
    min_free_mb: float = 0.0

    @property
    def disk_low(self) -> bool:
        """Less than `min_free_mb` free on the dataset's disk."""
        return self.disk_free_bytes is not None and self.disk_free_bytes < self.min_free_mb * 1e6

    @property
    def level(self) -> Level:
        if self.state is State.ERROR:
            return Level.ERROR
        if self.disk_low or self.dropping:
            return Level.WARN
        return Level.OK

    @property
    def message(self) -> str:
        return self.problem or self.values["state"]


def episode_counts(sampler: LiveSampler | None, sink: EpisodeSink | None) -> dict[str, int]:
    """Frames kept (sampled, not lost on the way to the writer) and dropped so far in the episode."""
    if sampler is None or sink is None:
        return {"frames": 0, "dropped": 0}
    report = sampler.report
    lost_at_start = sampler.live.frames_dropped_lost
    dropped = report.frames_dropped + lost_at_start + sink.counters.overrun + sink.counters.bad_frames
    return {"frames": report.frames_kept - sink.counters.overrun - sink.counters.bad_frames, "dropped": dropped}


def session_state(session: SessionView) -> State:
    """The state `~/status` and /diagnostics both report: the workflow's; unconfigured, ERROR after a failed
    configure (`config_error`), else IDLE."""
    if session.workflow is not None:
        return session.workflow.state
    return State.ERROR if session.config_error else State.IDLE


def status_snapshot(session: SessionView, now_ns: int) -> StatusSnapshot:
    """The status of `session` at `now_ns` (call under the session lock)."""
    workflow = session.workflow
    state = session_state(session)
    if workflow is None:
        task = session.task_parameter
    else:
        task = workflow.episode_task if state in (State.RECORDING, State.SAVING) else workflow.task
    recording = state is State.RECORDING
    counts = session.episode_counts() if recording else session.last_episode or session.episode_counts()
    return StatusSnapshot(
        state=state,
        task=task,
        dataset_root=str(session.root),
        repo_id=session.options.repo_id,
        episode_index=session.episode_index,
        num_episodes=session.num_saved,
        frames=max(0, int(counts.get("frames", 0))),
        dropped=int(counts.get("dropped", 0)),
        elapsed_s=float(workflow.elapsed(now_ns / NS)) if workflow is not None else 0.0,
        message=workflow.message if workflow is not None else session.config_error,
    )


def diagnostics_report(session: SessionView) -> DiagnosticsReport:
    """State, counters and sync quality of `session` (call under the session lock); the disk comes after."""
    values: dict[str, str] = {"root": str(session.root)}
    workflow, sampler, sink = session.workflow, session.sampler, session.sink
    state = session_state(session)
    values["state"] = state.name.lower()
    values["episodes_saved"] = str(session.num_saved)
    values["bad_messages"] = str(session.bad_messages)
    for topic, reasons in sorted(session.bad_message_reasons.items()):
        values[f"bad_messages.{topic}"] = "; ".join(f"{count} x {reason}" for reason, count in reasons.items())
    values["lost_messages"] = str(sum(session.lost_messages.values()))
    for topic, count in sorted(session.lost_messages.items()):
        values[f"lost_messages.{topic}"] = str(count)
    values["silent_topics"] = ", ".join(sorted(session.silent))
    if sampler is not None and sink is not None:
        report, live = sampler.report, sampler.live
        counts = episode_counts(sampler, sink)
        values.update(
            frames=str(counts["frames"]),
            dropped=str(counts["dropped"]),
            dropped_stale=str(report.frames_dropped_stale),
            dropped_sync=str(report.frames_dropped_tolerance),
            dropped_lost=str(live.frames_dropped_lost),
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
        delay = sampler.frame0_delay_ns
        if delay is not None:
            values["frame0_delay_s"] = f"{delay / NS:.3f}"
        if sampler.active and sampler.waiting_for:
            values["waiting_for"] = ", ".join(sampler.waiting_for)
    dropping = bool(
        (
            sampler is not None
            and (
                sampler.report.frames_dropped
                or sampler.live.rejected
                or sampler.live.frames_dropped_lost
                or sampler.live.lost_by_feature
            )
        )
        or (sink and sink.counters.overrun)
        or session.silent
    )
    problem = workflow.message if workflow is not None else session.config_error
    return DiagnosticsReport(state=state, problem=problem, values=values, dropping=dropping)


def with_disk(report: DiagnosticsReport, free_bytes: int | None, min_free_mb: float) -> DiagnosticsReport:
    """`report` with the free space of the dataset's disk (None: it could not be read)."""
    values = dict(report.values)
    if free_bytes is not None:
        values["disk_free_mb"] = f"{free_bytes / 1e6:.1f}"
    return dataclasses.replace(report, values=values, disk_free_bytes=free_bytes, min_free_mb=min_free_mb)


def stopped_by_disk(report: DiagnosticsReport, message: str) -> DiagnosticsReport:
    """`report` after a full disk stopped the recording with `message`."""
    return dataclasses.replace(report, state=State.ERROR, problem=message)
