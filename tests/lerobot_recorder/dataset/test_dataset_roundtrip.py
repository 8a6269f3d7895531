"""Round trips through DatasetWriter and DatasetReader, written into tmp_path."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq
import pytest

from lerobot_dataset import DatasetReader, DatasetWriter, FeatureSpec

STATE_NAMES = ["shoulder_pan.pos", "shoulder_lift.pos", "elbow_flex.pos"]


def vector_features() -> dict[str, FeatureSpec]:
    return {
        "observation.state": FeatureSpec("float32", (3,), STATE_NAMES),
        "action": FeatureSpec("float32", (3,), STATE_NAMES),
        "next.reward": FeatureSpec("float64", (1,)),
        "next.done": FeatureSpec("bool", (1,)),
        "counter": FeatureSpec("int64", (2,)),
        "operator.note": FeatureSpec("string", (1,)),
    }


def vector_frame(rng: np.random.Generator, i: int, length: int) -> dict[str, object]:
    return {
        "observation.state": rng.normal(size=3).astype(np.float32),
        "action": rng.normal(size=3).astype(np.float32),
        "next.reward": float(i),
        "next.done": np.array([i == length - 1]),
        "counter": np.array([i, 2 * i]),
        "operator.note": f"step {i}",
    }


def test_vectors_round_trip(tmp_path: Path) -> None:
    root = tmp_path / "ds"
    rng = np.random.default_rng(0)
    written: list[dict[str, object]] = []
    lengths = [5, 1, 7]
    with DatasetWriter.create(root, repo_id="local/test", fps=10, features=vector_features(), robot_type="so101") as w:
        for ep, length in enumerate(lengths):
            assert w.start_episode(f"task {ep % 2}") == ep
            for i in range(length):
                frame = vector_frame(rng, i, length)
                w.add_frame(frame)
                written.append(frame)
            assert w.save_episode() == ep

    info = json.loads((root / "meta/info.json").read_text())
    assert info["total_episodes"] == 3
    assert info["total_frames"] == sum(lengths)
    assert info["total_tasks"] == 2
    assert info["video_path"] is None
    assert list(info["features"])[-5:] == ["timestamp", "frame_index", "episode_index", "index", "task_index"]

    reader = DatasetReader(root)
    assert len(reader) == sum(lengths)
    assert reader.num_episodes == 3
    starts = np.cumsum([0, *lengths])
    for index, frame in enumerate(written):
        item = reader[index]
        ep = int(np.searchsorted(starts, index, side="right")) - 1
        assert item["index"] == index
        assert item["episode_index"] == ep
        assert item["frame_index"] == index - starts[ep]
        assert item["timestamp"] == np.float32((index - starts[ep]) / 10)
        assert item["task"] == f"task {ep % 2}"
        np.testing.assert_array_equal(item["observation.state"], frame["observation.state"])
        np.testing.assert_array_equal(item["next.reward"], [frame["next.reward"]])
        np.testing.assert_array_equal(item["counter"], frame["counter"])
        assert item["counter"].dtype == np.int64
        assert item["operator.note"] == frame["operator.note"]

    stats = json.loads((root / "meta/stats.json").read_text())
    states = np.stack([f["observation.state"] for f in written])
    np.testing.assert_allclose(stats["observation.state"]["mean"], states.mean(axis=0), rtol=1e-6)
    np.testing.assert_allclose(stats["observation.state"]["std"], states.std(axis=0), rtol=1e-4)
    assert stats["observation.state"]["count"] == [sum(lengths)]
    assert stats["next.done"]["max"] == [True]
    assert "operator.note" not in stats  # no statistics for strings, as in LeRobot
    for key in ("q01", "q10", "q50", "q90", "q99"):
        assert key in stats["index"]

    tasks = pq.read_table(root / "meta/tasks.parquet").to_pandas()
    assert list(tasks.index) == ["task 0", "task 1"]
    assert list(tasks["task_index"]) == [0, 1]


def test_create_refuses_existing_root(tmp_path: Path) -> None:
    root = tmp_path / "ds"
    with DatasetWriter.create(root, repo_id="local/test", fps=10, features=vector_features()) as writer:
        writer.start_episode("kept")
        writer.add_frame(vector_frame(np.random.default_rng(1), 0, 1))
        writer.save_episode()
    from lerobot_dataset import DatasetExistsError

    with pytest.raises(DatasetExistsError, match=r"DatasetWriter\.open"):
        DatasetWriter.create(root, repo_id="local/test", fps=10, features=vector_features())


def test_empty_dataset_is_not_valid_but_reopens(tmp_path: Path) -> None:
    """Issue 18 #4: LeRobot cannot load a root without a committed episode; validate says so in one line."""
    from lerobot_dataset.validate import validate

    root = tmp_path / "ds"
    DatasetWriter.create(root, repo_id="local/test", fps=10, features=vector_features()).close()
    problems = validate(root)
    assert len(problems) == 1 and "no committed episode" in problems[0].message, problems
    with DatasetReader(root) as reader:
        assert len(reader) == 0 and reader.num_episodes == 0
    with DatasetWriter.open(root) as writer:
        writer.start_episode("first")
        writer.add_frame(vector_frame(np.random.default_rng(1), 0, 1))
        assert writer.save_episode() == 0
    assert validate(root) == []
