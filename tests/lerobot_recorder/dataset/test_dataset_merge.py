"""Datasets as a collection: merge, filter and split (dataset/merge.py, `lerobot-ros dataset merge|split|filter`).

The merged dataset must validate, equal frame for frame the inputs (numeric columns and image cells exactly,
video frames decoded identical when copied, close when re-encoded), and carry the statistics of the same
episodes written in one go.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq
import pytest
from dataset_synthetic import camera_features, create, run_dataset_command, write_episodes

from lerobot_dataset import DatasetError, DatasetExistsError, DatasetReader, FeatureSpec, SchemaMismatchError
from lerobot_dataset.merge import fraction_splits, merge_datasets, select_episodes, split_dataset
from lerobot_dataset.meta import DatasetMeta, data_files
from lerobot_dataset.validate import validate
from lerobot_dataset.video import probe

FRONT = "observation.images.front"
WRIST = "observation.images.wrist"
NUMERIC = ("observation.state", "action", "next.done", "timestamp", "frame_index")


def _two_sources(tmp_path: Path, codec_b: str = "libsvtav1") -> tuple[Path, Path]:
    with create(tmp_path / "a") as writer:
        write_episodes(writer, [5, 7], ["pick", "place"])
    with create(tmp_path / "b", video_codec=codec_b) as writer:
        write_episodes(writer, [6, 4], ["place", "stack"], first_episode=2)
    return tmp_path / "a", tmp_path / "b"


def assert_same_frames(
    merged: Path, sources: list[tuple[Path, list[int]]], *, video_atol: float = 0, complete: bool = True
) -> None:
    """Every frame of `merged` equals the source frame it came from (sources and their episodes, in order)."""
    with DatasetReader(merged) as out:
        position = 0
        for root, episodes in sources:
            with DatasetReader(root) as src:
                for episode in episodes:
                    start, end = src.episode_range(episode)
                    for row in range(start, end):
                        got, want = out[position], src[row]
                        assert got["task"] == want["task"]
                        assert got["index"] == position
                        for key in NUMERIC:
                            np.testing.assert_array_equal(got[key], want[key], err_msg=f"{key} frame {position}")
                        if WRIST in want:
                            np.testing.assert_array_equal(got[WRIST], want[WRIST])
                        if FRONT in want:
                            diff = np.abs(got[FRONT].astype(int) - want[FRONT].astype(int))
                            if video_atol == 0:
                                assert diff.max() == 0, f"frame {position}: copied video decodes differently"
                            else:
                                assert diff.mean() < video_atol, f"frame {position}: mean error {diff.mean():.2f}"
                        position += 1
        assert position == len(out) or not complete


def test_merge_equals_the_inputs_and_a_dataset_written_in_one_go(tmp_path: Path) -> None:
    a, b = _two_sources(tmp_path)
    with create(tmp_path / "one-go") as writer:
        write_episodes(writer, [5, 7, 6, 4], ["pick", "place", "place", "stack"])
    report = merge_datasets([a, b], tmp_path / "merged")
    merged = tmp_path / "merged"
    assert validate(merged) == []
    assert report.copied == {FRONT: 4} and report.reencoded == []
    assert_same_frames(merged, [(a, [0, 1]), (b, [0, 1])])
    meta = DatasetMeta.load(merged)
    assert meta.tasks == ["pick", "place", "stack"]  # same text, one task index
    assert [int(e["episode_index"]) for e in meta.episodes] == [0, 1, 2, 3]
    one_go = tmp_path / "one-go"
    assert json.loads((merged / "meta/stats.json").read_text()) == json.loads((one_go / "meta/stats.json").read_text())
    for key in ("index", "episode_index", "task_index", "frame_index", "action"):
        got = pq.read_table(merged / "data/chunk-000/file-000.parquet").column(key).to_pylist()
        assert got == pq.read_table(one_go / "data/chunk-000/file-000.parquet").column(key).to_pylist(), key
    ours, reference = DatasetMeta.load(one_go).episodes, meta.episodes
    for row_ref, row in zip(ours, reference, strict=True):
        for column, value in row_ref.items():
            if column.startswith(("stats/", "videos/", "dataset_")) or column == "length":
                assert row[column] == value, column


def test_merge_rechunks_by_the_size_limits(tmp_path: Path) -> None:
    a, b = _two_sources(tmp_path)
    merged = tmp_path / "merged"
    report = merge_datasets([a, b], merged, data_files_size_in_mb=0.004, video_files_size_in_mb=0.005, chunks_size=2)
    assert validate(merged) == []
    assert report.data_files > 1 and report.video_files[FRONT] > 1
    assert len(data_files(merged)) == report.data_files
    assert (merged / "data/chunk-001").is_dir()  # chunks_size 2: the third file starts chunk 1
    info = json.loads((merged / "meta/info.json").read_text())
    assert (info["chunks_size"], info["video_files_size_in_mb"]) == (2, 0.005)
    assert_same_frames(merged, [(a, [0, 1]), (b, [0, 1])])


def test_merge_reencodes_a_source_with_another_codec(tmp_path: Path) -> None:
    a, b = _two_sources(tmp_path, codec_b="h264")
    merged = tmp_path / "merged"
    report = merge_datasets([a, b], merged)
    assert validate(merged) == []
    assert report.copied == {FRONT: 2}
    assert len(report.reencoded) == 2 and all("h264/yuv420p differs" in line for line in report.reencoded)
    assert {probe(p).codec for p in (merged / "videos" / FRONT).rglob("*.mp4")} == {"av1"}
    assert_same_frames(merged, [(a, [0, 1])], complete=False)  # the copied half: identical
    assert_same_frames(merged, [(a, [0, 1]), (b, [0, 1])], video_atol=10.0)  # the re-encoded half: close


def _as_one_continuous_stream(root: Path) -> None:
    """Re-encode a dataset's mp4 as one h264 stream with a single keyframe (as a tool that does not encode per
    episode would write it): later episodes then start between keyframes and cannot be cut out by stream copy."""
    import av

    with DatasetReader(root) as reader:
        frames = np.concatenate([reader.episode_frames(e, FRONT) for e in range(reader.num_episodes)])
    path = root / "videos" / FRONT / "chunk-000" / "file-000.mp4"
    with av.open(str(path), mode="w", format="mp4") as container:
        stream = container.add_stream("libx264", rate=30, options={"g": "1000", "bf": "0"})
        stream.width, stream.height, stream.pix_fmt = frames.shape[2], frames.shape[1], "yuv420p"
        for frame in frames:
            for packet in stream.encode(av.VideoFrame.from_ndarray(frame, format="rgb24")):
                container.mux(packet)
        for packet in stream.encode(None):
            container.mux(packet)
    info = json.loads((root / "meta/info.json").read_text())
    info["features"][FRONT]["info"]["video.codec"] = "h264"
    (root / "meta/info.json").write_text(json.dumps(info))


def test_episodes_that_cannot_be_cut_by_stream_copy_are_reencoded_and_named(tmp_path: Path) -> None:
    a, _ = _two_sources(tmp_path)
    _as_one_continuous_stream(a)
    assert validate(a) == []
    report = merge_datasets([a], tmp_path / "merged")
    assert report.copied == {FRONT: 1}  # the first episode starts on the keyframe
    assert report.reencoded == [f"{a} episode 1 {FRONT}: the episode's packets do not start on a keyframe"]
    assert validate(tmp_path / "merged") == []
    assert_same_frames(tmp_path / "merged", [(a, [0])], complete=False)
    assert_same_frames(tmp_path / "merged", [(a, [0, 1])], video_atol=10.0)


def test_merge_reencodes_everything_when_asked(tmp_path: Path) -> None:
    a, b = _two_sources(tmp_path)
    report = merge_datasets([a, b], tmp_path / "merged", video_codec="h264", reencode=True)
    assert validate(tmp_path / "merged") == []
    assert len(report.reencoded) == 4 and report.copied == {}
    info = json.loads((tmp_path / "merged/meta/info.json").read_text())
    assert info["features"][FRONT]["info"]["video.codec"] == "h264"
    assert_same_frames(tmp_path / "merged", [(a, [0, 1]), (b, [0, 1])], video_atol=10.0)


def test_merge_of_image_only_datasets(tmp_path: Path) -> None:
    features = camera_features(video=False)
    for name, first in (("a", 0), ("b", 3)):
        with create(tmp_path / name, features=features) as writer:
            write_episodes(writer, [4, 3], ["t"], first_episode=first)
    merge_datasets([tmp_path / "a", tmp_path / "b"], tmp_path / "merged")
    assert validate(tmp_path / "merged") == []
    assert_same_frames(tmp_path / "merged", [(tmp_path / "a", [0, 1]), (tmp_path / "b", [0, 1])])


def test_merge_refuses_different_features(tmp_path: Path) -> None:
    a, _ = _two_sources(tmp_path)
    features = camera_features()
    features["action"] = FeatureSpec("float32", (5,))
    with create(tmp_path / "c", features=features) as writer:
        writer.start_episode("t")
        for _ in range(3):
            writer.add_frame(
                {
                    "observation.state": np.zeros(4, np.float32),
                    "action": np.zeros(5, np.float32),
                    "next.done": np.array([False]),
                    FRONT: np.zeros((48, 64, 3), np.uint8),
                    WRIST: np.zeros((24, 32, 3), np.uint8),
                }
            )
        writer.save_episode()
    with pytest.raises(SchemaMismatchError, match=r"features differ.*'action' is float32\[5\]"):
        merge_datasets([a, tmp_path / "c"], tmp_path / "merged")
    assert not (tmp_path / "merged").exists()
    status, out = run_dataset_command("merge", str(a), str(tmp_path / "c"), "--output", str(tmp_path / "m"))
    assert status == 2 and "features differ" in out and len(out.strip().splitlines()) == 1


def test_merge_refuses_different_fps_and_robot_type(tmp_path: Path) -> None:
    a, _ = _two_sources(tmp_path)
    meta = json.loads((a / "meta/info.json").read_text())
    other = tmp_path / "other"
    with create(other) as writer:
        write_episodes(writer, [3], ["t"])
    info = json.loads((other / "meta/info.json").read_text())
    info["fps"] = 15
    (other / "meta/info.json").write_text(json.dumps(info))
    with pytest.raises(SchemaMismatchError, match="fps differ"):
        merge_datasets([a, other], tmp_path / "merged")
    info["fps"], info["robot_type"] = meta["fps"], "koch"
    (other / "meta/info.json").write_text(json.dumps(info))
    with pytest.raises(SchemaMismatchError, match=r"robot_type.*--robot-type"):
        merge_datasets([a, other], tmp_path / "merged")
    merge_datasets([a, other], tmp_path / "merged", robot_type="koch")
    assert json.loads((tmp_path / "merged/meta/info.json").read_text())["robot_type"] == "koch"
    assert validate(tmp_path / "merged") == []


def test_merge_refuses_an_existing_output(tmp_path: Path) -> None:
    a, b = _two_sources(tmp_path)
    (tmp_path / "merged").mkdir()
    with pytest.raises(DatasetExistsError, match="already exists"):
        merge_datasets([a, b], tmp_path / "merged")
    assert list((tmp_path / "merged").iterdir()) == []


def test_merge_refuses_a_source_with_an_interrupted_commit(tmp_path: Path) -> None:
    a, b = _two_sources(tmp_path)
    journal = b / ".lerobot_ros_staging" / "commit-journal.json"
    journal.write_text(json.dumps({"episode_index": 2, "renames": []}))
    with pytest.raises(DatasetError, match=r"interrupted commit; finish it first with .*validate --repair"):
        merge_datasets([a, b], tmp_path / "merged")
    assert not (tmp_path / "merged").exists()


def test_filter_keeps_and_excludes_episodes(tmp_path: Path) -> None:
    with create(tmp_path / "src") as writer:
        write_episodes(writer, [4, 5, 6, 3, 2], ["a", "b", "c"])
    src = tmp_path / "src"
    select_episodes(src, tmp_path / "kept", episodes=[0, 2, 4])
    assert validate(tmp_path / "kept") == []
    assert_same_frames(tmp_path / "kept", [(src, [0, 2, 4])])
    assert DatasetMeta.load(tmp_path / "kept").tasks == ["a", "c", "b"]
    status, out = run_dataset_command("filter", str(src), "--exclude-episodes", "1", "--output", str(tmp_path / "ex"))
    assert status == 0, out
    assert validate(tmp_path / "ex") == []
    assert_same_frames(tmp_path / "ex", [(src, [0, 2, 3, 4])])
    status, out = run_dataset_command("filter", str(src), "--episodes", "9", "--output", str(tmp_path / "bad"))
    assert status == 2 and "episode(s) [9] do not exist" in out


def test_split_by_fractions_and_by_lists(tmp_path: Path) -> None:
    with create(tmp_path / "src") as writer:
        write_episodes(writer, [3] * 10, ["a", "b"])
    src = tmp_path / "src"
    assert fraction_splits(10, {"train": 0.8, "val": 0.2}) == {"train": list(range(8)), "val": [8, 9]}
    shuffled = fraction_splits(10, {"train": 0.8, "val": 0.2}, seed=3)
    assert sorted(shuffled["train"] + shuffled["val"]) == list(range(10)) and shuffled["val"] != [8, 9]
    status, out = run_dataset_command(
        "split", str(src), "--output-dir", str(tmp_path / "s"), "--fractions", "train=0.7,val=0.3", "--seed", "3"
    )
    assert status == 0, out
    expected = fraction_splits(10, {"train": 0.7, "val": 0.3}, seed=3)
    for name in ("train", "val"):
        assert validate(tmp_path / "s" / name) == []
        assert_same_frames(tmp_path / "s" / name, [(src, expected[name])])
    split_dataset(src, tmp_path / "lists", {"head": [0, 1], "tail": [9]})
    assert DatasetMeta.load(tmp_path / "lists/tail").total_episodes == 1
    status, out = run_dataset_command(
        "split", str(src), "--output-dir", str(tmp_path / "x"), "--episodes", "a=0,1", "--episodes", "b=1"
    )
    assert status == 2 and "more than one split" in out


def test_merge_command_runs_as_a_process(tmp_path: Path) -> None:
    import subprocess
    import sys

    a, b = _two_sources(tmp_path)
    command = [sys.executable, "-m", "lerobot_ros.cli", "dataset", "merge", str(a), str(b), "--output"]
    result = subprocess.run([*command, str(tmp_path / "m")], capture_output=True, text=True, timeout=300, check=False)
    assert result.returncode == 0, result.stderr
    assert "4 episodes, 22 frames, 3 tasks" in result.stdout and "4 copied" in result.stdout
    result = subprocess.run([*command, str(tmp_path / "m")], capture_output=True, text=True, timeout=300, check=False)
    assert result.returncode == 2
    assert result.stderr.strip() == (
        f"lerobot-ros dataset: error: {tmp_path / 'm'} already exists; choose a new --output folder "
        "(merge never overwrites)"
    )
