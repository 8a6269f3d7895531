"""Plain values -> Rerun entities: the logging core shared by the live view and the dataset view (no rclpy).

A `ViewLogger` writes into one `rerun.RecordingStream`; where the stream goes (a viewer, the web viewer, an
.rrd file) is the caller's choice (`lerobot_recorder.view.sinks`). Times are given explicitly with every
batch: the live view places everything on the ``ros_time`` timeline (message stamps, seconds), a dataset
episode on ``frame`` (frame index) and ``timestamp`` (seconds from the episode start).
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import numpy.typing as npt
import rerun as rr

ROS_TIME = "ros_time"
FRAME = "frame"
EPISODE_TIME = "timestamp"

STATE_KEY = "observation.state"
ACTION_KEY = "action"
CAMERA_PREFIX = "observation.images."

# Colours of the series drawn on every joint plot.
STATE_COLOR = (31, 119, 180)
ACTION_COLOR = (255, 127, 14)
CHUNK_COLOR = (44, 160, 44)
PREVIOUS_CHUNK_COLOR = (150, 150, 150)

# DiagnosticStatus levels (OK, WARN, ERROR, STALE) -> TextLog levels.
DIAGNOSTIC_LEVELS = {0: "INFO", 1: "WARN", 2: "ERROR", 3: "WARN"}

_UNSAFE = re.compile(r"[^A-Za-z0-9_.\-]+")

FloatArray = npt.NDArray[np.float64]


def entity_part(text: str) -> str:
    """`text` as one entity-path part: runs of characters other than letters, digits, `_`, `.`, `-` become `_`."""
    part = _UNSAFE.sub("_", text).strip("_")
    return part or "_"


def camera_path(key: str) -> str:
    """Entity path of a camera feature: ``observation.images.front`` -> ``cameras/front``."""
    return f"cameras/{entity_part(key.removeprefix(CAMERA_PREFIX))}"


def vector_paths(key: str, names: Sequence[str]) -> list[str]:
    """Entity paths of a vector feature's dimensions.

    ``observation.state`` and ``action`` share one plot per joint (``joints/<name>/state|action``); other
    vector features get ``features/<key>/<name>``.
    """
    parts = [entity_part(n) for n in names]
    if key == STATE_KEY:
        return [f"joints/{p}/state" for p in parts]
    if key == ACTION_KEY:
        return [f"joints/{p}/action" for p in parts]
    return [f"features/{entity_part(key)}/{p}" for p in parts]


def chunk_paths(names: Sequence[str]) -> tuple[list[str], list[str]]:
    """Entity paths of the current and the previous chunk on the joint plots."""
    parts = [entity_part(n) for n in names]
    return [f"joints/{p}/chunk/current" for p in parts], [f"joints/{p}/chunk/previous" for p in parts]


@dataclass(frozen=True)
class Chunk:
    """An action chunk in dataset units: step k of column j is for time `stamp_s + k * period_s`."""

    stamp_s: float
    period_s: float
    names: tuple[str, ...]
    data: FloatArray  # (horizon, len(names))
    chunk_id: int = 0

    def __post_init__(self) -> None:
        if self.data.ndim != 2 or self.data.shape[1] != len(self.names):
            raise ValueError(f"chunk data has shape {self.data.shape}, expected (horizon, {len(self.names)})")
        if not self.period_s > 0:
            raise ValueError(f"chunk period_s must be > 0, got {self.period_s}")

    @property
    def times(self) -> FloatArray:
        return self.stamp_s + self.period_s * np.arange(self.data.shape[0], dtype=np.float64)

    def between(self, start_s: float, end_s: float) -> tuple[FloatArray, FloatArray]:
        """Times and rows of the steps meant for [start_s, end_s)."""
        times = self.times
        keep = (times >= start_s) & (times < end_s)
        return times[keep], self.data[keep]


@dataclass(frozen=True)
class ChunkSegment:
    """Steps of one chunk to draw on the `current` or `previous` series."""

    series: str  # "current" or "previous"
    chunk_id: int
    times: FloatArray
    values: FloatArray  # (steps, len(names))
    names: tuple[str, ...]


class ChunkOverlay:
    """Turns a stream of chunks into line segments that never overlap in time on one series.

    Chunks overlap (a new one arrives long before the last one ends), so drawing each whole chunk on one
    time series would zig-zag. Instead, when chunk N arrives, the interval [stamp(N-1), stamp(N)) is final:
    on ``current`` it gets the steps of chunk N-1 (the plan in force then), on ``previous`` the steps of
    chunk N-2 over the same interval (the plan N-1 replaced; their gap is what blending smooths). `finish`
    draws the last chunk to its end. Each segment appears once the next chunk has arrived.
    """

    def __init__(self) -> None:
        self._chunks: list[Chunk] = []

    def add(self, chunk: Chunk) -> list[ChunkSegment]:
        if self._chunks and chunk.stamp_s <= self._chunks[-1].stamp_s:
            self._chunks = [chunk]  # the clock went back (a sim reset) or a duplicate: start over
            return []
        segments: list[ChunkSegment] = []
        if self._chunks:
            segments = self._interval(self._chunks[-1].stamp_s, chunk.stamp_s)
        self._chunks = [*self._chunks[-1:], chunk]
        return segments

    def finish(self) -> list[ChunkSegment]:
        """Segments of the newest chunk from its stamp to its end (at shutdown or the end of a log)."""
        if not self._chunks:
            return []
        last = self._chunks[-1]
        segments = self._interval(last.stamp_s, float(last.times[-1]) + last.period_s / 2)
        self._chunks = []
        return segments

    def _interval(self, start_s: float, end_s: float) -> list[ChunkSegment]:
        """Segments of the newest stored chunk (current) and the one before it (previous) over [start_s, end_s)."""
        current = self._chunks[-1]
        previous = self._chunks[-2] if len(self._chunks) > 1 else None
        segments = []
        for series, chunk in (("current", current), ("previous", previous)):
            if chunk is None:
                continue
            times, values = chunk.between(start_s, end_s)
            if times.size:
                segments.append(ChunkSegment(series, chunk.chunk_id, times, values, chunk.names))
        return segments


@dataclass
class TopicCounter:
    """Messages seen per contract topic, to list the topics that never published (missing, not an error)."""

    topics: Mapping[str, str]  # topic -> feature key (or a role such as "recorder status")
    started_s: float
    counts: dict[str, int] = field(default_factory=dict)
    last_s: dict[str, float] = field(default_factory=dict)

    def seen(self, topic: str, now_s: float) -> None:
        self.counts[topic] = self.counts.get(topic, 0) + 1
        self.last_s[topic] = now_s

    def missing(self) -> list[str]:
        return [t for t in self.topics if self.counts.get(t, 0) == 0]

    def table(self, now_s: float) -> str:
        """A markdown table: topic, feature, messages, mean rate, state."""
        elapsed = max(now_s - self.started_s, 1e-9)
        rows = ["| topic | feature | messages | rate (Hz) | state |", "|---|---|---|---|---|"]
        for topic, key in self.topics.items():
            count = self.counts.get(topic, 0)
            state = "MISSING (no message yet)" if count == 0 else f"ok (last {now_s - self.last_s[topic]:.1f} s ago)"
            rows.append(f"| `{topic}` | {key} | {count} | {count / elapsed:.1f} | {state} |")
        return "\n".join(rows)


class ViewLogger:
    """Logs robot data into a Rerun recording (see the package docstring for the entity layout)."""

    def __init__(self, recording: rr.RecordingStream, *, timeline: str = ROS_TIME, jpeg_quality: int = 0) -> None:
        if not 0 <= jpeg_quality <= 100:
            raise ValueError(f"jpeg_quality must be 0 (raw images) .. 100, got {jpeg_quality}")
        self.rec = recording
        self.timeline = timeline
        self.jpeg_quality = jpeg_quality
        self._recorder_last: tuple[str, int] | None = None
        self._diagnostic_last: dict[str, tuple[int, str]] = {}
        self.images_logged = 0

    def _set_time(self, t_s: float) -> None:
        if self.timeline == ROS_TIME:
            self.rec.set_time(ROS_TIME, timestamp=t_s)
        else:
            self.rec.set_time(self.timeline, duration=t_s)

    def _time_column(self, times: npt.ArrayLike) -> rr.TimeColumn:
        values = np.asarray(times, dtype=np.float64)
        if self.timeline == ROS_TIME:
            return rr.TimeColumn(ROS_TIME, timestamp=values)
        return rr.TimeColumn(self.timeline, duration=values)

    def log_styles(self, vectors: Mapping[str, Sequence[str]], chunk_names: Sequence[str] = ()) -> None:
        """Static series names and colours: state, action, chunks (so the plots have a legend from the start)."""
        for key, names in vectors.items():
            color = STATE_COLOR if key == STATE_KEY else ACTION_COLOR if key == ACTION_KEY else None
            for path, name in zip(vector_paths(key, names), names, strict=True):
                label = f"{name} {path.rsplit('/', 1)[-1]}" if key in (STATE_KEY, ACTION_KEY) else name
                self.rec.log(path, rr.SeriesLines(colors=color, names=label), static=True)
        current, previous = chunk_paths(chunk_names)
        for cur, prev, name in zip(current, previous, chunk_names, strict=True):
            self.rec.log(cur, rr.SeriesLines(colors=CHUNK_COLOR, names=f"{name} chunk"), static=True)
            self.rec.log(prev, rr.SeriesLines(colors=PREVIOUS_CHUNK_COLOR, names=f"{name} previous chunk"), static=True)

    def log_document(self, path: str, markdown: str, *, static: bool = True, t_s: float | None = None) -> None:
        if t_s is not None:
            self._set_time(t_s)
        self.rec.log(path, rr.TextDocument(markdown, media_type=rr.MediaType.MARKDOWN), static=static)

    def log_text(self, path: str, t_s: float, text: str, level: str = "INFO") -> None:
        self._set_time(t_s)
        self.rec.log(path, rr.TextLog(text, level=level))

    def log_vectors(self, key: str, names: Sequence[str], times: npt.ArrayLike, values: npt.ArrayLike) -> None:
        """A batch of samples of one vector feature: `values` is (samples, len(names)) in dataset units."""
        data = np.asarray(values, dtype=np.float64).reshape(-1, len(names))
        if data.shape[0] == 0:
            return
        index = [self._time_column(times)]
        for j, path in enumerate(vector_paths(key, names)):
            self.rec.send_columns(path, indexes=index, columns=rr.Scalars.columns(scalars=data[:, j]))

    def log_image(self, key: str, t_s: float, picture: npt.NDArray[Any], *, depth: bool = False) -> None:
        """One camera picture: (H, W, 3) uint8 RGB, or (H, W) float32 metres with `depth`."""
        self._set_time(t_s)
        path = camera_path(key)
        if depth:
            self.rec.log(path, rr.DepthImage(picture, meter=1.0))
        else:
            image = rr.Image(picture, color_model="RGB")
            self.rec.log(path, image.compress(jpeg_quality=self.jpeg_quality) if self.jpeg_quality else image)
        self.images_logged += 1

    def log_chunk_segments(self, segments: Sequence[ChunkSegment]) -> None:
        for segment in segments:
            current, previous = chunk_paths(segment.names)
            paths = current if segment.series == "current" else previous
            index = [self._time_column(segment.times)]
            for j, path in enumerate(paths):
                self.rec.send_columns(path, indexes=index, columns=rr.Scalars.columns(scalars=segment.values[:, j]))

    def log_chunk_info(self, t_s: float, chunk_id: int, inference_time_s: float, horizon_s: float) -> None:
        self._set_time(t_s)
        self.rec.log("policy/chunk_id", rr.Scalars(float(chunk_id)))
        self.rec.log("policy/inference_time_s", rr.Scalars(float(inference_time_s)))
        self.rec.log("policy/horizon_s", rr.Scalars(float(horizon_s)))

    def log_recorder_status(
        self,
        t_s: float,
        *,
        state: str,
        episode_index: int,
        frames: int,
        dropped: int,
        task: str = "",
        message: str = "",
    ) -> None:
        """Recorder state as plots (``recording`` is 1 while an episode records: its edges are the episode
        boundaries) and an event line whenever the state or the episode changes."""
        self._set_time(t_s)
        self.rec.log("recorder/recording", rr.Scalars(1.0 if state == "recording" else 0.0))
        self.rec.log("recorder/episode_index", rr.Scalars(float(episode_index)))
        self.rec.log("recorder/frames", rr.Scalars(float(frames)))
        self.rec.log("recorder/dropped", rr.Scalars(float(dropped)))
        if self._recorder_last != (state, episode_index):
            self._recorder_last = (state, episode_index)
            text = f"episode {episode_index}: {state}" + (f" ({task})" if task else "")
            if message:
                text += f" - {message}"
            self.rec.log("recorder/events", rr.TextLog(text, level="ERROR" if state == "error" else "INFO"))

    def log_episode_boundary(self, t_s: float, episode_index: int, task: str) -> None:
        self.log_text("recorder/events", t_s, f"episode {episode_index} starts: {task}")

    def log_diagnostic(self, t_s: float, name: str, level: int, message: str, values: Mapping[str, str]) -> None:
        """One DiagnosticStatus: its level and every numeric value as plots, its message when it changes."""
        self._set_time(t_s)
        base = f"diagnostics/{entity_part(name)}"
        self.rec.log(f"{base}/level", rr.Scalars(float(level)))
        for key, text in values.items():
            number = _number(text)
            if number is not None:
                self.rec.log(f"{base}/{entity_part(key)}", rr.Scalars(number))
        if self._diagnostic_last.get(name) != (level, message):
            self._diagnostic_last[name] = (level, message)
            self.rec.log(f"{base}/status", rr.TextLog(f"{name}: {message}", level=DIAGNOSTIC_LEVELS.get(level, "WARN")))


def _number(text: str) -> float | None:
    """A diagnostic value as a float (true/false as 1/0); None when it is not a finite number."""
    lowered = text.strip().lower()
    if lowered in ("true", "false"):
        return 1.0 if lowered == "true" else 0.0
    try:
        value = float(lowered)
    except ValueError:
        return None
    return value if np.isfinite(value) else None


def layout(
    cameras: Sequence[str],
    vectors: Mapping[str, Sequence[str]],
    *,
    live: bool,
    timeline: str = ROS_TIME,
    sync_report: bool = False,
) -> Any:
    """The viewer layout (a Rerun blueprint): cameras; one plot per joint holding its state, action and chunks;
    other vector features; and, live, the recorder, diagnostics, policy and topic table, or for a dataset
    episode the task and the sync report.

    `cameras` are feature keys, `vectors` feature key -> dimension names (as logged).
    """
    import rerun.blueprint as rrb

    camera_views = [rrb.Spatial2DView(origin=camera_path(key), name=key.removeprefix(CAMERA_PREFIX)) for key in cameras]
    joints: list[str] = []
    for key in (STATE_KEY, ACTION_KEY):
        for name in vectors.get(key, ()):
            if entity_part(name) not in joints:
                joints.append(entity_part(name))
    joint_views = [rrb.TimeSeriesView(origin=f"joints/{joint}", name=joint) for joint in joints]
    other_views = [
        rrb.TimeSeriesView(origin=f"features/{entity_part(key)}", name=key)
        for key in vectors
        if key not in (STATE_KEY, ACTION_KEY)
    ]
    if live:
        side = [
            rrb.TimeSeriesView(origin="recorder", name="recorder", contents=["$origin/recording", "$origin/dropped"]),
            rrb.TextLogView(origin="/", name="events", contents=["recorder/**", "diagnostics/**", "view/**"]),
            rrb.TimeSeriesView(origin="diagnostics", name="diagnostics"),
            rrb.TimeSeriesView(origin="policy", name="policy"),
            rrb.TextDocumentView(origin="view/topics", name="topics"),
        ]
    else:
        side = [
            rrb.TextDocumentView(origin="task", name="task"),
            rrb.TextLogView(origin="/", name="events", contents=["task/**", "view/**", "cameras/**"]),
        ]
        if sync_report:
            side.append(rrb.TextDocumentView(origin="sync/report", name="bag2dataset sync report"))
            side.append(rrb.TimeSeriesView(origin="sync", name="sync: skew per frame (ms)"))
    columns: list[Any] = []
    if camera_views:
        columns.append(rrb.Vertical(*camera_views, name="cameras"))
    plots = joint_views + other_views
    if plots:
        columns.append(rrb.Grid(*plots, name="joints", grid_columns=2 if len(plots) > 3 else 1))
    columns.append(rrb.Vertical(*side, name="status"))
    shares = ([1.0] if camera_views else []) + ([2.0] if plots else []) + [1.0]
    return rrb.Blueprint(
        rrb.Horizontal(*columns, column_shares=shares),
        rrb.TimePanel(timeline=timeline),
        collapse_panels=True,
    )
