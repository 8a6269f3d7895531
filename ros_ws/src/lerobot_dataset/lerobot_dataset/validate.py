"""Checks every invariant of a LeRobot v3.0 dataset, including those LeRobot's loader does not check.

LeRobot 0.4.4 loads, without any error, datasets whose `total_frames` disagrees with the data,
whose stats.json is missing, whose `index` is not the row position, whose timestamps are shifted,
whose fps disagrees with the videos, or whose tasks.parquet stores the task strings as a column
(LEROBOT_V3_FORMAT.md §10). `validate` reports those and everything else, one `Problem` each.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

from lerobot_dataset.commit import JOURNAL_NAME, pending_renames
from lerobot_dataset.errors import DatasetError
from lerobot_dataset.features import BOOKKEEPING_DTYPES, FeatureSpec
from lerobot_dataset.layout import EPISODES_PATH, INFO_PATH, STAGING_DIR, STATS_PATH, TASKS_PATH, FileRef
from lerobot_dataset.meta import data_files, episode_files
from lerobot_dataset.stats import STAT_KEYS
from lerobot_dataset.video import VIDEO_CODECS, frame_times, probe

REQUIRED_INFO_KEYS = ("codebase_version", "fps", "features", "total_episodes", "total_frames", "data_path")
TIMESTAMP_TOLERANCE_S = 1e-4


@dataclass(frozen=True)
class Problem:
    """One violated invariant: where (a file, or an episode) and what."""

    where: str
    message: str

    def __str__(self) -> str:
        return f"{self.where}: {self.message}"


class _Report:
    def __init__(self) -> None:
        self.problems: list[Problem] = []

    def add(self, where: str, message: str) -> None:
        self.problems.append(Problem(where, message))


def validate(root: Path, *, check_videos: bool = True) -> list[Problem]:
    """All problems found in the dataset at `root` (an empty list means valid)."""
    root = Path(root)
    report = _Report()
    info = _check_info(root, report)
    if info is None:
        return report.problems
    journal = root / STAGING_DIR / JOURNAL_NAME
    pending, total = pending_renames(root)
    if not info["total_episodes"] and not episode_files(root) and not data_files(root) and pending:
        report.add(
            str(journal.relative_to(root)),
            "a commit was interrupted after it was decided (the first episode's files are not in place yet); "
            "finish it with `lerobot-ros dataset validate --repair ROOT` (or DatasetWriter.open)",
        )
        return report.problems
    if 0 < pending < total:
        report.add(
            str(journal.relative_to(root)),
            f"a commit was interrupted after it was decided ({pending} file(s) not yet in place, so the files "
            "disagree); finish it with `lerobot-ros dataset validate --repair ROOT` (or DatasetWriter.open)",
        )
    if any(path.is_file() for path in (root / "images").rglob("*")):  # LeRobot leaves the empty folders
        report.add("images/", "leftover PNG frames of an unfinished LeRobot recording (save_episode deletes them)")
    if not info["total_episodes"] and not episode_files(root) and not data_files(root):
        report.add(
            INFO_PATH,
            "the dataset holds no committed episode (a recording or conversion stopped before its first save); "
            "LeRobot cannot load it: record into it again (the writer takes it over) or delete the folder",
        )
        return report.problems
    features = _check_features(info, report)
    tasks = _check_tasks(root, info, report)
    episodes = _check_episodes(root, info, tasks, report)
    _check_data(root, info, features, episodes, tasks, report)
    _check_episode_stats(episodes, report)
    if info["total_episodes"]:  # stats.json appears with the first episode
        _check_stats(root, features, int(info["total_frames"]), report)
    if check_videos:
        _check_videos(root, info, features, episodes, report)
    return report.problems


def _check_info(root: Path, report: _Report) -> dict[str, Any] | None:
    path = root / INFO_PATH
    if not path.is_file():
        report.add(INFO_PATH, "missing: this is not a LeRobot dataset root")
        return None
    try:
        info = json.loads(path.read_text())
    except ValueError as err:
        report.add(INFO_PATH, f"not valid JSON: {err}")
        return None
    if not isinstance(info, dict):
        report.add(INFO_PATH, "is not a JSON object")
        return None
    missing = [key for key in REQUIRED_INFO_KEYS if key not in info]
    if missing:
        report.add(INFO_PATH, f"lacks {', '.join(missing)}")
        return None
    if not str(info["codebase_version"]).startswith("v3."):
        report.add(INFO_PATH, f"codebase_version is {info['codebase_version']!r}; LeRobot >= 0.4 loads only v3.x")
    if not isinstance(info["fps"], int) or info["fps"] <= 0:
        report.add(INFO_PATH, f"fps must be a positive integer, is {info['fps']!r}")
        return None
    has_video = any(isinstance(f, dict) and f.get("dtype") == "video" for f in info["features"].values())
    if has_video and not info.get("video_path"):
        report.add(INFO_PATH, "video features are declared but video_path is null")
    if not has_video and info.get("video_path") is not None:
        report.add(INFO_PATH, "video_path is set but no feature has dtype 'video' (LeRobot writes null)")
    if info.get("total_tasks") is None:
        report.add(INFO_PATH, "lacks total_tasks")
    splits = info.get("splits", {})
    if isinstance(splits, dict) and "train" in splits and splits["train"] != f"0:{info['total_episodes']}":
        report.add(INFO_PATH, f"splits.train is {splits['train']!r}, expected '0:{info['total_episodes']}'")
    return info


def _check_features(info: dict[str, Any], report: _Report) -> dict[str, FeatureSpec]:
    features: dict[str, FeatureSpec] = {}
    for key, entry in info["features"].items():
        if "/" in key:
            report.add(INFO_PATH, f"feature name {key!r} contains '/', which breaks the episodes table columns")
        try:
            features[key] = FeatureSpec.from_info(key, entry)
        except DatasetError as err:
            report.add(INFO_PATH, str(err))
    for key, dtype in BOOKKEEPING_DTYPES.items():
        spec = features.get(key)
        if spec is None:
            report.add(INFO_PATH, f"bookkeeping feature {key!r} is missing")
        elif spec.dtype != dtype or spec.shape != (1,):
            report.add(INFO_PATH, f"feature {key!r} must be {dtype} shape [1], is {spec.dtype} {list(spec.shape)}")
    return features


def _check_tasks(root: Path, info: dict[str, Any], report: _Report) -> list[str] | None:
    path = root / TASKS_PATH
    if not path.is_file():
        report.add(TASKS_PATH, "missing (LeRobot would try to download it from the Hub)")
        return None
    try:
        frame = pd.read_parquet(path)
    except (OSError, ValueError, pa.ArrowException) as err:
        report.add(TASKS_PATH, f"unreadable: {err}")
        return None
    if "task_index" not in frame.columns:
        report.add(TASKS_PATH, "has no task_index column")
        return None
    tasks: list[str]
    if all(isinstance(t, str) for t in frame.index):
        tasks = [str(t) for t in frame.index]
    else:
        report.add(
            TASKS_PATH,
            "task strings are not the pandas index (LeRobot then returns task == 0 for every frame); "
            "write DataFrame({'task_index': ...}, index=tasks)",
        )
        tasks = [str(t) for t in frame["task"]] if "task" in frame.columns else []
    indices = frame["task_index"].tolist()
    if indices != list(range(len(frame))):
        report.add(TASKS_PATH, f"task_index must equal the row position 0..{len(frame) - 1}, is {indices[:10]}")
    if len(set(tasks)) != len(tasks):
        report.add(TASKS_PATH, "task strings are not unique")
    if info.get("total_tasks") is not None and info["total_tasks"] != len(frame):
        report.add(INFO_PATH, f"total_tasks is {info['total_tasks']} but tasks.parquet has {len(frame)} rows")
    return tasks


def _ref(row: dict[str, Any], prefix: str) -> FileRef:
    return FileRef(int(row[f"{prefix}/chunk_index"]), int(row[f"{prefix}/file_index"]))


def _check_episodes(root: Path, info: dict[str, Any], tasks: list[str] | None, report: _Report) -> list[dict[str, Any]]:
    files = episode_files(root)
    if not files:
        if info["total_episodes"]:
            report.add("meta/episodes", "no episodes parquet file (the recording was never finalized)")
        return []
    rows: list[dict[str, Any]] = []
    required = ("episode_index", "tasks", "length", "dataset_from_index", "dataset_to_index")
    for path in files:
        rel = str(path.relative_to(root))
        try:
            table = pq.read_table(path)
        except (OSError, pa.ArrowException) as err:
            report.add(rel, f"unreadable (no footer?): {err}")
            continue
        missing = [c for c in (*required, "data/chunk_index", "data/file_index") if c not in table.column_names]
        if missing:
            report.add(rel, f"lacks columns {', '.join(missing)}")
            continue
        for row in table.to_pylist():
            if "meta/episodes/chunk_index" in row:
                own = _ref(row, "meta/episodes").fmt(EPISODES_PATH)
                if own != rel:
                    report.add(rel, f"episode {row['episode_index']} says its row is stored in {own}")
            rows.append(row)
    if len(rows) != info["total_episodes"]:
        report.add(INFO_PATH, f"total_episodes is {info['total_episodes']} but the episodes table has {len(rows)} rows")
    expected_from = 0
    for position, row in enumerate(rows):
        where = f"episode row {position}"
        if row["episode_index"] != position:
            report.add(where, f"holds episode_index {row['episode_index']}; row i must be episode i")
        if row["dataset_from_index"] != expected_from:
            report.add(where, f"dataset_from_index is {row['dataset_from_index']}, expected {expected_from}")
        if row["dataset_to_index"] - row["dataset_from_index"] != row["length"]:
            report.add(where, f"dataset_to_index - dataset_from_index != length ({row['length']})")
        if row["length"] <= 0:
            report.add(where, "has no frames")
        if tasks is not None:
            unknown = [t for t in row["tasks"] or [] if t not in tasks]
            if unknown:
                report.add(where, f"names tasks missing from tasks.parquet: {unknown}")
        expected_from = int(row["dataset_to_index"])
    total = sum(int(r["length"]) for r in rows)
    if rows and total != info["total_frames"]:
        report.add(INFO_PATH, f"total_frames is {info['total_frames']} but the episodes hold {total} frames")
    return rows


def _iter_data(root: Path, numeric: list[str], report: _Report) -> Iterator[tuple[str, list[str], pa.Table]]:
    """(path, all column names, the numeric columns) of every data file; image bytes are not read."""
    for path in data_files(root):
        rel = str(path.relative_to(root))
        try:
            names = pq.read_schema(path).names
            yield rel, names, pq.read_table(path, columns=[c for c in names if c in numeric])
        except (OSError, pa.ArrowException) as err:
            report.add(rel, f"unreadable (a parquet file without footer?): {err}")


def _check_data(
    root: Path,
    info: dict[str, Any],
    features: dict[str, FeatureSpec],
    episodes: list[dict[str, Any]],
    tasks: list[str] | None,
    report: _Report,
) -> None:
    fps = int(info["fps"])
    columns = [k for k, f in features.items() if f.dtype != "video"]
    by_row = {int(row["dataset_from_index"]): row for row in episodes}
    position = 0
    numeric = [k for k in columns if features[k].dtype not in ("image", "string")]
    for rel, names, table in _iter_data(root, numeric, report):
        missing = [c for c in columns if c not in names]
        if missing:
            report.add(rel, f"lacks columns {', '.join(missing)}")
            position += table.num_rows
            continue
        extra = [c for c in names if c not in columns]
        if extra:
            report.add(rel, f"has columns not declared in info.json: {', '.join(extra)}")
        for key in numeric:
            spec = features[key]
            column = table.column(key)
            if spec.shape != (1,):
                lengths = pa.compute.list_value_length(column).to_numpy(zero_copy_only=False)
                if (lengths != spec.shape[0]).any():
                    report.add(rel, f"column {key!r} holds vectors whose length differs from {spec.shape[0]}")
                    continue
            _check_finite_column(rel, key, spec, column, table, report)
        index = table.column("index").to_numpy()
        episode_index = table.column("episode_index").to_numpy()
        frame_index = table.column("frame_index").to_numpy()
        timestamp = table.column("timestamp").to_numpy().astype(np.float64)
        task_index = table.column("task_index").to_numpy()
        rows = np.arange(position, position + table.num_rows)
        bad = np.nonzero(index != rows)[0]
        if bad.size:
            report.add(
                rel, f"{bad.size} rows have index != row position (first: row {rows[bad[0]]} has {index[bad[0]]})"
            )
        if tasks is not None and ((task_index < 0) | (task_index >= len(tasks))).any():
            report.add(rel, f"task_index outside 0..{len(tasks) - 1}")
        for start in np.nonzero(frame_index == 0)[0]:
            found_ep = by_row.get(int(rows[start]))
            if found_ep is None:
                report.add(
                    rel, f"an episode starts at row {rows[start]} but no episode row has that dataset_from_index"
                )
                continue
            ep = found_ep
            length = int(ep["length"])
            where = f"episode {ep['episode_index']}"
            seg = slice(int(start), int(start) + length)
            if int(start) + length > table.num_rows:
                report.add(where, f"runs past the end of {rel}; an episode must sit whole in one data file")
                continue
            expected_ref = FileRef(int(ep["data/chunk_index"]), int(ep["data/file_index"])).fmt(str(info["data_path"]))
            if expected_ref != rel:
                report.add(where, f"the episodes table points at {expected_ref} but its rows are in {rel}")
            if (episode_index[seg] != ep["episode_index"]).any():
                report.add(where, "rows carry another episode_index")
            if (frame_index[seg] != np.arange(length)).any():
                report.add(where, f"frame_index does not run 0..{length - 1}")
            drift = np.abs(timestamp[seg] - np.arange(length) / fps)
            if drift.max() > TIMESTAMP_TOLERANCE_S:
                worst = int(np.argmax(drift))
                report.add(
                    where,
                    f"timestamp != frame_index / fps (frame {worst}: {timestamp[seg][worst]:.6f} s, expected "
                    f"{worst / fps:.6f} s); LeRobot would serve another moment's video frame",
                )
            if tasks is not None and ep.get("tasks"):
                allowed = {tasks.index(t) for t in ep["tasks"] if t in tasks}
                if not set(task_index[seg].tolist()) <= allowed:
                    report.add(where, "rows use a task_index not listed in the episode's tasks")
        position += table.num_rows
    if position != info["total_frames"]:
        report.add(
            INFO_PATH,
            f"total_frames is {info['total_frames']} but the data files hold {position} rows "
            "(LeRobot's len(dataset) is total_frames)",
        )


def _check_finite_column(
    rel: str, key: str, spec: FeatureSpec, column: pa.ChunkedArray, table: pa.Table, report: _Report
) -> None:
    """One line naming file, column, episode and frame of the first NaN/inf of a float column."""
    if spec.dtype not in ("float32", "float64", "float16"):
        return
    flat = column.combine_chunks()
    if spec.shape != (1,):
        flat = flat.flatten()
    values = flat.to_numpy(zero_copy_only=False).astype(np.float64, copy=False)
    bad = ~np.isfinite(values)
    if not bad.any():
        return
    width = spec.shape[0] if spec.shape != (1,) else 1
    bad_rows = np.flatnonzero(bad.reshape(-1, width).any(axis=1))
    first = int(bad_rows[0])
    where = f"row {first}"
    if "episode_index" in table.column_names and "frame_index" in table.column_names:
        episode = table.column("episode_index")[first].as_py()
        frame = table.column("frame_index")[first].as_py()
        where = f"episode {episode}, frame {frame}"
    report.add(
        rel,
        f"column {key!r} holds NaN/inf in {bad_rows.size} row(s) (first: {where}); LeRobot's statistics and "
        "training cannot use them: re-record or convert again (the contract now refuses such samples)",
    )


def _nonfinite(value: Any) -> bool:
    try:
        array = np.asarray(value, dtype=np.float64)
    except (TypeError, ValueError):
        return False
    return bool((~np.isfinite(array)).any())


def _check_episode_stats(episodes: list[dict[str, Any]], report: _Report) -> None:
    for row in episodes:
        bad = sorted(c for c, v in row.items() if c.startswith("stats/") and v is not None and _nonfinite(v))
        if bad:
            where = "meta/episodes"
            if "meta/episodes/chunk_index" in row:
                where = _ref(row, "meta/episodes").fmt(EPISODES_PATH)
            report.add(where, f"episode {row['episode_index']} has NaN/inf statistics in {', '.join(bad[:4])}")


def _check_stats(root: Path, features: dict[str, FeatureSpec], total_frames: int, report: _Report) -> None:
    path = root / STATS_PATH
    if not path.is_file():
        report.add(STATS_PATH, "missing (policies cannot normalise without it)")
        return
    try:
        stats = json.loads(path.read_text())
    except ValueError as err:
        report.add(STATS_PATH, f"not valid JSON: {err}")
        return
    for key, spec in features.items():
        if spec.dtype == "string":
            continue
        entry = stats.get(key)
        if entry is None:
            report.add(STATS_PATH, f"has no statistics for {key!r}")
            continue
        missing = [name for name in STAT_KEYS if name not in entry]
        if missing:
            report.add(STATS_PATH, f"{key!r} lacks {', '.join(missing)}")
            continue
        broken = [name for name in STAT_KEYS if _nonfinite(entry[name])]
        if broken:
            report.add(
                STATS_PATH,
                f"{key!r} {', '.join(broken)} hold NaN/inf (LeRobot's normalisation rejects them); "
                "the data it was computed from holds non-finite values",
            )
        expected = (3, 1, 1) if spec.is_camera else spec.shape
        for name in STAT_KEYS:
            shape = np.asarray(entry[name]).shape
            want = (1,) if name == "count" else expected
            if shape != want:
                report.add(STATS_PATH, f"{key!r} {name} has shape {list(shape)}, expected {list(want)}")
        if not spec.is_camera and np.asarray(entry["count"]).tolist() != [total_frames]:
            report.add(
                STATS_PATH,
                f"{key!r} count is {entry['count']} but the dataset has {total_frames} frames: "
                "the statistics are stale",
            )
        if spec.is_camera:
            lo, hi = np.asarray(entry["min"], dtype=float), np.asarray(entry["max"], dtype=float)
            if (lo < 0).any() or (hi > 1).any():
                report.add(STATS_PATH, f"{key!r} camera statistics must be in [0, 1] (divided by 255)")


def _check_videos(
    root: Path, info: dict[str, Any], features: dict[str, FeatureSpec], episodes: list[dict[str, Any]], report: _Report
) -> None:
    fps = int(info["fps"])
    template = info.get("video_path")
    if not template:
        return
    for key, spec in features.items():
        if spec.dtype != "video":
            continue
        files: dict[FileRef, list[dict[str, Any]]] = {}
        for ep in episodes:
            if f"videos/{key}/chunk_index" not in ep:
                report.add(f"episode {ep['episode_index']}", f"has no video pointer for {key!r}")
                continue
            files.setdefault(_ref(ep, f"videos/{key}"), []).append(ep)
        for ref, eps in sorted(files.items()):
            rel = ref.fmt(str(template), video_key=key)
            path = root / rel
            if not path.is_file():
                report.add(rel, "missing (LeRobot would try to download it from the Hub)")
                continue
            try:
                meta = probe(path)
                times = frame_times(path)
            except DatasetError as err:
                report.add(rel, str(err))
                continue
            codec_info = spec.info or {}
            if (meta.height, meta.width) != spec.shape[:2]:
                report.add(
                    rel, f"frames are {meta.height}x{meta.width}, info.json declares {spec.shape[0]}x{spec.shape[1]}"
                )
            declared_codec = codec_info.get("video.codec")
            if declared_codec and declared_codec not in (meta.codec, VIDEO_CODECS.get(meta.codec)):
                report.add(rel, f"codec is {meta.codec}, info.json declares {declared_codec}")
            if abs(meta.fps - fps) > 1e-3:
                report.add(rel, f"video runs at {meta.fps:g} fps but info.json says fps {fps}")
            expected_from = 0.0
            for ep in eps:
                where = f"episode {ep['episode_index']} ({key})"
                start = float(ep[f"videos/{key}/from_timestamp"])
                end = float(ep[f"videos/{key}/to_timestamp"])
                if abs(start - expected_from) > TIMESTAMP_TOLERANCE_S:
                    report.add(where, f"from_timestamp is {start:.6f} s, expected {expected_from:.6f} s")
                if abs((end - start) - int(ep["length"]) / fps) > TIMESTAMP_TOLERANCE_S:
                    report.add(where, f"spans {end - start:.6f} s of video for {ep['length']} frames at {fps} fps")
                expected = start + np.arange(int(ep["length"])) / fps
                found = np.searchsorted(times, expected - TIMESTAMP_TOLERANCE_S)
                ok = (found < len(times)) & (
                    np.abs(times[np.minimum(found, len(times) - 1)] - expected) <= TIMESTAMP_TOLERANCE_S
                )
                if not ok.all():
                    first = int(np.argmin(ok))
                    report.add(
                        where,
                        f"{int((~ok).sum())} rows have no video frame at their time (first: frame {first} at "
                        f"{expected[first]:.6f} s); the video must hold one frame per row",
                    )
                expected_from = end
            rows = sum(int(ep["length"]) for ep in eps)
            if len(times) != rows:
                report.add(rel, f"holds {len(times)} frames for {rows} rows of the episodes stored in it")
