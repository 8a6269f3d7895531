"""Datasets as a collection: merge several LeRobot v3.0 datasets, or copy a selection of episodes.

`merge_datasets(sources, output)` writes one dataset holding every episode of every source, in order;
`select_episodes(source, output, episodes)` (filter) and `split_dataset(source, output_dir, splits)` copy
chosen episodes of one dataset. All three go through `write_episodes`, which:

* renumbers `episode_index`, `index` (global, 0 .. total_frames - 1) and the episode row ranges;
* unifies tasks by text (one task_index per distinct string, numbered in order of first appearance);
* keeps each episode's statistics, recomputes those of the renumbered columns (`episode_index`, `index`,
  `task_index`) and aggregates them into meta/stats.json with the writer's own `stats.aggregate`, so the
  result equals the statistics of the same episodes written in one go;
* re-chunks data and video files with LeRobot's size rules (`chunks_size`, `data_files_size_in_mb`,
  `video_files_size_in_mb` of the first source, or the values given);
* copies every episode's video packets (no decoding) when its source stream has the output's codec, pixel
  format and size; an episode whose stream differs, or whose packets do not start on a keyframe, is decoded
  and re-encoded with the output's encoding (the report says which and why). Streams of one codec whose
  decoder setup (extradata) differs are still copied, into a new file (an mp4 holds one setup).

Refused with one line (`SchemaMismatchError`): different user features (name, dtype, shape, names),
different fps, different robot_type (unless `robot_type=` names the output's), an existing output
(`DatasetExistsError`). The output is built in a hidden sibling folder and renamed into place.
"""

from __future__ import annotations

import json
import math
import os
import shutil
import tempfile
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from fractions import Fraction
from pathlib import Path
from typing import Any

import av
import numpy as np
import numpy.typing as npt
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from lerobot_dataset import stats as stats_mod
from lerobot_dataset.errors import (
    DatasetError,
    DatasetExistsError,
    DatasetFormatError,
    EncoderError,
    SchemaMismatchError,
)
from lerobot_dataset.features import BOOKKEEPING_DTYPES, FeatureSpec, arrow_type, hf_feature
from lerobot_dataset.layout import (
    EPISODES_PATH,
    INFO_PATH,
    STAGING_DIR,
    STATS_PATH,
    TASKS_PATH,
    VIDEO_PATH,
    FileRef,
)
from lerobot_dataset.meta import DatasetMeta, write_tasks
from lerobot_dataset.reader import DatasetReader
from lerobot_dataset.video import (
    LEROBOT_ENCODING,
    PIX_FMT,
    VIDEO_CODECS,
    EpisodeVideoEncoder,
    stream_parameters,
    video_encoding,
)

MB = 1024 * 1024
RENUMBERED = ("episode_index", "index", "task_index")


@dataclass
class MergeReport:
    """What `write_episodes` did: counts, and how each camera's episodes were stored."""

    output: Path
    episodes: int = 0
    frames: int = 0
    tasks: int = 0
    data_files: int = 0
    video_files: dict[str, int] = field(default_factory=dict)
    copied: dict[str, int] = field(default_factory=dict)
    reencoded: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    def summary(self) -> str:
        cams = ", ".join(
            f"{key}: {self.copied.get(key, 0)} copied, {self.video_files[key]} file(s)" for key in self.video_files
        )
        line = (
            f"{self.output}: {self.episodes} episodes, {self.frames} frames, {self.tasks} tasks, "
            f"{self.data_files} data file(s)"
        )
        if cams:
            line += f"; videos {cams}; {len(self.reencoded)} episode video(s) re-encoded"
        return line


@dataclass(frozen=True)
class _Selection:
    meta: DatasetMeta
    episodes: list[int]
    label: str


def _label(meta: DatasetMeta) -> str:
    return str(meta.root)


