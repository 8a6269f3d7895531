"""Video and image features: round trips, file rollover, resume, codecs, camera statistics."""

from __future__ import annotations

import json
from pathlib import Path

import av
import numpy as np
import pytest
from dataset_synthetic import camera_features, camera_frame, create, make_frame, write_episodes

from lerobot_dataset import DatasetReader, DatasetWriter, EpisodeStateError
from lerobot_dataset.staging import EpisodeStager
from lerobot_dataset.validate import validate
from lerobot_dataset.video import (
    VIDEO_CODECS,
    VIDEO_ENCODINGS,
    EpisodeVideoEncoder,
    probe,
    rgb_to_yuv420p,
)

FRONT = "observation.images.front"
WRIST = "observation.images.wrist"


def mean_error(a: object, b: object) -> float:
    return float(np.abs(np.asarray(a).astype(int) - np.asarray(b).astype(int)).mean())


def assert_is_frame(decoded: np.ndarray, frames: list[dict[str, object]], step: int) -> None:
    """Within codec tolerance of the frame written at `step`, and closer to it than to its neighbours."""
    error = mean_error(decoded, frames[step][FRONT])
    assert error < 10.0, f"step {step}: mean abs error {error:.2f} after the codec"
    for other in (step - 1, step + 1):
        if 0 <= other < len(frames):
            assert error < mean_error(decoded, frames[other][FRONT]), f"step {step} decodes closer to step {other}"


def assert_frames_match(reader: DatasetReader, written: list[list[dict[str, object]]], start_episode: int = 0) -> None:
    index = reader.episode_range(start_episode)[0]
    for offset, frames in enumerate(written):
        assert reader.episode_range(start_episode + offset) == (index, index + len(frames))
        for step, frame in enumerate(frames):
            item = reader[index]
            assert item["frame_index"] == step
            np.testing.assert_array_equal(item["action"], frame["action"])
            if WRIST in frame:
                np.testing.assert_array_equal(item[WRIST], frame[WRIST])  # PNG: lossless
            if FRONT in frame:
                assert_is_frame(item[FRONT], frames, step)
            index += 1


@pytest.mark.parametrize("codec", list(VIDEO_ENCODINGS))
def test_video_and_image_round_trip(tmp_path: Path, codec: str) -> None:
    root = tmp_path / "ds"
    with create(root, video_codec=codec) as writer:
        written = write_episodes(writer, [12, 7, 9], ["pick the cube", "place the cube"])
    assert validate(root) == []
    info = json.loads((root / "meta/info.json").read_text())
    declared = info["features"][FRONT]["info"]["video.codec"]
    assert declared == VIDEO_CODECS[codec] == probe(next((root / "videos" / FRONT).glob("*/*.mp4"))).codec
    assert info["features"][FRONT]["info"]["video.pix_fmt"] == "yuv420p"
    with DatasetReader(root) as reader:
        assert reader.tasks == ["pick the cube", "place the cube"]
        assert [reader[i]["task"] for i in (0, 12, 19)] == ["pick the cube", "place the cube", "pick the cube"]
        assert_frames_match(reader, written)
        spans = [(e[f"videos/{FRONT}/from_timestamp"], e[f"videos/{FRONT}/to_timestamp"]) for e in reader.episodes]
    np.testing.assert_allclose(spans, [(0.0, 12 / 30), (12 / 30, 19 / 30), (19 / 30, 28 / 30)])
    assert len(list((root / "videos" / FRONT).glob("*/*.mp4"))) == 1
    assert not list(root.glob("images"))


