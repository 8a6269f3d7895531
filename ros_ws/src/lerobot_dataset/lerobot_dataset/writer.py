"""`DatasetWriter`: records episodes into a LeRobot v3.0 dataset, committing each one atomically.

What an episode changes is decided here; the crash-safe file protocol (writer lock, journaled commit,
recovery, atomic creation) is commit.py's. See the package README for the long version:

* While an episode is recorded nothing under data/, videos/ or meta/ changes. Frames go to
  `<root>/.lerobot_ros_staging/episode-XXXXXX/` through an `EpisodeStager` (staging.py): numeric
  values stay in memory (small), every camera has a worker thread that encodes video frames into
  the episode's own mp4 (or PNG-encodes `image` frames into a spill file) and records the channel
  histograms for the statistics. Episodes staged elsewhere (the bag converter's worker processes,
  under `worker_staging_dir`) are committed the same way by `commit_staged`.
* `save_episode()` writes every file that changes as a complete new file in the staging folder
  (parquet with footer, mp4 with the episode appended by stream copy, tasks, stats, info) and hands
  them to an `EpisodeCommit`, which fsyncs them, writes a journal naming the renames, renames each
  file over its final name and deletes the journal. LeRobot's loader globs only data/*/*.parquet and
  meta/episodes/*/*.parquet, so staging files are invisible to it.
* `open` finishes an interrupted commit first (`commit.recover`); `create` builds the empty dataset
  beside the root and renames it into place, taking over a root left before its first commit.
"""

from __future__ import annotations

import json
from pathlib import Path
from types import TracebackType
from typing import IO, Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from lerobot_dataset import stats as stats_mod
from lerobot_dataset.commit import EpisodeCommit, acquire_lock, create_skeleton, recover, uncommitted_dataset
from lerobot_dataset.errors import (
    DatasetError,
    DatasetExistsError,
    DatasetFormatError,
    DatasetNotFoundError,
    EncoderError,
    EpisodeStateError,
    FeatureError,
    SchemaMismatchError,
)
from lerobot_dataset.features import (
    BOOKKEEPING_DTYPES,
    FeatureSpec,
    arrow_type,
    bookkeeping_features,
    hf_feature,
    validate_feature_key,
)
from lerobot_dataset.layout import (
    CODEBASE_VERSION,
    DATA_PATH,
    DEFAULT_CHUNKS_SIZE,
    DEFAULT_DATA_FILES_SIZE_MB,
    DEFAULT_VIDEO_FILES_SIZE_MB,
    EPISODES_PATH,
    INFO_PATH,
    STAGING_DIR,
    STATS_PATH,
    TASKS_PATH,
    VIDEO_PATH,
    FileRef,
    size_mb,
)
from lerobot_dataset.meta import DatasetMeta, write_tasks
from lerobot_dataset.staging import EpisodeStager, StagedEpisode
from lerobot_dataset.video import (
    LEROBOT_ENCODING,
    PIX_FMT,
    VIDEO_CODECS,
    check_frame_size,
    codec_options,
    concatenate,
    same_stream,
)