def check_compatible(metas: Sequence[DatasetMeta], *, same_robot_type: bool = True, action: str = "merge") -> None:
    """Raise SchemaMismatchError (one line) when the datasets cannot be merged into one (or trained on together).

    They must have the same user features (name, dtype, shape, names) and fps, and, with `same_robot_type`,
    the same robot_type.
    """
    from lerobot_dataset.writer import schema_differences

    first = metas[0]
    for other in metas[1:]:
        problems = schema_differences(other.user_features, first.user_features)
        if problems:
            raise SchemaMismatchError(
                f"cannot {action} {_label(other)} with {_label(first)}: features differ ({'; '.join(problems)}); "
                "only datasets with the same features (names, dtypes, shapes) go together"
            )
        if other.fps != first.fps:
            raise SchemaMismatchError(
                f"cannot {action} {_label(other)} ({other.fps} fps) with {_label(first)} ({first.fps} fps): "
                "fps differ; resample one of them first"
            )
        a, b = first.info.get("robot_type"), other.info.get("robot_type")
        if a != b and same_robot_type:
            raise SchemaMismatchError(
                f"cannot merge {_label(other)} (robot_type {b!r}) with {_label(first)} (robot_type {a!r}); "
                "pass --robot-type NAME to merge them anyway under one robot_type"
            )


@dataclass(frozen=True)
class _Target:
    """The encoding every episode of one camera must have in the output."""

    codec: str  # info.json's video.codec, e.g. "av1"
    pix_fmt: str
    height: int
    width: int
    encoding: str | None  # our encoder settings for re-encoding; None when we cannot encode that codec


def _declared(meta: DatasetMeta, key: str) -> tuple[str, str]:
    info = meta.features[key].info or {}
    codec, pix_fmt = info.get("video.codec"), info.get("video.pix_fmt")
    if codec and pix_fmt:
        return str(codec), str(pix_fmt)
    if meta.episodes:  # a dataset without video info: ask the first file
        probed = stream_parameters(meta.video_path(meta.episodes[0], key))
        return VIDEO_CODECS.get(probed[0], probed[0]), probed[3]
    return "", ""


def _targets(first: DatasetMeta, video_codec: str | None) -> dict[str, _Target]:
    targets: dict[str, _Target] = {}
    for key in first.video_keys:
        spec = first.features[key]
        if video_codec is not None:
            encoding = video_encoding(video_codec)
            targets[key] = _Target(encoding.codec, PIX_FMT, spec.shape[0], spec.shape[1], video_codec)
        else:
            codec, pix_fmt = _declared(first, key)
            encoding_name = LEROBOT_ENCODING.get(codec) if pix_fmt == PIX_FMT else None
            targets[key] = _Target(codec, pix_fmt, spec.shape[0], spec.shape[1], encoding_name)
    return targets