def test_camera_stats_are_per_channel_in_unit_range(tmp_path: Path) -> None:
    root = tmp_path / "ds"
    with create(root) as writer:
        written = write_episodes(writer, [10, 150], ["t"])
    stats = json.loads((root / "meta/stats.json").read_text())
    for key in (FRONT, WRIST):
        for name in ("min", "max", "mean", "std", "q01", "q50", "q99"):
            value = np.asarray(stats[key][name])
            assert value.shape == (3, 1, 1)
            assert (value >= 0).all() and (value <= 1).all()
    # LeRobot samples max(100, n**0.75) frames of a >= 100-frame episode, all of a shorter one.
    assert stats[FRONT]["count"] == [10 + 100]
    frames = np.stack([f[FRONT] for ep in written for f in ep[:10]] + [written[1][0][FRONT]])
    assert np.asarray(stats[FRONT]["max"]).max() == pytest.approx(frames.max() / 255)


def test_rollover_into_new_files_and_chunks(tmp_path: Path) -> None:
    root = tmp_path / "ds"
    with create(root, data_files_size_in_mb=0.001, video_files_size_in_mb=0.001, chunks_size=2) as writer:
        written = write_episodes(writer, [5, 6, 4, 5], ["a", "b"])
    assert validate(root) == []
    data = sorted(str(p.relative_to(root)) for p in (root / "data").glob("*/*.parquet"))
    assert data == [
        "data/chunk-000/file-000.parquet",
        "data/chunk-000/file-001.parquet",
        "data/chunk-001/file-000.parquet",
        "data/chunk-001/file-001.parquet",
    ]
    videos = sorted((root / "videos" / FRONT).glob("*/*.mp4"))
    assert len(videos) == 4
    with DatasetReader(root) as reader:
        assert [e[f"videos/{FRONT}/from_timestamp"] for e in reader.episodes] == [0.0, 0.0, 0.0, 0.0]
        assert [(e["data/chunk_index"], e["data/file_index"]) for e in reader.episodes] == [
            (0, 0),
            (0, 1),
            (1, 0),
            (1, 1),
        ]
        assert_frames_match(reader, written)


def test_resume_appends_to_existing_files(tmp_path: Path) -> None:
    root = tmp_path / "ds"
    with create(root) as writer:
        first = write_episodes(writer, [6, 5], ["a"])
    with DatasetWriter.open(root, expect_features=camera_features()) as writer:
        assert writer.num_episodes == 2
        assert writer.video_codec == "libsvtav1"
        second = write_episodes(writer, [7], ["b"], first_episode=2)
    assert validate(root) == []
    with DatasetReader(root) as reader:
        assert reader.num_episodes == 3
        assert len(reader) == 18
        assert reader.tasks == ["a", "b"]
        assert reader.episodes[2][f"videos/{FRONT}/from_timestamp"] == pytest.approx(11 / 30)
        assert_frames_match(reader, first + second)
    assert len(list((root / "data").glob("*/*.parquet"))) == 1


def test_another_setting_of_the_codec_starts_a_new_video_file(tmp_path: Path) -> None:
    """h264 and h264-ultrafast streams differ in SPS/PPS: one mp4 cannot hold both, so the episode rolls over."""
    root = tmp_path / "ds"
    with create(root, video_codec="h264") as writer:
        written = write_episodes(writer, [6, 5], ["a"])
    with DatasetWriter.open(root, video_codec="h264-ultrafast") as writer:
        written += write_episodes(writer, [7], ["b"], first_episode=2)
    with DatasetWriter.open(root, video_codec="h264-ultrafast") as writer:
        written += write_episodes(writer, [4], ["b"], first_episode=3)
    assert validate(root) == []
    with DatasetReader(root) as reader:
        files = [(e[f"videos/{FRONT}/file_index"], e[f"videos/{FRONT}/from_timestamp"]) for e in reader.episodes]
        assert files == [(0, 0.0), (0, pytest.approx(6 / 30)), (1, 0.0), (1, pytest.approx(7 / 30))]
        assert_frames_match(reader, written)


