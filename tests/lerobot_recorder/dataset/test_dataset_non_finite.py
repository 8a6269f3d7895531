"""Issue 18 #3: NaN/inf never enter a dataset, and `validate` finds them in data files and statistics."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from dataset_synthetic import camera_features, create, make_frame, run_dataset_command, write_episodes

from lerobot_dataset import DatasetReader, FeatureError
from lerobot_dataset.validate import validate

DATA = "data/chunk-000/file-000.parquet"


def _valid(root: Path, lengths: tuple[int, ...] = (5, 6)) -> None:
    with create(root, features=camera_features(video=False, image=False)) as writer:
        write_episodes(writer, lengths, ["a"])
    assert validate(root) == []


def _poison_data(root: Path, key: str, row: int, value: float) -> None:
    path = root / DATA
    table = pq.read_table(path)
    schema = pq.read_schema(path)
    column = table.column(key).to_pylist()
    column[row][1] = value
    index = table.column_names.index(key)
    table = table.set_column(
        index, pa.field(key, table.schema.field(key).type), pa.array(column, table.schema.field(key).type)
    )
    pq.write_table(table.replace_schema_metadata(schema.metadata), path)


@pytest.mark.parametrize("value", [float("nan"), float("inf"), float("-inf")])
def test_validate_names_file_column_episode_and_frame_of_a_non_finite_value(tmp_path: Path, value: float) -> None:
    root = tmp_path / "ds"
    _valid(root)
    _poison_data(root, "observation.state", 7, value)  # episode 1 starts at row 5: its frame 2
    problems = validate(root)
    lines = [str(p) for p in problems if "NaN/inf" in p.message]
    assert len(lines) == 1, problems
    assert lines[0].startswith(f"{DATA}: column 'observation.state' holds NaN/inf in 1 row(s)")
    assert "episode 1, frame 2" in lines[0]
    status, out = run_dataset_command("validate", str(root))
    assert status == 1 and "episode 1, frame 2" in out


def test_validate_finds_non_finite_statistics(tmp_path: Path) -> None:
    root = tmp_path / "ds"
    _valid(root)
    stats_path = root / "meta/stats.json"
    stats = json.loads(stats_path.read_text())
    stats["action"]["mean"][0] = float("nan")  # json writes NaN, as a NaN-poisoned aggregation does
    stats_path.write_text(json.dumps(stats))
    problems = [str(p) for p in validate(root)]
    assert any(p.startswith("meta/stats.json: 'action' mean hold NaN/inf") for p in problems), problems

    episodes = root / "meta/episodes/chunk-000/file-000.parquet"
    table = pq.read_table(episodes)
    column = table.column("stats/action/max").to_pylist()
    column[1][3] = float("inf")
    index = table.column_names.index("stats/action/max")
    table = table.set_column(index, table.schema.field(index), pa.array(column, table.schema.field(index).type))
    pq.write_table(table, episodes)
    problems = [str(p) for p in validate(root)]
    assert any("episode 1 has NaN/inf statistics in stats/action/max" in p for p in problems), problems


@pytest.mark.parametrize("value", [np.nan, np.inf, 1e39])  # 1e39 overflows float32 to inf
def test_writer_refuses_a_non_finite_frame_and_keeps_the_episode(tmp_path: Path, value: float) -> None:
    root = tmp_path / "ds"
    with create(root, features=camera_features(video=False, image=False)) as writer:
        writer.start_episode("a")
        writer.add_frame(make_frame(writer.features, 0, 0, 3))
        bad = make_frame(writer.features, 0, 1, 3)
        bad["action"] = np.array([0.0, value, 0.0, 0.0])
        with pytest.raises(FeatureError, match="'action' holds a non-finite value"):
            writer.add_frame(bad)
        writer.add_frame(make_frame(writer.features, 0, 2, 3))
        writer.save_episode()
    assert validate(root) == []
    with DatasetReader(root) as reader:
        assert len(reader) == 2
        assert all(np.isfinite(reader[i]["action"]).all() for i in range(2))