class _SegmentReader:
    """Packets of one source mp4, read forward episode by episode (demux only, no decoding)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        try:
            self.container: Any = av.open(str(path))
            self.stream: Any = self.container.streams.video[0]
        except (av.FFmpegError, IndexError) as err:
            raise DatasetFormatError(f"cannot read video {path}: {err}") from None
        self.time_base: Fraction = self.stream.time_base or Fraction(1, 1)
        codec = self.stream.codec_context
        self.params = (codec.codec.canonical_name, codec.width, codec.height, codec.pix_fmt or "")
        self.parameters = stream_parameters(path)
        self._packets: Iterator[Any] = self.container.demux(self.stream)
        self._peeked: Any = None
        self.position_s = -math.inf

    def _next(self) -> Any:
        if self._peeked is not None:
            packet, self._peeked = self._peeked, None
            return packet
        for packet in self._packets:
            if packet.dts is not None and packet.pts is not None:
                return packet
        return None

    def segment(self, from_s: float, to_s: float, fps: int) -> list[Any]:
        """The packets presented in [from_s, to_s) (half a frame of slack), in decode order."""
        half = 0.5 / fps
        segment = []
        while True:
            packet = self._next()
            if packet is None:
                break
            t = float(packet.pts * self.time_base)
            if t >= to_s - half:
                self._peeked = packet
                break
            if t >= from_s - half:
                segment.append(packet)
        self.position_s = to_s
        return segment

    def close(self) -> None:
        self.container.close()


class _VideoOut:
    """One camera's output mp4 files: packets appended by stream copy, LeRobot's file-size rule."""

    def __init__(self, root: Path, key: str, fps: int, chunks_size: int, limit_mb: float) -> None:
        self.root, self.key, self.fps = root, key, fps
        self.chunks_size, self.limit_bytes = chunks_size, limit_mb * MB
        self.ref: FileRef | None = None
        self.container: Any = None
        self.stream: Any = None
        self.parameters: tuple[str, int, int, str, bytes] | None = None
        self.bytes = 0
        self.frames = 0
        self.end_s = 0.0
        self.files = 0

    def close(self) -> None:
        if self.container is not None:
            self.container.close()
            self.container = None

    def add(self, source: _SegmentReader, packets: list[Any], length: int) -> tuple[FileRef, float, float]:
        """Append an episode's packets; returns (file, from_timestamp, to_timestamp)."""
        size = sum(p.size for p in packets)
        if self.container is not None and (
            self.bytes + size >= self.limit_bytes or source.parameters != self.parameters
        ):
            self.close()
        if self.container is None:
            self.ref = FileRef(0, 0) if self.ref is None else self.ref.next(self.chunks_size)
            path = self.root / self.ref.fmt(VIDEO_PATH, video_key=self.key)
            path.parent.mkdir(parents=True, exist_ok=True)
            self.container = av.open(str(path), mode="w", format="mp4", options={"movflags": "faststart"})
            self.stream = self.container.add_stream_from_template(source.stream, opaque=True)
            self.stream.time_base = source.time_base
            self.parameters = source.parameters
            self.bytes = self.frames = 0
            self.end_s = 0.0
            self.files += 1
        assert self.ref is not None
        offset = Fraction(self.frames, self.fps)
        first_pts = min(p.pts for p in packets)
        shift = round(offset / source.time_base) - first_pts
        for packet in packets:
            packet.pts += shift
            packet.dts += shift
            packet.stream = self.stream
            self.container.mux(packet)
        self.bytes += size
        self.frames += length
        # The float arithmetic of the writer (from = previous to, to = from + length / fps), so that merged
        # episode rows equal those of the same episodes written in one go.
        from_s = self.end_s
        self.end_s = from_s + length / self.fps
        return self.ref, from_s, self.end_s


class _DataOut:
    """Output data parquet files: one row group per episode, LeRobot's file-size rule."""

    def __init__(self, root: Path, template: str, schema: pa.Schema, chunks_size: int, limit_mb: float) -> None:
        self.root, self.template, self.schema = root, template, schema
        self.chunks_size, self.limit_bytes = chunks_size, limit_mb * MB
        self.ref: FileRef | None = None
        self.writer: pq.ParquetWriter | None = None
        self.path: Path | None = None
        self.frames = 0
        self.files = 0

    def add(self, table: pa.Table) -> FileRef:
        if self.writer is not None and self.path is not None and self.frames:
            size = self.path.stat().st_size
            if size + size / self.frames * table.num_rows >= self.limit_bytes:
                self.close()
        if self.writer is None:
            self.ref = FileRef(0, 0) if self.ref is None else self.ref.next(self.chunks_size)
            self.path = self.root / self.ref.fmt(self.template)
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self.writer = pq.ParquetWriter(self.path, self.schema, compression="snappy")
            self.frames = 0
            self.files += 1
        self.writer.write_table(table)
        self.frames += table.num_rows
        assert self.ref is not None
        return self.ref

    def close(self) -> None:
        if self.writer is not None:
            self.writer.close()
            self.writer = None


def _data_schema(features: Mapping[str, FeatureSpec]) -> pa.Schema:
    fields = [pa.field(key, arrow_type(spec)) for key, spec in features.items() if spec.dtype != "video"]
    hf = {key: hf_feature(spec) for key, spec in features.items() if spec.dtype != "video"}
    return pa.schema(fields, metadata={"huggingface": json.dumps({"info": {"features": hf}})})


