"""Compatibility with the real LeRobot 0.4.4 loader (runs in .venv-lerobot-ref as a subprocess).

Datasets written here (video and image features, several episodes and tasks, file rollover, resumed
datasets) must load in `LeRobotDataset` and return the frames that were written: vectors and image
features exactly, video pixels within codec tolerance and identical to our own reader's decoding.
A dataset written by LeRobot's own writer must take appended episodes from `DatasetWriter.open`.
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import numpy as np
import pytest
from dataset_synthetic import camera_features, create, write_episodes

from lerobot_dataset import DatasetReader, DatasetWriter
from lerobot_dataset.validate import validate
from lerobot_dataset.video import VIDEO_ENCODINGS

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[2]
REF_PYTHON = Path(os.environ.get("LEROBOT_ROS_REFERENCE_VENV", REPO / ".venv-lerobot-ref")) / "bin" / "python"
FRONT = "observation.images.front"
WRIST = "observation.images.wrist"
DELTAS = {"action": [-1 / 30, 0.0, 2 / 30], FRONT: [-1 / 30, 0.0]}

pytestmark = [
    pytest.mark.reference,
    pytest.mark.skipif(
        not REF_PYTHON.exists(),
        reason="the LeRobot reference venv (.venv-lerobot-ref) is absent; "
        "build it with scripts/setup.sh --with-lerobot-reference",
    ),
]


def reference_env(tmp_path: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "LD_LIBRARY_PATH", "VIRTUAL_ENV")}
    env.update(HF_HUB_OFFLINE="1", HF_HOME=str(tmp_path / "hf-home"), HF_LEROBOT_HOME=str(tmp_path / "hf-lerobot"))
    return env


def run_reference(tmp_path: Path, script: str, *args: str) -> None:
    result = subprocess.run(
        [str(REF_PYTHON), str(HERE / script), *args],
        env=reference_env(tmp_path),
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert result.returncode == 0, f"{script} failed:\n{result.stdout[-3000:]}\n{result.stderr[-6000:]}"


def load_with_lerobot(
    tmp_path: Path, root: Path, deltas: dict[str, list[float]] | None = None
) -> dict[str, np.ndarray]:
    out = tmp_path / f"{root.name}-lerobot.npz"
    run_reference(tmp_path, "reference_loader.py", str(root), str(out), *([json.dumps(deltas)] if deltas else []))
    with np.load(out) as data:
        return {key: data[key] for key in data.files}


def assert_same_as_our_reader(root: Path, loaded: dict[str, np.ndarray], deltas: dict[str, list[float]] | None) -> None:
    with DatasetReader(root) as reader:
        assert int(loaded["len"]) == len(reader)
        assert int(loaded["num_episodes"]) == reader.num_episodes
        for i in range(len(reader)):
            ours = reader[i]
            assert loaded["task"][i] == ours["task"]
            for key in ("index", "episode_index", "frame_index", "task_index"):
                assert loaded[key][i] == ours[key], (key, i)
            assert loaded["timestamp"][i] == pytest.approx(float(ours["timestamp"]), abs=1e-6)
            np.testing.assert_array_equal(loaded["action"][i], ours["action"])
            np.testing.assert_array_equal(loaded["observation.state"][i], ours["observation.state"])
            assert bool(loaded["next.done"][i]) == bool(ours["next.done"][0])
            if WRIST in ours:
                np.testing.assert_array_equal(loaded[WRIST][i], ours[WRIST])
            if FRONT in ours:
                # Same AV1/H.264 stream through torchcodec (system FFmpeg) and PyAV: a rounding step apart at most.
                diff = np.abs(loaded[FRONT][i].astype(int) - ours[FRONT].astype(int))
                assert diff.max() <= 2, f"frame {i}: LeRobot and our reader decode differently ({diff.max()})"
            if deltas:
                window = reader.get(i, deltas)
                for key in deltas:
                    assert loaded[f"delta/{key}_is_pad"][i].tolist() == window[f"{key}_is_pad"].tolist(), (key, i)
                    got = loaded[f"delta/{key}"][i].astype(np.float64)
                    np.testing.assert_allclose(got, window[key].astype(np.float64), atol=2.0 if key == FRONT else 0)


def assert_written_frames(
    loaded: dict[str, np.ndarray], written: list[list[dict[str, object]]], start: int = 0
) -> None:
    index = start
    for frames in written:
        for frame in frames:
            np.testing.assert_array_equal(loaded["action"][index], frame["action"])
            if WRIST in frame:
                np.testing.assert_array_equal(loaded[WRIST][index], frame[WRIST])
            if FRONT in frame:
                error = np.abs(loaded[FRONT][index].astype(int) - np.asarray(frame[FRONT]).astype(int)).mean()
                assert error < 10.0, f"frame {index}: mean abs error {error:.2f} against what was written"
            index += 1


def write_codec(root: Path, codec: str) -> list[list[dict[str, object]]]:
    with create(root, video_codec=codec) as writer:
        return write_episodes(writer, [12, 5, 9], ["pick the cube", "place the cube", "wave"])


def write_rolled_over_and_resumed(root: Path) -> list[list[dict[str, object]]]:
    with create(root, data_files_size_in_mb=0.002, video_files_size_in_mb=0.002, chunks_size=2) as writer:
        written = write_episodes(writer, [6, 8, 5], ["a", "b"])
    with DatasetWriter.open(root) as writer:
        written += write_episodes(writer, [7, 4], ["c", "a"], first_episode=3)
    return written


def write_two_h264_settings(root: Path) -> list[list[dict[str, object]]]:
    with create(root, video_codec="h264") as writer:
        written = write_episodes(writer, [6, 5], ["a"])
    with DatasetWriter.open(root, video_codec="h264-ultrafast") as writer:
        written += write_episodes(writer, [7, 4], ["b"], first_episode=2)
    return written


@pytest.fixture(scope="module")
def loaded_by_lerobot(tmp_path_factory: pytest.TempPathFactory) -> dict[str, tuple[Path, list, dict[str, np.ndarray]]]:
    """The datasets of the loading tests below, written by us and loaded by LeRobot in one reference process (its
    start-up, importing LeRobot and torch, took most of each test's time): name -> (root, written, loaded)."""
    tmp = tmp_path_factory.mktemp("lerobot_compat")
    writers = {f"codec-{codec}": lambda root, c=codec: write_codec(root, c) for codec in VIDEO_ENCODINGS}
    writers.update({"rolled-over": write_rolled_over_and_resumed, "two-h264-settings": write_two_h264_settings})
    written = {name: write(tmp / name) for name, write in writers.items()}
    jobs = [[str(tmp / name), str(tmp / f"{name}-lerobot.npz"), DELTAS] for name in writers]
    (tmp / "jobs.json").write_text(json.dumps(jobs))
    run_reference(tmp, "reference_loader.py", "--jobs", str(tmp / "jobs.json"))
    out = {}
    for name in writers:
        with np.load(tmp / f"{name}-lerobot.npz") as data:
            out[name] = (tmp / name, written[name], {key: data[key] for key in data.files})
    return out


@pytest.mark.parametrize("codec", list(VIDEO_ENCODINGS))
def test_lerobot_loads_episodes_tasks_and_cameras(loaded_by_lerobot, codec: str) -> None:
    root, written, loaded = loaded_by_lerobot[f"codec-{codec}"]
    assert validate(root) == []
    assert list(loaded["task"][[0, 12, 17]]) == ["pick the cube", "place the cube", "wave"]
    assert_written_frames(loaded, written)
    assert_same_as_our_reader(root, loaded, DELTAS)


def test_lerobot_loads_rolled_over_and_resumed_dataset(loaded_by_lerobot) -> None:
    root, written, loaded = loaded_by_lerobot["rolled-over"]
    assert validate(root) == []
    assert len(list((root / "data").glob("*/*.parquet"))) > 2
    assert len(list((root / "videos" / FRONT).glob("chunk-001/*.mp4"))) >= 1
    assert_written_frames(loaded, written)
    assert_same_as_our_reader(root, loaded, DELTAS)


def test_lerobot_loads_episodes_of_two_h264_settings_in_separate_files(loaded_by_lerobot) -> None:
    root, written, loaded = loaded_by_lerobot["two-h264-settings"]
    assert validate(root) == []
    assert len(list((root / "videos" / FRONT).glob("*/*.mp4"))) == 2
    assert_written_frames(loaded, written)
    assert_same_as_our_reader(root, loaded, DELTAS)


def test_dataset_written_by_lerobot_takes_appended_episodes(tmp_path: Path) -> None:
    root = tmp_path / "lerobot-written"
    run_reference(tmp_path, "reference_writer.py", str(root), "3")
    assert validate(root) == []
    before = load_with_lerobot(tmp_path, root)
    with DatasetWriter.open(root) as writer:
        assert writer.num_episodes == 3
        written = write_episodes(writer, [6, 4], ["lerobot task 1", "new task"], first_episode=3)
    assert validate(root) == []
    after = load_with_lerobot(tmp_path, root, DELTAS)
    old_frames = int(before["len"])
    for key in ("action", WRIST, FRONT, "index", "task"):
        np.testing.assert_array_equal(after[key][:old_frames], before[key])
    assert_written_frames(after, written, start=old_frames)
    assert list(after["task"][old_frames:]) == ["lerobot task 1"] * 6 + ["new task"] * 4
    assert_same_as_our_reader(root, after, DELTAS)


def test_episode_stats_match_lerobots_computation(tmp_path: Path) -> None:
    root = tmp_path / "ours"
    with create(root, features=camera_features(video=False)) as writer:
        write_episodes(writer, [1, 7, 130], ["a", "b"])
    out = tmp_path / "lerobot-stats.json"
    run_reference(tmp_path, "reference_stats.py", str(root), str(out))
    reference = json.loads(out.read_text())
    expected = reference["episodes"]
    lerobot_06 = tuple(int(p) for p in reference["lerobot"].split(".")[:2]) >= (0, 6)
    with DatasetReader(root) as reader:
        ours = [reader.meta.episode_stats(row) for row in reader.episodes]
    assert len(ours) == len(expected) == 3
    for episode, (mine, theirs) in enumerate(zip(ours, expected, strict=True)):
        assert set(mine) == set(theirs), episode
        for key, stats in theirs.items():
            for name, value in stats.items():
                if key == WRIST and name == "std":
                    # LeRobot 0.4.4 squares uint8 pixels without widening: its camera std is wrong. LeRobot 0.6
                    # takes sqrt(E[x^2] - E[x]^2) of float32 running means of pixels up to 255: ~0.4 % off here.
                    continue
                # LeRobot 0.6 computes image statistics in float32 (pixels promoted to float32, its quantile
                # histogram's edges in float32): they agree with ours (float64) to a few 1e-5.
                image_in_float32 = lerobot_06 and key == WRIST
                np.testing.assert_allclose(
                    np.asarray(mine[key][name], dtype=float),
                    np.asarray(value, dtype=float),
                    rtol=1e-4 if image_in_float32 else 1e-5,
                    atol=1e-6,
                    err_msg=f"episode {episode} {key} {name} (LeRobot {reference['lerobot']})",
                )
