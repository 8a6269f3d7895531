"""Merges with LeRobot 0.4.4 on both ends: a dataset written by LeRobot's own writer merged with ours (and
filtered) validates, loads in LeRobot's `LeRobotDataset`, and serves the source frames unchanged."""

from __future__ import annotations

from pathlib import Path

from dataset_synthetic import create, write_episodes
from test_dataset_lerobot_compat import assert_same_as_our_reader, load_with_lerobot, pytestmark, run_reference
from test_dataset_merge import assert_same_frames

from lerobot_dataset.merge import merge_datasets, select_episodes
from lerobot_dataset.meta import DatasetMeta
from lerobot_dataset.validate import validate

__all__ = ["pytestmark"]  # the reference marker and the skip when the reference venv is absent
DELTAS = {"action": [-1 / 30, 0.0, 2 / 30], "observation.images.front": [-1 / 30, 0.0]}


def test_lerobot_written_and_ours_merge_and_load_in_lerobot(tmp_path: Path) -> None:
    theirs, ours = tmp_path / "lerobot", tmp_path / "ours"
    run_reference(tmp_path, "reference_writer.py", str(theirs), "3")
    with create(ours, robot_type="so101") as writer:
        write_episodes(writer, [7, 5], ["lerobot task 1", "ours"])
    merged = tmp_path / "merged"
    report = merge_datasets([theirs, ours], merged, video_files_size_in_mb=0.02)
    assert report.reencoded == [], report.reencoded  # both AV1 yuv420p: copied
    assert validate(merged) == []
    assert DatasetMeta.load(merged).tasks == ["lerobot task 0", "lerobot task 1", "ours"]
    assert_same_frames(merged, [(theirs, [0, 1, 2]), (ours, [0, 1])])
    loaded = load_with_lerobot(tmp_path, merged, DELTAS)
    assert_same_as_our_reader(merged, loaded, DELTAS)
    kept = tmp_path / "kept"
    select_episodes(merged, kept, exclude=[1, 3])
    assert validate(kept) == []
    assert_same_frames(kept, [(theirs, [0, 2]), (ours, [1])])
    assert_same_as_our_reader(kept, load_with_lerobot(tmp_path, kept), None)