class _SourceData:
    """The data rows of one source dataset, one data file in memory at a time."""

    def __init__(self, meta: DatasetMeta) -> None:
        self.meta = meta
        self._path: Path | None = None
        self._table: pa.Table | None = None

    def episode(self, index: int) -> pa.Table:
        row = self.meta.episodes[index]
        path = self.meta.data_path(row)
        if path != self._path:
            try:
                self._table = pq.read_table(path)
            except (OSError, pa.ArrowException) as err:
                raise DatasetFormatError(f"{path} is unreadable: {err}") from None
            self._path = path
        assert self._table is not None
        rows = self._table.filter(pc.equal(self._table.column("episode_index"), index))
        if rows.num_rows != int(row["length"]):
            raise DatasetFormatError(
                f"{path} holds {rows.num_rows} rows of episode {index}, its episodes table says {row['length']}; "
                f"run `lerobot-ros dataset validate {self.meta.root}`"
            )
        return rows


def _cast(table: pa.Table, schema: pa.Schema, where: str) -> pa.Table:
    try:
        columns = [table.column(f.name).cast(f.type) for f in schema]
    except (KeyError, pa.ArrowException) as err:
        raise DatasetFormatError(f"{where}: the data rows do not fit the merged schema: {err}") from None
    return pa.Table.from_arrays(columns, schema=schema)


def _episode_row_order(row: dict[str, Any]) -> dict[str, Any]:
    head = ["episode_index", "tasks", "length", "data/chunk_index", "data/file_index"]
    head += ["dataset_from_index", "dataset_to_index"]
    ordered = {key: row[key] for key in head}
    for prefix in ("videos/", "stats/", "meta/"):
        ordered.update({key: value for key, value in row.items() if key.startswith(prefix)})
    return ordered


def _write_episode_tables(root: Path, rows: list[dict[str, Any]], chunks_size: int, limit_mb: float) -> None:
    """meta/episodes files; a new file when the current one would pass the data-file size limit."""
    probe = pa.Table.from_pylist([_episode_row_order(r) for r in rows[:64]])
    sink = pa.BufferOutputStream()
    pq.write_table(probe, sink)
    bytes_per_row = sink.getvalue().size / max(probe.num_rows, 1)
    per_file = max(1, int(limit_mb * MB / bytes_per_row))
    ref = FileRef(0, 0)
    for start in range(0, len(rows), per_file):
        for row in rows[start : start + per_file]:
            row["meta/episodes/chunk_index"] = ref.chunk
            row["meta/episodes/file_index"] = ref.file
        try:
            table = pa.Table.from_pylist([_episode_row_order(r) for r in rows[start : start + per_file]])
        except pa.ArrowException as err:
            raise DatasetFormatError(f"the episode rows of the sources do not share one schema: {err}") from None
        path = root / ref.fmt(EPISODES_PATH)
        path.parent.mkdir(parents=True, exist_ok=True)
        pq.write_table(table, path)
        ref = ref.next(chunks_size)


def _reencode(
    reader: DatasetReader, episode: int, key: str, target: _Target, fps: int, workdir: Path
) -> _SegmentReader:
    """Decode one episode's frames and encode them with the target encoding into a temporary mp4."""
    if target.encoding is None:
        raise EncoderError(
            f"{reader.root} episode {episode} {key!r} must be re-encoded into {target.codec}/{target.pix_fmt}, "
            "which this tool cannot encode; pass --video-codec to choose the output encoding"
        )
    frames = reader.episode_frames(episode, key)
    path = workdir / f"reencode-{key}-{os.getpid()}.mp4"
    encoder = EpisodeVideoEncoder(path, codec=target.encoding, fps=fps, height=target.height, width=target.width)
    try:
        for frame in frames:
            encoder.encode(frame)
        encoder.finish()
    except BaseException:
        encoder.abort()
        raise
    return _SegmentReader(path)