class DatasetWriter:
    """Writes LeRobot v3.0 datasets: `create` a new one or `open` an existing one to append episodes.

    Use as a context manager; an episode still open when the block exits by an exception is discarded.
    Not thread-safe: call it from one thread (the per-camera encoders run in their own threads).
    """

    def __init__(self, root: Path, meta: DatasetMeta, video_codec: str, lock: IO[str], max_pending: int) -> None:
        """Use `DatasetWriter.create` or `DatasetWriter.open`."""
        self._root = root
        self._meta = meta
        self._codec = video_codec
        self._lock = lock
        self._max_pending = max_pending
        self._encoder_threads: int | None = None
        self._episode: EpisodeStager | None = None
        self._episode_index = 0
        self._closed = False
        self._stats_cache: list[stats_mod.EpisodeStats] | None = None

    @classmethod
    def create(
        cls,
        root: Path,
        *,
        repo_id: str,
        fps: int,
        features: dict[str, FeatureSpec],
        robot_type: str | None = None,
        video_codec: str = "libsvtav1",
        contract: dict[str, Any] | None = None,
        chunks_size: int = DEFAULT_CHUNKS_SIZE,
        data_files_size_in_mb: float = DEFAULT_DATA_FILES_SIZE_MB,
        video_files_size_in_mb: float = DEFAULT_VIDEO_FILES_SIZE_MB,
        max_pending_frames: int = 64,
    ) -> DatasetWriter:
        """Create a new, empty dataset at `root` (which must not exist).

        `contract`, when given, is stored as meta/contract.json (the robot contract the data was
        recorded with). The size limits decide when a new data/video file starts.
        """
        root = Path(root)
        if root.exists() and not root.is_dir():
            raise DatasetExistsError(f"{root} is a file, not a folder; choose a folder for the dataset")
        if root.exists() and any(root.iterdir()) and not uncommitted_dataset(root):
            raise DatasetExistsError(f"{root} already exists; use DatasetWriter.open(root) to append to it")
        if not isinstance(fps, int) or fps <= 0:
            raise FeatureError(f"fps must be a positive int, got {fps!r}")
        if not features:
            raise FeatureError("features is empty; declare at least one feature")
        codec_options(video_codec)  # raises on an unknown codec
        for key, spec in features.items():
            validate_feature_key(key)
            if not isinstance(spec, FeatureSpec):
                raise FeatureError(f"feature {key!r} must be a FeatureSpec, got {type(spec).__name__}")
            if spec.is_video:
                check_frame_size(video_codec, spec.shape[0], spec.shape[1])
        all_features = {**features, **bookkeeping_features()}
        has_video = any(spec.dtype == "video" for spec in features.values())
        info: dict[str, Any] = {
            "codebase_version": CODEBASE_VERSION,
            "robot_type": robot_type,
            "total_episodes": 0,
            "total_frames": 0,
            "total_tasks": 0,
            "chunks_size": chunks_size,
            "data_files_size_in_mb": data_files_size_in_mb,
            "video_files_size_in_mb": video_files_size_in_mb,
            "fps": fps,
            "splits": {},
            "data_path": DATA_PATH,
            "video_path": VIDEO_PATH if has_video else None,
            "features": {key: spec.to_info() for key, spec in all_features.items()},
        }
        lock = create_skeleton(root, info, contract)
        meta = DatasetMeta(root=root, info=info, features=all_features, tasks=[], episodes=[], stats=None)
        return cls(root, meta, video_codec, lock, max_pending_frames)

    @classmethod
    def open(
        cls,
        root: Path,
        *,
        expect_features: dict[str, FeatureSpec] | None = None,
        expect_fps: int | None = None,
        video_codec: str | None = None,
        max_pending_frames: int = 64,
        default_codec: str | None = None,
    ) -> DatasetWriter:
        """Open an existing dataset to append episodes; finishes an interrupted commit first.

        With `expect_features` (and `expect_fps`), raises SchemaMismatchError naming every
        difference between the dataset's schema and the expected one. Without `video_codec`, the
        encoding is `default_codec` when that encodes the codec the dataset's videos use, else
        LeRobot's encoding of that codec.
        """
        root = Path(root)
        if not (root / INFO_PATH).is_file():
            raise DatasetNotFoundError(
                f"{root} holds no LeRobot dataset ({INFO_PATH} is missing); use DatasetWriter.create for a new one"
            )
        lock = acquire_lock(root)
        try:
            recover(root)
            meta = DatasetMeta.load(root)
            if expect_features is not None:
                problems = schema_differences(meta.user_features, expect_features)
                if problems:
                    raise SchemaMismatchError(
                        f"{root} holds a different schema: {'; '.join(problems)}. "
                        "Write to a new root or use the dataset's features"
                    )
            if expect_fps is not None and expect_fps != meta.fps:
                raise SchemaMismatchError(f"{root} was recorded at {meta.fps} fps, not {expect_fps}")
            existing = {
                spec.info.get("video.codec")
                for spec in meta.features.values()
                if spec.dtype == "video" and spec.info is not None
            }
            existing.discard(None)
            codec = video_codec
            if codec is None:
                stored = str(next(iter(existing))) if existing else None
                if default_codec is not None and (stored is None or VIDEO_CODECS.get(default_codec) == stored):
                    codec = default_codec
                else:
                    codec = LEROBOT_ENCODING.get(stored or "", "libsvtav1")
            codec_options(codec)
            for spec in meta.features.values():
                if spec.is_video:
                    check_frame_size(codec, spec.shape[0], spec.shape[1])
            if existing and VIDEO_CODECS[codec] not in existing:
                raise SchemaMismatchError(
                    f"{root} stores {', '.join(sorted(map(str, existing)))} video; "
                    f"episodes encoded with {codec} cannot join those files"
                )
        except BaseException:
            lock.close()
            raise
        return cls(root, meta, codec, lock, max_pending_frames)

    @property
    def root(self) -> Path:
        return self._root

    @property
    def fps(self) -> int:
        return self._meta.fps

    @property
    def features(self) -> dict[str, FeatureSpec]:
        """The user features (without the five bookkeeping ones)."""
        return self._meta.user_features

    @property
    def num_episodes(self) -> int:
        return self._meta.total_episodes

    @property
    def num_frames(self) -> int:
        return self._meta.total_frames

    @property
    def video_codec(self) -> str:
        return self._codec

    @property
    def encoder_threads(self) -> int | None:
        """Threads per camera encoder of the next episodes (None: the codec's default)."""
        return self._encoder_threads

    @encoder_threads.setter
    def encoder_threads(self, threads: int | None) -> None:
        if threads is not None and (isinstance(threads, bool) or not isinstance(threads, int) or threads < 1):
            raise ValueError(f"encoder_threads must be None or an int >= 1, got {threads!r}")
        self._encoder_threads = threads

    @property
    def episode_frames(self) -> int:
        """Frames added to the episode being recorded (0 when none is)."""
        return self._episode.frames if self._episode is not None else 0

    @property
    def encode_lag_frames(self) -> int:
        """The largest number of frames still waiting in a camera worker's queue."""
        return self._episode.encode_lag_frames if self._episode is not None else 0

    def _check_open(self) -> None:
        if self._closed:
            raise EpisodeStateError("the writer is closed")

    def start_episode(self, task: str) -> int:
        """Begin recording an episode of `task`; returns its episode index."""
        self._check_open()
        if self._episode is not None:
            raise EpisodeStateError(
                f"episode {self._episode_index} is still open; save_episode() or discard_episode() first"
            )
        index = self._meta.total_episodes
        self._episode = EpisodeStager(
            self._root / STAGING_DIR / f"episode-{index:06d}",
            self.features,
            fps=self.fps,
            codec=self._codec,
            task=task,
            max_pending=self._max_pending,
            encoder_threads=self._encoder_threads,
        )
        self._episode_index = index
        return index

    def add_frame(self, frame: dict[str, Any]) -> None:
        """Add one frame: a value for every user feature (index/timestamp/... are added by the writer).

        Raises FeatureError on an unknown or missing key or a value of the wrong shape/dtype (the
        frame is then not added), EncoderError when a camera's encoder has failed.
        """
        self._check_open()
        if self._episode is None:
            raise EpisodeStateError("add_frame() before start_episode()")
        self._episode.add_frame(frame)

    def discard_episode(self) -> None:
        """Drop the episode being recorded; the dataset on disk is unchanged."""
        self._check_open()
        if self._episode is None:
            raise EpisodeStateError("discard_episode() without an open episode")
        self._episode.abort()
        self._episode = None

    def save_episode(self) -> int:
        """Commit the episode being recorded atomically; returns its episode index.

        On an error the episode is discarded and the dataset stays as it was (an OSError becomes a
        DatasetError). If the final renames fail, the writer closes and the next `open` finishes them.
        """
        self._check_open()
        stager = self._episode
        if stager is None:
            raise EpisodeStateError("save_episode() without an open episode")
        self._episode = None
        try:
            staged = stager.finish()
        except EpisodeStateError as err:
            raise EpisodeStateError(f"episode {self._episode_index}: {err}") from None
        except OSError as err:
            raise DatasetError(f"saving episode {self._episode_index} failed: {err}; the dataset is unchanged") from err
        return self.commit_staged(staged)

    def worker_staging_dir(self, name: str) -> Path:
        """A folder inside this dataset's staging area where another process may stage episodes
        (`EpisodeStager`) for `commit_staged`; removed with the rest of the staging area at the next open."""
        return self._root / STAGING_DIR / f"worker-{name}"

    def stager_settings(self) -> dict[str, Any]:
        """Keyword arguments (picklable) for an `EpisodeStager` whose episodes this writer can commit."""
        return {
            "features": self.features,
            "fps": self.fps,
            "codec": self._codec,
            "max_pending": self._max_pending,
            "encoder_threads": self._encoder_threads,
        }

    def commit_staged(self, staged: StagedEpisode) -> int:
        """Commit an episode staged by `EpisodeStager` (in this process or another); returns its index.

        The staged files are removed afterwards, also when the commit fails (the dataset then stays as it was).
        """
        try:
            self._check_open()
            if self._episode is not None:
                raise EpisodeStateError(
                    f"episode {self._episode_index} is open; save or discard it before committing a staged one"
                )
            if staged.codec != self._codec or schema_differences(dict(staged.features), self.features):
                raise EpisodeStateError(
                    f"the staged episode was recorded with codec {staged.codec} and features "
                    f"{', '.join(staged.features)}; this writer uses {self._codec} and {', '.join(self.features)}"
                )
            index = self._meta.total_episodes
            try:
                self._commit(index, staged)
            except OSError as err:
                raise DatasetError(f"saving episode {index} failed: {err}; the dataset is unchanged") from err
            return index
        finally:
            staged.discard()

    def close(self) -> None:
        """Discard an unsaved episode and release the dataset."""
        if self._closed:
            return
        if self._episode is not None:
            self._episode.abort()
            self._episode = None
        self._closed = True
        self._lock.close()

    def __enter__(self) -> DatasetWriter:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()

    def _episode_table(self, episode: StagedEpisode, index: int, start_index: int, task_index: int) -> pa.Table:
        n = episode.frames
        columns: dict[str, pa.Array] = {}
        for key, spec in self._meta.features.items():
            if spec.dtype == "video" or key in BOOKKEEPING_DTYPES:
                continue
            if spec.dtype == "image":
                blobs = episode.cameras[key].png_blobs()
                paths = [f"frame-{i:06d}.png" for i in range(n)]
                columns[key] = pa.StructArray.from_arrays(
                    [pa.array(blobs, pa.binary()), pa.array(paths, pa.string())], names=["bytes", "path"]
                )
            elif spec.dtype == "string":
                columns[key] = pa.array(episode.values[key], pa.string())
            else:
                stacked = np.stack(episode.values[key])
                if spec.shape == (1,):
                    columns[key] = pa.array(stacked.reshape(-1), arrow_type(spec))
                else:
                    columns[key] = pa.FixedSizeListArray.from_arrays(pa.array(stacked.reshape(-1)), spec.shape[0])
        frame_index = np.arange(n, dtype=np.int64)
        columns["timestamp"] = pa.array((frame_index / self.fps).astype(np.float32))
        columns["frame_index"] = pa.array(frame_index)
        columns["episode_index"] = pa.array(np.full(n, index, dtype=np.int64))
        columns["index"] = pa.array(frame_index + start_index)
        columns["task_index"] = pa.array(np.full(n, task_index, dtype=np.int64))
        hf = {key: hf_feature(spec) for key, spec in self._meta.features.items() if spec.dtype != "video"}
        schema = pa.schema(
            [pa.field(key, columns[key].type) for key in columns],
            metadata={"huggingface": json.dumps({"info": {"features": hf}})},
        )
        return pa.Table.from_arrays(list(columns.values()), schema=schema)

    def _episode_stats(self, episode: StagedEpisode, table: pa.Table) -> stats_mod.EpisodeStats:
        result: stats_mod.EpisodeStats = {}
        for key, spec in self._meta.features.items():
            if spec.dtype == "string":
                continue
            if spec.is_camera:
                result[key] = episode.cameras[key].stats(episode.frames)
            elif key in BOOKKEEPING_DTYPES:
                result[key] = stats_mod.vector_stats(table.column(key).to_numpy().reshape(-1, 1))
            else:
                result[key] = stats_mod.vector_stats(np.stack(episode.values[key]))
        return result

    def _last_ref(self, prefix: str) -> FileRef | None:
        if not self._meta.episodes:
            return None
        last = self._meta.episodes[-1]
        return FileRef(int(last[f"{prefix}/chunk_index"]), int(last[f"{prefix}/file_index"]))

    def _rows_in(self, prefix: str, ref: FileRef) -> list[dict[str, Any]]:
        return [
            row
            for row in self._meta.episodes
            if (int(row[f"{prefix}/chunk_index"]), int(row[f"{prefix}/file_index"])) == (ref.chunk, ref.file)
        ]

    def _commit(self, index: int, episode: StagedEpisode) -> None:
        """Stage every changed file, then rename them into place through the journal."""
        meta = self._meta
        info = json.loads(json.dumps(meta.info))
        commit = EpisodeCommit(self._root, index)

        tasks = list(meta.tasks)
        if episode.task not in tasks:
            tasks.append(episode.task)
        start_index = meta.total_frames
        table = self._episode_table(episode, index, start_index, tasks.index(episode.task))
        ep_stats = self._episode_stats(episode, table)

        row: dict[str, Any] = {"episode_index": index, "tasks": [episode.task], "length": episode.frames}
        row.update(self._stage_videos(commit, episode, info))
        row.update(self._stage_data(commit, episode, table, info))
        row["dataset_from_index"] = start_index
        row["dataset_to_index"] = start_index + episode.frames
        for key, feature_stats in ep_stats.items():
            for name in stats_mod.STAT_KEYS:
                row[f"stats/{key}/{name}"] = np.asarray(feature_stats[name]).tolist()
        episodes_table = self._stage_episode_row(commit, row, info)

        if len(tasks) != len(meta.tasks):
            write_tasks(commit.temp_for(TASKS_PATH), tasks)
        if self._stats_cache is None:  # parsed once per writer, not per episode
            self._stats_cache = [meta.episode_stats(r) for r in meta.episodes]
        dataset_stats = stats_mod.to_json(stats_mod.aggregate([*self._stats_cache, ep_stats]))
        commit.temp_for(STATS_PATH).write_text(json.dumps(dataset_stats, indent=4))
        info["total_episodes"] = index + 1
        info["total_frames"] = start_index + episode.frames
        info["total_tasks"] = len(tasks)
        info["splits"] = {"train": f"0:{index + 1}"}
        commit.temp_for(INFO_PATH).write_text(json.dumps(info, indent=4))

        try:
            commit.apply()
        except BaseException as err:
            # Disk and memory may now disagree: stop this writer; the next open() rolls the commit forward.
            self._closed = True
            self._lock.close()
            if isinstance(err, Exception):
                raise DatasetError(
                    f"committing episode {index} failed ({err}); DatasetWriter.open({self._root}) finishes the commit"
                ) from err
            raise
        meta.info = info
        meta.features = {key: FeatureSpec.from_info(key, entry) for key, entry in info["features"].items()}
        meta.tasks = tasks
        meta.episodes.append(episodes_table.slice(episodes_table.num_rows - 1).to_pylist()[0])
        meta.stats = dataset_stats
        self._stats_cache.append(meta.episode_stats(meta.episodes[-1]))

    def _stage_videos(self, commit: EpisodeCommit, episode: StagedEpisode, info: dict[str, Any]) -> dict[str, Any]:
        """Each camera's mp4 with the episode appended (or a new file); returns the episode's video columns.

        An episode joins the current file only while it stays under the size limit and both streams have the
        same parameters (another encoder setting of the same codec starts a new file).
        """
        columns: dict[str, Any] = {}
        for key, camera in episode.cameras.items():
            if camera.mp4 is None:
                continue
            new_mp4 = camera.mp4
            last = self._last_ref(f"videos/{key}")
            ref, from_ts, inputs = FileRef(0, 0), 0.0, [new_mp4]
            if last is not None:
                current = self._root / last.fmt(VIDEO_PATH, video_key=key)
                fits = current.is_file() and size_mb(current) + size_mb(new_mp4) < float(info["video_files_size_in_mb"])
                if fits and same_stream(current, new_mp4):
                    ref, inputs = last, [current, new_mp4]
                    from_ts = float(self._meta.episodes[-1][f"videos/{key}/to_timestamp"])
                else:
                    ref = last.next(self._meta.chunks_size)
            concatenate(inputs, commit.temp_for(ref.fmt(VIDEO_PATH, video_key=key)))
            columns[f"videos/{key}/chunk_index"] = ref.chunk
            columns[f"videos/{key}/file_index"] = ref.file
            columns[f"videos/{key}/from_timestamp"] = from_ts
            columns[f"videos/{key}/to_timestamp"] = from_ts + episode.frames / self.fps
            feature_info = info["features"][key]
            if feature_info.get("info") is None:  # LeRobot fills it when the first file is written
                feature_info["info"] = {
                    "video.height": camera.spec.shape[0],
                    "video.width": camera.spec.shape[1],
                    "video.codec": VIDEO_CODECS[self._codec],
                    "video.pix_fmt": PIX_FMT,
                    "video.is_depth_map": False,
                    "video.fps": self.fps,
                    "video.channels": 3,
                    "has_audio": False,
                }
        return columns

    def _stage_data(
        self, commit: EpisodeCommit, episode: StagedEpisode, table: pa.Table, info: dict[str, Any]
    ) -> dict[str, Any]:
        """The current data file with the episode appended, or the next file (LeRobot's size rule)."""
        meta = self._meta
        ref = self._last_ref("data") or FileRef(0, 0)
        current = self._root / ref.fmt(str(info["data_path"]))
        append_to: Path | None = None
        if meta.episodes and current.is_file():
            frames_in_file = sum(int(r["length"]) for r in self._rows_in("data", ref))
            size = size_mb(current)
            if size + size / max(frames_in_file, 1) * episode.frames < float(info["data_files_size_in_mb"]):
                append_to = current
            else:
                ref = ref.next(meta.chunks_size)
        elif meta.episodes:
            ref = ref.next(meta.chunks_size)
        _write_parquet_appended(append_to, table, commit.temp_for(ref.fmt(str(info["data_path"]))))
        return {"data/chunk_index": ref.chunk, "data/file_index": ref.file}

    def _stage_episode_row(self, commit: EpisodeCommit, row: dict[str, Any], info: dict[str, Any]) -> pa.Table:
        """The episodes file holding the new row (same size rule as data files); returns its table."""
        ref = self._last_ref("meta/episodes") or FileRef(0, 0)
        kept: list[dict[str, Any]] = []
        if self._meta.episodes:
            current = self._root / ref.fmt(EPISODES_PATH)
            rows_in_file = self._rows_in("meta/episodes", ref)
            size = size_mb(current) if current.is_file() else 0.0
            if size + size / max(len(rows_in_file), 1) < float(info["data_files_size_in_mb"]):
                kept = rows_in_file
            else:
                ref = ref.next(self._meta.chunks_size)
        row["meta/episodes/chunk_index"] = ref.chunk
        row["meta/episodes/file_index"] = ref.file
        table = _episodes_table([*kept, _canonical_order(row)])
        pq.write_table(table, commit.temp_for(ref.fmt(EPISODES_PATH)))
        return table