def test_open_picks_the_default_codec_only_when_it_fits_the_dataset(tmp_path: Path) -> None:
    for stored, expected in (("h264", "h264-ultrafast"), ("libsvtav1", "libsvtav1")):
        root = tmp_path / stored
        with create(root, video_codec=stored) as writer:
            write_episodes(writer, [3], ["a"])
        with DatasetWriter.open(root, default_codec="h264-ultrafast") as writer:
            assert writer.video_codec == expected
        with DatasetWriter.open(root) as writer:
            assert writer.video_codec == stored  # LeRobot's encoding of the stored codec


def test_commit_staged_takes_episodes_recorded_apart_and_refuses_other_settings(tmp_path: Path) -> None:
    root = tmp_path / "ds"
    with create(root, video_codec="h264") as writer:
        write_episodes(writer, [4], ["a"])
        settings = writer.stager_settings()
        stager = EpisodeStager(writer.worker_staging_dir("x") / "ep", task="b", **settings)
        frames = [make_frame(writer.features, 1, step, 5) for step in range(5)]
        for frame in frames:
            stager.add_frame(frame)
        assert writer.commit_staged(stager.finish()) == 1
        assert not (writer.worker_staging_dir("x") / "ep").exists()
        other = EpisodeStager(tmp_path / "other", **{**settings, "codec": "libsvtav1"}, task="c")
        other.add_frame(frames[0])
        with pytest.raises(EpisodeStateError, match="codec libsvtav1"):
            writer.commit_staged(other.finish())
        assert not (tmp_path / "other").exists()  # a refused staged episode is removed too
    assert validate(root) == []
    with DatasetReader(root) as reader:
        assert reader.num_episodes == 2 and reader.tasks == ["a", "b"]
        assert_frames_match(reader, [frames], start_episode=1)


@pytest.mark.parametrize(("height", "width"), [(6, 10), (48, 64), (480, 640)])
def test_rgb_to_yuv420p_agrees_with_swscale(height: int, width: int) -> None:
    """The encoders' OpenCV conversion gives swscale's BT.601 limited-range planes (chroma: 2x2 means)."""
    frame = np.ascontiguousarray(camera_frame(3, 4, max(height, 16), max(width, 16))[:height, :width])
    ours = rgb_to_yuv420p(frame).astype(int)
    theirs = av.VideoFrame.from_ndarray(frame, format="rgb24").reformat(format="yuv420p").to_ndarray().astype(int)
    assert ours.shape == theirs.shape == (height * 3 // 2, width)
    assert np.abs(ours[:height] - theirs[:height]).max() <= 1  # luma
    assert np.abs(ours[height:] - theirs[height:]).mean() < 1.0  # chroma: swscale filters edges a little wider
    back = av.VideoFrame.from_ndarray(rgb_to_yuv420p(frame), format="yuv420p").to_ndarray(format="rgb24")
    via_swscale = av.VideoFrame.from_ndarray(theirs.astype(np.uint8), format="yuv420p").to_ndarray(format="rgb24")
    assert mean_error(back, frame) <= mean_error(via_swscale, frame) + 0.5


@pytest.mark.parametrize("threads", [None, 1])
def test_av1_encoder_keeps_no_python_object_per_frame(tmp_path: Path, threads: int | None) -> None:
    """An AV1 episode's encoder holds no Python object per encoded frame (packets go to the file as they come):
    the gc-tracked objects do not grow over 200 frames and the Python heap grows by well under the 1.9 kB per
    frame the AV1 path's RSS grew by over an episode (that growth is native: SVT-AV1's threads, see
    `encoder_thread_options`)."""
    import gc
    import tracemalloc

    frames = [camera_frame(0, i, 48, 64) for i in range(10)]
    encoder = EpisodeVideoEncoder(tmp_path / "a.mp4", codec="libsvtav1", fps=30, height=48, width=64, threads=threads)

    def encode(count: int) -> None:
        for i in range(count):
            encoder.encode(frames[i % len(frames)])

    encode(40)
    gc.collect()
    objects = len(gc.get_objects())
    tracemalloc.start()
    try:
        encode(200)
        gc.collect()
        traced = tracemalloc.get_traced_memory()[0]
    finally:
        tracemalloc.stop()
    grown = len(gc.get_objects()) - objects
    encoder.finish()
    assert grown < 20, f"{grown} more Python objects after 200 frames"
    assert traced < 200 * 256, f"the Python heap grew {traced} bytes over 200 frames"
    assert probe(tmp_path / "a.mp4").frames == 240


def test_camera_statistics_of_a_long_episode_read_only_the_sampled_histograms(tmp_path: Path) -> None:
    """A camera's statistics read the ~900 histograms LeRobot samples of a 9000-frame episode, not the whole
    27 MB file: mapping it put the file in the process's resident memory at every commit (the peak RSS of a
    300 s AV1 episode was 27 MB above the encoding's, growing ~3 kB per frame). Run in a fresh process so its
    peak RSS (VmHWM) is its own."""
    import subprocess
    import sys

    from lerobot_dataset.stats import CameraHistograms

    frames = 9000
    rows = np.random.default_rng(0).integers(0, 1000, size=(frames, 3, 256), dtype=np.uint32)
    path = tmp_path / "camera.hist"
    path.write_bytes(rows.tobytes())
    assert path.stat().st_size == frames * CameraHistograms.ROW_BYTES
    script = (
        "import sys, numpy as np\n"
        "from pathlib import Path\n"
        "from lerobot_dataset.stats import histogram_file_stats, sample_indices\n"
        "def hwm():\n"
        "    return int(next(l for l in open('/proc/self/status') if l.startswith('VmHWM')).split()[1])\n"
        "sample_indices(10)\n"
        "histogram_file_stats(Path(sys.argv[1]), 10)\n"
        "before = hwm()\n"
        "stats = histogram_file_stats(Path(sys.argv[1]), int(sys.argv[2]))\n"
        "print(hwm() - before, float(stats['mean'][0, 0, 0]))\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", script, str(path), str(frames)], capture_output=True, text=True, check=True
    ).stdout.split()
    grown_kb = int(out[0])
    assert grown_kb < 4 * 1024, f"peak RSS grew {grown_kb} kB computing the statistics of a 27 MB histogram file"
    expected = stats_of_rows(rows)
    assert float(out[1]) == pytest.approx(expected, rel=1e-9)