def write_episodes(
    selections: Sequence[tuple[Path, Sequence[int] | None]],
    output: Path,
    *,
    robot_type: str | None = None,
    video_codec: str | None = None,
    reencode: bool = False,
    chunks_size: int | None = None,
    data_files_size_in_mb: float | None = None,
    video_files_size_in_mb: float | None = None,
) -> MergeReport:
    """Write the chosen episodes of each source (None: all of them), in order, as a new dataset at `output`.

    `robot_type` sets the output's robot_type (and allows sources that disagree on it). `video_codec` names
    the output encoding (an entry of VIDEO_ENCODINGS; default: the first source's codec); `reencode=True`
    re-encodes every episode even when its stream could be copied. The size limits default to the first
    source's info.json.
    """
    output = Path(output)
    if output.exists():
        raise DatasetExistsError(f"{output} already exists; choose a new --output folder (merge never overwrites)")
    if not selections:
        raise DatasetError("nothing to write: give at least one source dataset")
    parts: list[_Selection] = []
    for root, chosen in selections:
        if (Path(root) / STAGING_DIR / "commit-journal.json").is_file():
            raise DatasetError(
                f"{root} has an interrupted commit; finish it first with `lerobot-ros dataset validate --repair {root}`"
            )
        meta = DatasetMeta.load(Path(root))
        episodes = list(range(meta.total_episodes)) if chosen is None else [int(e) for e in chosen]
        bad = [e for e in episodes if not 0 <= e < meta.total_episodes]
        if bad:
            raise DatasetError(f"{root} has episodes 0..{meta.total_episodes - 1}; episode(s) {bad} do not exist")
        if len(set(episodes)) != len(episodes):
            raise DatasetError(f"{root}: an episode is selected twice ({episodes})")
        parts.append(_Selection(meta, episodes, str(root)))
    metas = [p.meta for p in parts]
    check_compatible(metas, same_robot_type=robot_type is None)
    if video_codec is not None:
        video_encoding(video_codec)  # raises on an unknown name
    first = metas[0]
    if not any(p.episodes for p in parts):
        raise DatasetError("the selection holds no episode; a dataset needs at least one")
    chunks = int(chunks_size or first.chunks_size)
    data_mb = float(data_files_size_in_mb or first.info.get("data_files_size_in_mb", 100))
    video_mb = float(video_files_size_in_mb or first.info.get("video_files_size_in_mb", 200))

    output.parent.mkdir(parents=True, exist_ok=True)
    building = Path(tempfile.mkdtemp(prefix=f".{output.name}.merging-", dir=output.parent))
    try:
        report = _write(parts, building, output, robot_type, video_codec, reencode, chunks, data_mb, video_mb)
        if output.exists():
            raise DatasetExistsError(f"{output} appeared while merging; the merged dataset is left in {building}")
        os.rename(building, output)
    except BaseException:
        if building.exists():
            shutil.rmtree(building, ignore_errors=True)
        raise
    return report


