"""`DatasetReader`: random access to the frames of a LeRobot v3.0 dataset (ours or LeRobot's)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt
import pyarrow as pa
import pyarrow.parquet as pq

from lerobot_dataset.errors import DatasetError, DatasetFormatError
from lerobot_dataset.features import BOOKKEEPING_DTYPES, FeatureSpec
from lerobot_dataset.images import decode_png
from lerobot_dataset.meta import DatasetMeta, data_files
from lerobot_dataset.video import VideoDecoder


class DatasetReader:
    """Reads frames by global index, with LeRobot's `delta_timestamps` windows.

    `reader[i]` returns a dict: user features as numpy arrays of their declared shape (cameras
    decoded to (H, W, 3) uint8 RGB), the bookkeeping features (`timestamp`, `frame_index`,
    `episode_index`, `index`, `task_index`) as numpy scalars, and `task` (str).
    """

    def __init__(self, root: Path, *, tolerance_s: float = 1e-4, max_open_videos: int = 8) -> None:
        self.root = Path(root)
        self.meta = DatasetMeta.load(self.root)
        self.tolerance_s = tolerance_s
        tables = []
        for path in data_files(self.root):
            try:
                tables.append(pq.read_table(path, memory_map=True))
            except (OSError, pa.ArrowException) as err:
                raise DatasetFormatError(f"{path} is unreadable: {err}") from None
        if not tables:
            self._table: pa.Table | None = None
        else:
            try:
                self._table = pa.concat_tables(tables, promote_options="permissive")
            except pa.ArrowException as err:
                raise DatasetFormatError(f"data files do not share one schema: {err}") from None
        self._from = np.array([int(e["dataset_from_index"]) for e in self.meta.episodes], dtype=np.int64)
        self._decoder = VideoDecoder(max_open=max_open_videos, tolerance_s=tolerance_s)
        self._columns: dict[str, Any] = {}
        self._arrays: dict[str, npt.NDArray[Any]] = {}

    def __len__(self) -> int:
        return self.meta.total_frames

    @property
    def num_episodes(self) -> int:
        return self.meta.total_episodes

    @property
    def fps(self) -> int:
        return self.meta.fps

    @property
    def features(self) -> dict[str, FeatureSpec]:
        """All features, the five bookkeeping ones included (as in info.json)."""
        return dict(self.meta.features)

    @property
    def tasks(self) -> list[str]:
        return list(self.meta.tasks)

    @property
    def episodes(self) -> list[dict[str, Any]]:
        """Rows of the episodes table (file pointers, lengths, tasks, per-episode stats)."""
        return self.meta.episodes

    def episode_range(self, episode_index: int) -> tuple[int, int]:
        """Global row range [from, to) of an episode."""
        row = self.meta.episodes[episode_index]
        return int(row["dataset_from_index"]), int(row["dataset_to_index"])

    def _column(self, key: str) -> Any:
        if key not in self._columns:
            if self._table is None or key not in self._table.column_names:
                raise DatasetFormatError(f"the data files of {self.root} have no column {key!r}")
            self._columns[key] = self._table.column(key)
        return self._columns[key]

    def _numeric(self, key: str, spec: FeatureSpec) -> npt.NDArray[Any]:
        """A numeric column as a (rows, dim) array of the feature's dtype, converted once."""
        if key not in self._arrays:
            column = self._column(key).combine_chunks()
            if pa.types.is_list(column.type) or pa.types.is_fixed_size_list(column.type):
                values = column.flatten().to_numpy(zero_copy_only=False).reshape(len(column), -1)
            else:
                values = column.to_numpy(zero_copy_only=False).reshape(-1, 1)
            self._arrays[key] = values.astype(np.dtype(spec.dtype), copy=False)
        return self._arrays[key]

    def _check_index(self, index: int) -> int:
        if not -len(self) <= index < len(self):
            raise IndexError(f"frame {index} is out of range (the dataset has {len(self)} frames)")
        return index % len(self)

    def _episode_of(self, index: int) -> Mapping[str, Any]:
        pos = int(np.searchsorted(self._from, index, side="right")) - 1
        if pos < 0:
            raise DatasetFormatError(f"no episode holds frame {index}")
        return self.meta.episodes[pos]

    def _value(self, key: str, spec: FeatureSpec, row: int, episode: Mapping[str, Any]) -> Any:
        if spec.dtype == "video":
            timestamp = float(self._numeric("timestamp", self.meta.features["timestamp"])[row, 0])
            t = float(episode[f"videos/{key}/from_timestamp"]) + timestamp
            return self._decoder.frame_at(self.meta.video_path(episode, key), t)
        if spec.dtype == "image":
            return decode_png(self._column(key)[row].as_py()["bytes"])
        if spec.dtype == "string":
            return self._column(key)[row].as_py()
        values = self._numeric(key, spec)[row]
        if key in BOOKKEEPING_DTYPES:
            return values[0]
        return values.reshape(spec.shape).copy()

    def check_shapes(self) -> None:
        """Compare every user feature's declared shape (meta/info.json) with what its data holds at frame 0
        (decoding one frame per camera); raises DatasetFormatError at the first that differs. Call it before
        sizing anything (a model, a buffer) from the declared shapes: info.json can say anything."""
        if len(self) == 0:
            return
        episode = self._episode_of(0)
        for key, spec in self.meta.user_features.items():
            if spec.dtype == "string":
                continue
            try:
                if spec.is_camera:
                    found = tuple(np.shape(self._value(key, spec, 0, episode)))
                else:
                    found = (int(self._numeric(key, spec)[0].size),)
            except (ValueError, TypeError, OSError) as err:
                raise DatasetFormatError(f"{self.root}: frame 0 of {key!r} cannot be read: {err}") from None
            if found != spec.shape:
                raise DatasetFormatError(
                    f"{self.root}: meta/info.json declares {key!r} with shape {list(spec.shape)} but its data holds "
                    f"{list(found)}; fix meta/info.json (`lerobot-ros dataset validate {self.root}` lists every "
                    "problem)"
                )

    def value(self, index: int, key: str) -> Any:
        """One feature of frame `index` (as in `reader[index][key]`), decoding nothing else."""
        index = self._check_index(index)
        spec = self.meta.features.get(key)
        if spec is None:
            raise DatasetError(f"{key!r} is not a feature of {self.root}")
        return self._value(key, spec, index, self._episode_of(index))

    def __getitem__(self, index: int) -> dict[str, Any]:
        return self._item(index, skip=())

    def _item(self, index: int, skip: Sequence[str]) -> dict[str, Any]:
        index = self._check_index(index)
        episode = self._episode_of(index)
        features = self.meta.features
        item = {key: self._value(key, spec, index, episode) for key, spec in features.items() if key not in skip}
        task_index = self._numeric("task_index", features["task_index"])[index, 0]
        item["task"] = self.meta.tasks[int(task_index)]
        return item

    def get(self, index: int, delta_timestamps: Mapping[str, Sequence[float]] | None = None) -> dict[str, Any]:
        """`reader[index]`, with `delta_timestamps` windows stacked as LeRobot does.

        For each key, the frames at `index + round(delta * fps)` are stacked on a new first axis;
        positions outside the episode repeat its first/last frame and are flagged True in
        `f"{key}_is_pad"`. Deltas must be multiples of 1/fps (within tolerance_s).
        """
        if not delta_timestamps:
            return self[index]
        item = self._item(index, skip=list(delta_timestamps))  # windowed keys are decoded once, below
        index = self._check_index(index)
        episode = self._episode_of(index)
        start, end = int(episode["dataset_from_index"]), int(episode["dataset_to_index"])
        for key, deltas in delta_timestamps.items():
            spec = self.meta.features.get(key)
            if spec is None:
                raise DatasetError(f"delta_timestamps names {key!r}, which is not a feature of {self.root}")
            offsets = []
            for delta in deltas:
                steps = float(delta) * self.fps
                if abs(steps - round(steps)) / self.fps > self.tolerance_s:
                    raise DatasetError(
                        f"delta_timestamps[{key!r}] has {delta}, not a multiple of 1/fps = {1 / self.fps:.6f} s"
                    )
                offsets.append(round(steps))
            rows = [min(max(index + k, start), end - 1) for k in offsets]
            values = [self._value(key, spec, row, episode) for row in rows]
            item[key] = np.stack([np.asarray(v) for v in values])
            item[f"{key}_is_pad"] = np.array([not start <= index + k < end for k in offsets], dtype=bool)
        return item

    def episode_frames(self, episode_index: int, key: str) -> npt.NDArray[Any]:
        """All values of one feature over one episode, stacked (cameras decoded)."""
        start, end = self.episode_range(episode_index)
        episode = self.meta.episodes[episode_index]
        spec = self.meta.features[key]
        return np.stack([np.asarray(self._value(key, spec, row, episode)) for row in range(start, end)])

    def close(self) -> None:
        self._decoder.close()

    def __enter__(self) -> DatasetReader:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