def stats_of_rows(rows: np.ndarray) -> float:
    """The red channel's mean (0..1) over LeRobot's sample of `rows`, as `histogram_file_stats` computes it."""
    from lerobot_dataset.stats import camera_stats_from_histograms, sample_indices

    indices = sample_indices(len(rows))
    summed = rows[indices].astype(np.float64).sum(axis=0)
    return float(camera_stats_from_histograms(summed, len(indices))["mean"][0, 0, 0])


def test_a_long_episode_is_written_in_bounded_row_groups(tmp_path: Path) -> None:
    """The parquet writer's memory grows with a row group's rows: an episode's rows go in groups of at most
    ROW_GROUP_ROWS (one 9000-row group took 27 MB at the commit of a 300 s episode), also when appended."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    from lerobot_dataset.writer import ROW_GROUP_ROWS, _write_parquet_appended

    rows = 2 * ROW_GROUP_ROWS + 5
    table = pa.table({"index": pa.array(np.arange(rows)), "x": pa.array(np.ones(rows, dtype=np.float32))})
    first, second = tmp_path / "a.parquet", tmp_path / "b.parquet"
    _write_parquet_appended(None, table, first)
    _write_parquet_appended(first, table, second)
    for path, total in ((first, rows), (second, 2 * rows)):
        meta = pq.ParquetFile(path).metadata
        sizes = [meta.row_group(i).num_rows for i in range(meta.num_row_groups)]
        assert sum(sizes) == total and max(sizes) <= ROW_GROUP_ROWS, sizes
    assert pq.read_table(second).column("index").to_pylist() == [*range(rows), *range(rows)]