def _write(
    parts: Sequence[_Selection],
    root: Path,
    output: Path,
    robot_type: str | None,
    video_codec: str | None,
    reencode: bool,
    chunks: int,
    data_mb: float,
    video_mb: float,
) -> MergeReport:
    first = parts[0].meta
    fps = first.fps
    features = dict(first.features)
    targets = _targets(first, video_codec)
    report = MergeReport(output=output)
    data_template = str(first.info.get("data_path") or "data/chunk-{chunk_index:03d}/file-{file_index:03d}.parquet")
    schema = _data_schema(features)
    data_out = _DataOut(root, data_template, schema, chunks, data_mb)
    videos = {key: _VideoOut(root, key, fps, chunks, video_mb) for key in targets}
    workdir = root / ".work"
    workdir.mkdir()
    tasks: list[str] = []
    rows: list[dict[str, Any]] = []
    per_episode_stats: list[stats_mod.EpisodeStats] = []
    index = 0
    try:
        for part in parts:
            meta = part.meta
            source = _SourceData(meta)
            readers: dict[str, _SegmentReader] = {}
            frame_reader: DatasetReader | None = None
            copy_ok = {key: _copyable(meta, key, target) for key, target in targets.items()}
            for src_episode in part.episodes:
                src_row = meta.episodes[src_episode]
                length = int(src_row["length"])
                new_episode = len(rows)
                table = source.episode(src_episode)
                src_tasks = table.column("task_index").to_numpy()
                mapping = np.empty(len(meta.tasks), dtype=np.int64)
                for old in np.unique(src_tasks):
                    text = meta.tasks[int(old)]
                    if text not in tasks:
                        tasks.append(text)
                    mapping[int(old)] = tasks.index(text)
                new_columns: dict[str, npt.NDArray[np.int64]] = {
                    "episode_index": np.full(length, new_episode, dtype=np.int64),
                    "index": np.arange(index, index + length, dtype=np.int64),
                    "task_index": mapping[src_tasks.astype(np.int64)],
                }
                for name, values in new_columns.items():
                    table = table.set_column(table.schema.get_field_index(name), name, pa.array(values))
                table = _cast(table, schema, f"{part.label} episode {src_episode}")
                ref = data_out.add(table)
                row: dict[str, Any] = {
                    "episode_index": new_episode,
                    "tasks": list(src_row.get("tasks") or sorted({meta.tasks[int(t)] for t in np.unique(src_tasks)})),
                    "length": length,
                    "data/chunk_index": ref.chunk,
                    "data/file_index": ref.file,
                    "dataset_from_index": index,
                    "dataset_to_index": index + length,
                }
                for key, target in targets.items():
                    path = meta.video_path(src_row, key)
                    reason = None if not reencode else "re-encoding was requested"
                    reason = reason or copy_ok[key]
                    packets: list[Any] = []
                    segment_source: _SegmentReader | None = None
                    if reason is None:
                        reader = readers.get(key)
                        from_s = float(src_row[f"videos/{key}/from_timestamp"])
                        to_s = float(src_row[f"videos/{key}/to_timestamp"])
                        if reader is None or reader.path != path or from_s < reader.position_s - 0.5 / fps:
                            if reader is not None:
                                reader.close()
                            reader = readers[key] = _SegmentReader(path)
                        packets = reader.segment(from_s, to_s, fps)
                        segment_source = reader
                        if not packets:
                            reason = f"no packets between {from_s:.4f} s and {to_s:.4f} s of {path.name}"
                        elif not packets[0].is_keyframe:
                            reason = "the episode's packets do not start on a keyframe"
                        elif len(packets) != length:
                            reason = f"{len(packets)} packets for {length} frames"
                    if reason is not None:
                        if frame_reader is None:
                            frame_reader = DatasetReader(meta.root)
                        segment_source = _reencode(frame_reader, src_episode, key, target, fps, workdir)
                        packets = segment_source.segment(0.0, length / fps, fps)
                        report.reencoded.append(f"{part.label} episode {src_episode} {key}: {reason}")
                    else:
                        report.copied[key] = report.copied.get(key, 0) + 1
                    assert segment_source is not None
                    vref, from_ts, to_ts = videos[key].add(segment_source, packets, length)
                    if reason is not None:
                        segment_source.close()
                    row[f"videos/{key}/chunk_index"] = vref.chunk
                    row[f"videos/{key}/file_index"] = vref.file
                    row[f"videos/{key}/from_timestamp"] = from_ts
                    row[f"videos/{key}/to_timestamp"] = to_ts
                ep_stats = _episode_stats(meta, src_row, table, features)
                for key, feature_stats in ep_stats.items():
                    for name, value in feature_stats.items():
                        row[f"stats/{key}/{name}"] = np.asarray(value).tolist()
                per_episode_stats.append(ep_stats)
                rows.append(row)
                index += length
            for reader in readers.values():
                reader.close()
            if frame_reader is not None:
                frame_reader.close()
    finally:
        data_out.close()
        for video in videos.values():
            video.close()
    shutil.rmtree(workdir)

    (root / "meta").mkdir(exist_ok=True)
    _write_episode_tables(root, rows, chunks, data_mb)
    write_tasks(root / TASKS_PATH, tasks)
    dataset_stats = stats_mod.to_json(stats_mod.aggregate(per_episode_stats))
    (root / STATS_PATH).write_text(json.dumps(dataset_stats, indent=4))
    info = json.loads(json.dumps(first.info))
    info["robot_type"] = robot_type if robot_type is not None else first.info.get("robot_type")
    info["total_episodes"] = len(rows)
    info["total_frames"] = index
    info["total_tasks"] = len(tasks)
    info["chunks_size"] = chunks
    info["data_files_size_in_mb"] = _number(data_mb)
    info["video_files_size_in_mb"] = _number(video_mb)
    info["splits"] = {"train": f"0:{len(rows)}"}
    for key, target in targets.items():
        entry = info["features"][key]
        entry_info = dict(entry.get("info") or {})
        entry_info.update({"video.codec": target.codec, "video.pix_fmt": target.pix_fmt})
        entry_info.setdefault("video.height", target.height)
        entry_info.setdefault("video.width", target.width)
        entry_info.setdefault("video.fps", fps)
        entry["info"] = entry_info
    (root / INFO_PATH).write_text(json.dumps(info, indent=4))
    contracts = {_contract(p.meta) for p in parts}
    if len(contracts) == 1 and None not in contracts:
        shutil.copyfile(parts[0].meta.root / "meta" / "contract.json", root / "meta" / "contract.json")
    elif len(contracts) > 1:
        report.notes.append("the sources carry different robot contracts (meta/contract.json); none was copied")
    report.episodes, report.frames, report.tasks = len(rows), index, len(tasks)
    report.data_files = data_out.files
    report.video_files = {key: video.files for key, video in videos.items()}
    return report