def _canonical_order(row: dict[str, Any]) -> dict[str, Any]:
    """Episode-table columns in LeRobot's order, so rows of both writers share one schema."""
    head = ["episode_index", "tasks", "length", "data/chunk_index", "data/file_index"]
    head += ["dataset_from_index", "dataset_to_index"]
    ordered = {key: row[key] for key in head}
    for prefix in ("videos/", "stats/", "meta/"):
        ordered.update({key: value for key, value in row.items() if key.startswith(prefix)})
    return ordered


def _episodes_table(rows: list[dict[str, Any]]) -> pa.Table:
    try:
        return pa.Table.from_pylist(rows)
    except pa.ArrowException as err:
        raise DatasetFormatError(f"episode rows do not share one schema: {err}") from None


def _parquet_options(schema: pa.Schema) -> dict[str, Any]:
    """Snappy, with dictionaries and statistics only on the non-image columns.

    Image cells are PNG bytes: a dictionary never helps and makes reading the file back (which every
    append does) ten times slower; min/max statistics of PNG bytes are useless.
    """
    plain: list[str] = []
    for field_ in schema:
        if pa.types.is_struct(field_.type):
            continue
        if pa.types.is_list(field_.type) or pa.types.is_fixed_size_list(field_.type):
            plain.append(f"{field_.name}.list.element")
        else:
            plain.append(field_.name)
    return {"compression": "snappy", "use_dictionary": plain, "write_statistics": plain}


