"""Reading the metadata of a LeRobot v3.0 dataset (info.json, tasks, episodes table, stats)."""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

from lerobot_dataset import stats as stats_mod
from lerobot_dataset.errors import DatasetFormatError, DatasetNotFoundError, FeatureError
from lerobot_dataset.features import BOOKKEEPING_DTYPES, FeatureSpec
from lerobot_dataset.layout import INFO_PATH, STATS_PATH, TASKS_PATH, FileRef


def read_json(path: Path) -> Any:
    try:
        return json.loads(path.read_text())
    except FileNotFoundError:
        raise DatasetFormatError(f"{path} is missing") from None
    except (OSError, ValueError) as err:
        raise DatasetFormatError(f"{path} is not valid JSON: {err}") from None


def read_tasks(path: Path) -> list[str]:
    """Task strings in task_index order, read the way LeRobot reads them (the pandas index)."""
    try:
        frame = pd.read_parquet(path)
    except FileNotFoundError:
        raise DatasetFormatError(f"{path} is missing") from None
    except (OSError, ValueError, pa.ArrowException) as err:
        raise DatasetFormatError(f"{path} is unreadable: {err}") from None
    if "task_index" not in frame.columns:
        raise DatasetFormatError(f"{path} has no task_index column")
    order = np.argsort(frame["task_index"].to_numpy(), kind="stable")
    if all(isinstance(t, str) for t in frame.index):
        return [str(frame.index[i]) for i in order]
    if "task" in frame.columns:  # broken layout (validate reports it), still readable
        return [str(frame["task"].iloc[i]) for i in order]
    raise DatasetFormatError(f"{path} holds no task strings (expected them as the pandas index)")


def write_tasks(path: Path, tasks: list[str]) -> None:
    """tasks.parquet as LeRobot writes it: task strings as the (unnamed) pandas index."""
    frame = pd.DataFrame({"task_index": np.arange(len(tasks), dtype=np.int64)}, index=pd.Index(tasks, dtype=object))
    frame.to_parquet(path)


def episode_files(root: Path) -> list[Path]:
    return sorted((root / "meta" / "episodes").glob("*/*.parquet"))


def data_files(root: Path) -> list[Path]:
    return sorted((root / "data").glob("*/*.parquet"))


@dataclass
class DatasetMeta:
    """Everything in meta/: the schema, counts, tasks, one row per episode and the stats."""

    root: Path
    info: dict[str, Any]
    features: dict[str, FeatureSpec]
    tasks: list[str]
    episodes: list[dict[str, Any]]
    stats: dict[str, dict[str, Any]] | None = field(default=None)

    @classmethod
    def load(cls, root: Path) -> DatasetMeta:
        """Read meta/ of the dataset at `root`; raises DatasetNotFoundError or DatasetFormatError."""
        if not (root / INFO_PATH).is_file():
            raise DatasetNotFoundError(f"{root} holds no LeRobot dataset ({INFO_PATH} is missing)")
        info = read_json(root / INFO_PATH)
        if not isinstance(info, dict) or not isinstance(info.get("features"), dict):
            raise DatasetFormatError(f"{root / INFO_PATH} has no 'features' object")
        version = str(info.get("codebase_version", ""))
        if not version.startswith("v3."):
            raise DatasetFormatError(
                f"{root} is a LeRobot {version or 'unknown-version'} dataset; only v3.x is supported "
                "(convert it with lerobot's convert_dataset_v21_to_v30)"
            )
        for key in ("fps", "total_frames", "total_episodes"):
            value = info.get(key)
            if not isinstance(value, int) or isinstance(value, bool) or value < (1 if key == "fps" else 0):
                kind = "a positive" if key == "fps" else "a non-negative"
                raise DatasetFormatError(
                    f"{root / INFO_PATH}: {key} must be {kind} integer, is {str(value)[:40]}; fix meta/info.json "
                    f"(`lerobot-ros dataset validate {root}` lists every problem)"
                )
        try:
            features = {key: FeatureSpec.from_info(key, entry) for key, entry in info["features"].items()}
        except FeatureError as err:
            raise DatasetFormatError(str(err)) from None
        tasks = read_tasks(root / TASKS_PATH)
        rows: list[dict[str, Any]] = []
        for path in episode_files(root):
            try:
                rows.extend(pq.read_table(path).to_pylist())
            except (OSError, pa.ArrowException) as err:
                raise DatasetFormatError(f"{path} is unreadable: {err}") from None
        stats_path = root / STATS_PATH
        stats = read_json(stats_path) if stats_path.is_file() else None
        return cls(root=root, info=info, features=features, tasks=tasks, episodes=rows, stats=stats)

    @property
    def fps(self) -> int:
        return int(self.info["fps"])

    @property
    def total_frames(self) -> int:
        return int(self.info["total_frames"])

    @property
    def total_episodes(self) -> int:
        return int(self.info["total_episodes"])

    @property
    def chunks_size(self) -> int:
        return int(self.info.get("chunks_size", 1000))

    @property
    def user_features(self) -> dict[str, FeatureSpec]:
        """Features the user declared (the five bookkeeping ones left out)."""
        return {k: v for k, v in self.features.items() if k not in BOOKKEEPING_DTYPES}

    @property
    def video_keys(self) -> list[str]:
        return [k for k, v in self.features.items() if v.dtype == "video"]

    def data_path(self, episode: Mapping[str, Any]) -> Path:
        ref = FileRef(int(episode["data/chunk_index"]), int(episode["data/file_index"]))
        return self.root / ref.fmt(str(self.info["data_path"]))

    def video_path(self, episode: Mapping[str, Any], key: str) -> Path:
        ref = FileRef(int(episode[f"videos/{key}/chunk_index"]), int(episode[f"videos/{key}/file_index"]))
        return self.root / ref.fmt(str(self.info["video_path"]), video_key=key)

    def episode_stats(self, episode: Mapping[str, Any]) -> stats_mod.EpisodeStats:
        """Per-episode statistics from the `stats/<feature>/<stat>` columns of an episode row."""
        out: stats_mod.EpisodeStats = {}
        for column, value in episode.items():
            if not column.startswith("stats/") or value is None:
                continue
            _, key, name = column.split("/", 2)
            out.setdefault(key, {})[name] = np.asarray(value)
        return out