def _number(value: float) -> float | int:
    return int(value) if float(value).is_integer() else value


def _contract(meta: DatasetMeta) -> str | None:
    path = meta.root / "meta" / "contract.json"
    return path.read_text() if path.is_file() else None


def _copyable(meta: DatasetMeta, key: str, target: _Target) -> str | None:
    """None when `meta`'s videos of `key` can be stream-copied into the output, else why not."""
    codec, pix_fmt = _declared(meta, key)
    if (codec, pix_fmt) != (target.codec, target.pix_fmt):
        return f"{codec}/{pix_fmt} differs from the output's {target.codec}/{target.pix_fmt}"
    return None


def _episode_stats(
    meta: DatasetMeta, row: Mapping[str, Any], table: pa.Table, features: Mapping[str, FeatureSpec]
) -> stats_mod.EpisodeStats:
    """The source episode's statistics, with the renumbered columns' recomputed (as the writer computes them)."""
    stored = meta.episode_stats(row)
    out: stats_mod.EpisodeStats = {}
    for key, spec in features.items():
        if spec.dtype == "string":
            continue
        if key in RENUMBERED or (key not in stored and key in BOOKKEEPING_DTYPES):
            out[key] = stats_mod.vector_stats(table.column(key).to_numpy().reshape(-1, 1))
        elif key in stored:
            out[key] = stored[key]
        elif not spec.is_camera:
            column = table.column(key).combine_chunks()
            if pa.types.is_fixed_size_list(column.type) or pa.types.is_list(column.type):
                values = column.flatten().to_numpy(zero_copy_only=False).reshape(len(column), -1)
            else:
                values = column.to_numpy(zero_copy_only=False).reshape(-1, 1)
            out[key] = stats_mod.vector_stats(values)
    return out


