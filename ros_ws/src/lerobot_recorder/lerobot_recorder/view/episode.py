"""One dataset episode -> Rerun entities (`lerobot-ros dataset view`), through `ViewLogger` (no rclpy).

Works on any LeRobot v3.0 dataset `DatasetReader` opens (ours or LeRobot's): cameras decoded (videos and
PNG images), every vector feature as plots (``observation.state``/``action`` on the joint plots), the task
text, and, when the dataset came from bag2dataset, that episode's entry of the sync report
(``ROOT.sync_report.json`` next to the dataset): skew per feature, dropped frames, coverage, clock notes, as a
document plus one static value per feature, and, where the report holds the per-frame record (``per_frame``,
written by bag2dataset since it records one), each frame's skew per feature as a series on the episode timeline
(``sync/<feature>/skew_ms``, frame time minus the stamp of the data the frame took) with the frames that reused
the previous frame's sample (``sync/<feature>/reused``, 1 on those frames).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt
import rerun as rr

from lerobot_dataset import DatasetError, DatasetReader
from lerobot_recorder.view.entities import (
    EPISODE_TIME,
    FRAME,
    ViewLogger,
    camera_path,
    entity_part,
    layout,
    vector_paths,
)

BOOKKEEPING = ("timestamp", "frame_index", "episode_index", "index", "task_index")


@dataclass
class EpisodeView:
    """What was logged for one episode."""

    episode_index: int
    frames: int
    cameras: dict[str, int] = field(default_factory=dict)  # key -> pictures logged
    vectors: list[str] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)  # cameras that could not be shown, and why
    sync_report: bool = False


def sync_report_path(root: Path) -> Path:
    """Where bag2dataset keeps the sync report of the dataset at `root` (lerobot_bags.pipeline)."""
    return root.parent / f"{root.name}.sync_report.json"


def episode_sync_entry(root: Path, episode_index: int) -> dict[str, Any] | None:
    """The newest sync-report entry of `episode_index`, or None (no report, unreadable, or not in it).

    A run that still carries a fleet task's `rank` numbers its episodes in that task's shard dataset, not in this
    one (a fleet merge renumbers them and files the rank under `shard`): it names no episode here and is skipped.
    """
    path = sync_report_path(root)
    try:
        report = json.loads(path.read_text())
    except (OSError, json.JSONDecodeError):
        return None
    found: dict[str, Any] | None = None
    for run in report.get("runs", []) if isinstance(report, dict) else []:
        if not isinstance(run, dict) or "rank" in run:
            continue
        for entry in run.get("episodes", []):
            if isinstance(entry, dict) and entry.get("episode_index") == episode_index:
                found = entry
    return found


def _sync_markdown(entry: dict[str, Any]) -> str:
    lines = [
        f"# Sync report of episode {entry.get('episode_index')}",
        f"bag `{entry.get('bag')}`, align `{entry.get('align')}`, {entry.get('frames')} frames kept, "
        f"{entry.get('frames_dropped')} dropped (stale {entry.get('frames_dropped_stale')}, "
        f"tolerance {entry.get('frames_dropped_tolerance')}), coverage {entry.get('coverage')}",
    ]
    clock = entry.get("clock") or {}
    if clock:
        lines.append(f"clock: stamps from `{clock.get('stamp')}` - {clock.get('note', '')}")
    lines += ["", "| feature | samples | max skew (ms) | mean skew (ms) | stale drops | reused | unused |"]
    lines.append("|---|---|---|---|---|---|---|")
    for key, f in (entry.get("features") or {}).items():
        mean = f.get("mean_skew_s")
        lines.append(
            f"| {key} | {f.get('samples')} | {1e3 * float(f.get('max_skew_s') or 0):.2f} | "
            f"{'-' if mean is None else f'{1e3 * float(mean):.2f}'} | {f.get('stale_drops')} | "
            f"{f.get('reused')} | {f.get('unused')} |"
        )
    if entry.get("skipped"):
        lines.append(f"\nskipped: {entry['skipped']}")
    return "\n".join(lines)


def log_episode(logger: ViewLogger, reader: DatasetReader, episode_index: int, *, image_stride: int = 1) -> EpisodeView:
    """Log episode `episode_index` of `reader`; cameras every `image_stride`-th frame.

    Raises DatasetError for an episode that does not exist. A camera whose video cannot be decoded (a missing
    or broken file) is listed in `problems` and logged as a warning; the rest of the episode is still shown.
    """
    if not 0 <= episode_index < reader.num_episodes:
        raise DatasetError(
            f"episode {episode_index} does not exist: {reader.root} has {reader.num_episodes} episode(s) "
            f"(0..{reader.num_episodes - 1})"
        )
    if image_stride < 1:
        raise ValueError(f"image_stride must be >= 1, got {image_stride}")
    start, end = reader.episode_range(episode_index)
    rows = range(start, end)
    view = EpisodeView(episode_index, end - start)
    rec = logger.rec
    timestamps = reader.episode_frames(episode_index, "timestamp").astype(np.float64).reshape(-1)
    frame_index = np.arange(end - start, dtype=np.int64)
    index = [rr.TimeColumn(FRAME, sequence=frame_index), rr.TimeColumn(EPISODE_TIME, duration=timestamps)]

    features = reader.features
    vectors = {
        key: list(spec.names or [str(i) for i in range(int(np.prod(spec.shape)))])
        for key, spec in features.items()
        if spec.dtype in ("float32", "float64", "int64", "int32", "bool") and key not in BOOKKEEPING
    }
    logger.log_styles(vectors)
    entry = episode_sync_entry(reader.root, episode_index)
    cameras = [key for key, spec in features.items() if spec.is_camera]
    rec.send_blueprint(layout(cameras, vectors, live=False, timeline=FRAME, sync_report=entry is not None))
    for key, names in vectors.items():
        values = reader.episode_frames(episode_index, key).astype(np.float64).reshape(end - start, -1)
        labels = names if values.shape[1] == len(names) else [str(i) for i in range(values.shape[1])]
        for j, path in enumerate(vector_paths(key, labels)):
            rec.send_columns(path, indexes=index, columns=rr.Scalars.columns(scalars=values[:, j]))
        view.vectors.append(key)

    _log_tasks(logger, reader, episode_index, timestamps)

    if not cameras:
        view.problems.append("this dataset has no camera features (no videos or images to show)")
    for key in cameras:
        depth = features[key].dtype not in ("video", "image")
        logged = 0
        for offset, row in enumerate(rows):
            if offset % image_stride:
                continue
            try:
                picture = reader.value(row, key)
            except DatasetError as err:
                view.problems.append(f"{key}: {err}")
                break
            rec.set_time(FRAME, sequence=offset)
            logger.log_image(key, float(timestamps[offset]), np.asarray(picture), depth=depth)
            logged += 1
        view.cameras[key] = logged
        if not logged:
            rec.set_time(FRAME, sequence=0)
            logger.log_text(f"{camera_path(key)}/problem", 0.0, f"{key} could not be shown", "WARN")

    if entry is not None:
        view.sync_report = True
        logger.log_document("sync/report", _sync_markdown(entry))
        for key, f in (entry.get("features") or {}).items():
            for stat in ("max_skew_s", "mean_skew_s"):
                if f.get(stat) is not None:
                    rec.log(f"sync/{entity_part(key)}/{stat}", rr.Scalars(float(f[stat])), static=True)
        view.problems += _log_frame_sync(logger, entry, index, view.frames)
    rec.set_time(FRAME, sequence=0)
    for problem in view.problems:
        logger.log_text("view/problems", 0.0, problem, "WARN")
    return view


def _log_frame_sync(logger: ViewLogger, entry: dict[str, Any], index: list[Any], frames: int) -> list[str]:
    """Plot the report's per-frame skews and reuses of each feature; returns why a feature's are not shown."""
    problems = []
    per_frame = entry.get("per_frame")
    for key, record in (per_frame if isinstance(per_frame, dict) else {}).items():
        try:
            skews = np.asarray(record["skew_ms"], dtype=np.float64).reshape(-1)
            frames_reused = np.asarray(record["reused_frames"], dtype=np.int64).reshape(-1)
            if frames_reused.size and not 0 <= frames_reused.min() <= frames_reused.max() < len(skews):
                raise IndexError(f"reused frame numbers outside 0..{len(skews) - 1}")
            reused = np.zeros(len(skews))
            reused[frames_reused] = 1.0
        except (KeyError, TypeError, ValueError, IndexError) as err:
            problems.append(f"sync report: the per-frame record of {key} is unreadable ({err!r}); not plotted")
            continue
        if len(skews) != frames:
            problems.append(
                f"sync report: {len(skews)} per-frame skews of {key} for an episode of {frames} frames "
                "(the dataset changed after bag2dataset?); not plotted"
            )
            continue
        path = f"sync/{entity_part(key)}"
        logger.rec.send_columns(f"{path}/skew_ms", indexes=index, columns=rr.Scalars.columns(scalars=skews))
        logger.rec.send_columns(f"{path}/reused", indexes=index, columns=rr.Scalars.columns(scalars=reused))
    return problems


def _log_tasks(
    logger: ViewLogger, reader: DatasetReader, episode_index: int, timestamps: npt.NDArray[np.float64]
) -> None:
    start, end = reader.episode_range(episode_index)
    task_rows = reader.episode_frames(episode_index, "task_index").astype(np.int64).reshape(-1)
    tasks = reader.tasks
    names = sorted({tasks[i] for i in task_rows if 0 <= i < len(tasks)})
    logger.log_document(
        "task", "# Task\n" + "\n".join(f"- {t}" for t in names) + f"\n\nepisode {episode_index}, {end - start} frames"
    )
    previous = -1
    for offset, task in enumerate(task_rows):
        if task != previous:
            previous = int(task)
            logger.rec.set_time(FRAME, sequence=offset)
            text = tasks[task] if 0 <= task < len(tasks) else f"task_index {task} (not in meta/tasks)"
            logger.log_text("task/changes", float(timestamps[offset]), text)