# Rows per parquet row group of an episode: the writer's memory grows with a row group's rows (~1.5 kB each;
# a 9000-frame episode in one group took 27 MB at its commit, against 15 MB for any episode in groups of 1024).
ROW_GROUP_ROWS = 1024


def _write_parquet_appended(existing: Path | None, table: pa.Table, out: Path) -> None:
    """Write `existing`'s row groups (if any) followed by `table` (row groups of ROW_GROUP_ROWS rows) to `out`."""
    if existing is None:
        pq.write_table(table, out, row_group_size=ROW_GROUP_ROWS, **_parquet_options(table.schema))
        return
    source = pq.ParquetFile(existing)
    schema = source.schema_arrow
    try:
        new = table.select(schema.names).cast(schema)
    except (pa.ArrowException, KeyError) as err:
        raise SchemaMismatchError(f"the new episode's columns do not fit {existing}: {err}") from None
    with pq.ParquetWriter(out, schema, **_parquet_options(schema)) as writer:
        for i in range(source.num_row_groups):
            writer.write_table(source.read_row_group(i))
        writer.write_table(new, row_group_size=ROW_GROUP_ROWS)


def schema_differences(actual: dict[str, FeatureSpec], expected: dict[str, FeatureSpec]) -> list[str]:
    """Human-readable differences between two user-feature schemas (empty when they match)."""
    problems: list[str] = []
    for key, e in expected.items():
        if key not in actual:
            problems.append(f"feature {key!r} is missing")
        elif not actual[key].same_schema(e):
            a = actual[key]
            problems.append(
                f"feature {key!r} is {a.dtype}{list(a.shape)} names={a.names}, expected "
                f"{e.dtype}{list(e.shape)} names={e.names}"
            )
    problems.extend(f"feature {key!r} is not expected" for key in actual if key not in expected)
    return problems


__all__ = ["DatasetWriter", "EncoderError", "schema_differences"]