def merge_datasets(
    sources: Sequence[Path],
    output: Path,
    *,
    robot_type: str | None = None,
    video_codec: str | None = None,
    reencode: bool = False,
    chunks_size: int | None = None,
    data_files_size_in_mb: float | None = None,
    video_files_size_in_mb: float | None = None,
) -> MergeReport:
    """Merge every episode of `sources` (in order) into a new dataset at `output` (see the module docstring)."""
    if len(sources) < 1:
        raise DatasetError("merge needs at least one source dataset")
    return write_episodes(
        [(Path(s), None) for s in sources],
        output,
        robot_type=robot_type,
        video_codec=video_codec,
        reencode=reencode,
        chunks_size=chunks_size,
        data_files_size_in_mb=data_files_size_in_mb,
        video_files_size_in_mb=video_files_size_in_mb,
    )


def select_episodes(
    source: Path, output: Path, *, episodes: Sequence[int] | None = None, exclude: Sequence[int] | None = None
) -> MergeReport:
    """A new dataset with only `episodes` of `source` (or all but `exclude`), renumbered from 0, in order."""
    meta = DatasetMeta.load(Path(source))
    if (episodes is None) == (exclude is None):
        raise DatasetError("give either the episodes to keep or the episodes to exclude")
    if exclude is not None:
        bad = sorted(set(exclude) - set(range(meta.total_episodes)))
        if bad:
            raise DatasetError(f"{source} has episodes 0..{meta.total_episodes - 1}; episode(s) {bad} do not exist")
        episodes = [e for e in range(meta.total_episodes) if e not in set(exclude)]
    assert episodes is not None
    return write_episodes([(Path(source), sorted(int(e) for e in episodes))], output)


def fraction_splits(
    total_episodes: int, fractions: Mapping[str, float], seed: int | None = None
) -> dict[str, list[int]]:
    """Episode indices per split, as LeRobot's `split_dataset`: int(total x fraction) episodes each, in order,
    the last split taking the rest; a split that gets none is left out. With `seed`, the episodes are
    shuffled first (each split's list is sorted)."""
    if sum(fractions.values()) > 1.0 + 1e-9:
        raise DatasetError(f"split fractions sum to {sum(fractions.values()):g}; they must sum to <= 1")
    if any(f <= 0 for f in fractions.values()):
        raise DatasetError("split fractions must be positive")
    order = list(range(total_episodes))
    if seed is not None:
        order = [int(i) for i in np.random.default_rng(seed).permutation(total_episodes)]
    result: dict[str, list[int]] = {}
    start = 0
    names = list(fractions)
    for name in names:
        count = int(total_episodes * fractions[name])
        if count == 0:
            continue
        end = total_episodes if name == names[-1] else start + count
        result[name] = sorted(order[start:end])
        start = end
    return result


def split_dataset(source: Path, output_dir: Path, splits: Mapping[str, Sequence[int]]) -> dict[str, MergeReport]:
    """One new dataset per split, `output_dir/<name>`, holding that split's episodes of `source`."""
    meta = DatasetMeta.load(Path(source))
    seen: set[int] = set()
    for name, episodes in splits.items():
        if not episodes:
            raise DatasetError(f"split {name!r} has no episodes")
        if seen & set(episodes):
            raise DatasetError(f"episode(s) {sorted(seen & set(episodes))} appear in more than one split")
        seen |= set(episodes)
        bad = sorted(set(episodes) - set(range(meta.total_episodes)))
        if bad:
            raise DatasetError(f"{source} has episodes 0..{meta.total_episodes - 1}; episode(s) {bad} do not exist")
    existing = [name for name in splits if (Path(output_dir) / name).exists()]
    if existing:
        raise DatasetExistsError(f"{Path(output_dir) / existing[0]} already exists; choose a new --output-dir")
    return {
        name: write_episodes([(Path(source), sorted(episodes))], Path(output_dir) / name)
        for name, episodes in splits.items()
    }


__all__ = [
    "MergeReport",
    "check_compatible",
    "fraction_splits",
    "merge_datasets",
    "select_episodes",
    "split_dataset",
    "write_episodes",
]
