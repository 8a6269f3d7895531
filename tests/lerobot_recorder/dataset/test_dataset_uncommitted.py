"""Issue 18 #4: a root without a committed episode is not a dataset; the next create() takes it over."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from dataset_synthetic import camera_features, create, write_episodes

from lerobot_dataset import DatasetError, DatasetExistsError, DatasetReader, DatasetWriter
from lerobot_dataset.commit import uncommitted_dataset
from lerobot_dataset.layout import STAGING_DIR
from lerobot_dataset.validate import validate

FEATURES = camera_features(video=False, image=False)


def test_create_takes_over_a_root_left_before_the_first_commit(tmp_path: Path) -> None:
    root = tmp_path / "ds"
    writer = create(root, features=FEATURES)
    writer.start_episode("never saved")  # killed here: staging files, info.json with 0 episodes
    assert uncommitted_dataset(root)
    with pytest.raises(DatasetError, match="another DatasetWriter has"):  # not while its writer lives
        create(root, features=FEATURES)
    writer.close()
    problems = validate(root)
    assert [p.message for p in problems if "no committed episode" in p.message], problems
    with create(root, features=FEATURES) as again:
        write_episodes(again, [3], ["a"])
    assert validate(root) == []
    assert json.loads((root / "meta/info.json").read_text())["total_episodes"] == 1


def test_leftover_of_a_create_killed_before_info_json_is_taken_over(tmp_path: Path) -> None:
    root = tmp_path / "ds"
    (root / STAGING_DIR).mkdir(parents=True)
    (root / STAGING_DIR / "writer.lock").write_text("")
    (root / "meta").mkdir()
    (root / "meta" / "contract.json.tmp").write_text("{")
    assert uncommitted_dataset(root)
    assert "missing" in validate(root)[0].message
    with create(root, features=FEATURES) as writer:
        write_episodes(writer, [2], ["a"])
    assert validate(root) == []


@pytest.mark.parametrize(
    "foreign",
    ["notes.txt", "data/chunk-000/file-000.parquet", "meta/episodes/chunk-000/file-000.parquet", "meta/README.md"],
)
def test_a_root_with_anything_else_is_never_taken_over(tmp_path: Path, foreign: str) -> None:
    root = tmp_path / "ds"
    create(root, features=FEATURES).close()
    (root / foreign).parent.mkdir(parents=True, exist_ok=True)
    (root / foreign).write_text("somebody's file")
    assert not uncommitted_dataset(root)
    with pytest.raises(DatasetExistsError):
        create(root, features=FEATURES)
    assert (root / foreign).read_text() == "somebody's file"


def test_a_committed_episode_is_never_taken_over(tmp_path: Path) -> None:
    root = tmp_path / "ds"
    with create(root, features=FEATURES) as writer:
        write_episodes(writer, [2], ["a"])
    assert not uncommitted_dataset(root)
    with pytest.raises(DatasetExistsError, match=r"DatasetWriter\.open"):
        create(root, features=FEATURES)
    with DatasetReader(root) as reader:
        assert reader.num_episodes == 1


def test_create_leaves_no_half_root_and_cleans_a_killed_creates_folder(tmp_path: Path) -> None:
    root = tmp_path / "ds"
    stale = tmp_path / ".ds.lerobot_ros_creating-999999"  # what a create killed mid-way leaves beside the root
    (stale / "meta").mkdir(parents=True)
    with DatasetWriter.create(root, repo_id="local/t", fps=30, features=FEATURES) as writer:
        write_episodes(writer, [2], ["a"])
    assert not stale.exists()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["ds"]
    assert validate(root) == []
