"""The validator catches the broken datasets LeRobot 0.4.4 loads silently (LEROBOT_V3_FORMAT.md §10) and more."""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable
from pathlib import Path

import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest
from dataset_synthetic import camera_features, create, run_dataset_command, write_episodes

from lerobot_dataset.validate import validate

DATA = "data/chunk-000/file-000.parquet"
EPISODES = "meta/episodes/chunk-000/file-000.parquet"
VIDEO = "videos/observation.images.front/chunk-000/file-000.mp4"


@pytest.fixture(scope="module")
def valid_dataset(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("valid") / "ds"
    with create(root, features=camera_features(image=False)) as writer:
        write_episodes(writer, [10, 10, 10], ["a", "b"])
    return root


def edit_json(path: Path, change: Callable[[dict[str, object]], None]) -> None:
    data = json.loads(path.read_text())
    change(data)
    path.write_text(json.dumps(data))


def edit_table(path: Path, change: Callable[[pa.Table], pa.Table]) -> None:
    pq.write_table(change(pq.read_table(path)), path)


def frames_one_lower(root: Path) -> None:
    edit_json(root / "meta/info.json", lambda info: info.update(total_frames=29))


def stats_deleted(root: Path) -> None:
    (root / "meta/stats.json").unlink()


def from_index_off_by_one(root: Path) -> None:
    def change(table: pa.Table) -> pa.Table:
        values = table.column("dataset_from_index").to_pylist()
        values[1] += 1
        return table.set_column(
            table.schema.get_field_index("dataset_from_index"), "dataset_from_index", pa.array(values)
        )

    edit_table(root / EPISODES, change)


def rows_in_order_0_2_1(root: Path) -> None:
    edit_table(root / DATA, lambda t: pa.concat_tables([t.slice(0, 10), t.slice(20, 10), t.slice(10, 10)]))


def timestamps_shifted(root: Path) -> None:
    def change(table: pa.Table) -> pa.Table:
        ts = table.column("timestamp")
        episode = table.column("episode_index")
        shifted = pc.if_else(pc.equal(episode, 1), pc.add(ts, pa.scalar(0.5, pa.float32())), ts)
        return table.set_column(table.schema.get_field_index("timestamp"), "timestamp", shifted)

    edit_table(root / DATA, change)


def fps_25(root: Path) -> None:
    edit_json(root / "meta/info.json", lambda info: info.update(fps=25))


def task_as_column(root: Path) -> None:
    tasks = pd.read_parquet(root / "meta/tasks.parquet")
    pd.DataFrame({"task_index": tasks["task_index"].to_numpy(), "task": list(tasks.index)}).to_parquet(
        root / "meta/tasks.parquet", index=False
    )


def data_without_footer(root: Path) -> None:
    path = root / DATA
    path.write_bytes(path.read_bytes()[:-100])


def video_missing(root: Path) -> None:
    (root / VIDEO).unlink()


def video_truncated(root: Path) -> None:
    path = root / VIDEO
    path.write_bytes(path.read_bytes()[: path.stat().st_size // 2])


def old_version(root: Path) -> None:
    edit_json(root / "meta/info.json", lambda info: info.update(codebase_version="v2.1"))


def task_index_out_of_range(root: Path) -> None:
    def change(table: pa.Table) -> pa.Table:
        column = pc.if_else(pc.equal(table.column("index"), 3), pa.scalar(7, pa.int64()), table.column("task_index"))
        return table.set_column(table.schema.get_field_index("task_index"), "task_index", column)

    edit_table(root / DATA, change)


def stats_stale(root: Path) -> None:
    edit_json(root / "meta/stats.json", lambda stats: stats["action"].update(count=[20]))


def images_left_over(root: Path) -> None:
    folder = root / "images/observation.images.front/episode-000000"
    folder.mkdir(parents=True)
    (folder / "frame-000000.png").write_bytes(b"")


@pytest.mark.parametrize(
    ("breaker", "expected"),
    [
        (frames_one_lower, "total_frames is 29"),
        (stats_deleted, "stats.json: missing"),
        (from_index_off_by_one, "dataset_from_index is 11"),
        (rows_in_order_0_2_1, "index != row position"),
        (timestamps_shifted, "timestamp != frame_index / fps"),
        (fps_25, "video runs at 30 fps but info.json says fps 25"),
        (task_as_column, "not the pandas index"),
        (data_without_footer, "unreadable"),
        (video_missing, "missing"),
        (video_truncated, "no video frame at their time"),
        (old_version, "v2.1"),
        (task_index_out_of_range, "task_index outside"),
        (images_left_over, "unfinished LeRobot recording"),
        (stats_stale, "statistics are stale"),
    ],
)
def test_broken_dataset_is_reported(
    valid_dataset: Path, tmp_path: Path, breaker: Callable[[Path], None], expected: str
) -> None:
    root = tmp_path / "broken"
    shutil.copytree(valid_dataset, root)
    assert validate(root) == []
    breaker(root)
    problems = [str(p) for p in validate(root)]
    assert any(expected in p for p in problems), problems


def test_cli_exit_status_and_one_line_per_problem(valid_dataset: Path, tmp_path: Path) -> None:
    root = tmp_path / "broken"
    shutil.copytree(valid_dataset, root)
    status, out = run_dataset_command("validate", str(root))
    assert status == 0, out
    assert "OK" in out
    status, out = run_dataset_command("info", str(root))
    assert status == 0 and "episodes       3  (30 frames" in out
    stats_deleted(root)
    frames_one_lower(root)
    status, out = run_dataset_command("validate", str(root))
    assert status == 1
    lines = out.strip().splitlines()
    assert lines[-1].startswith("INVALID: ")
    assert any(line.startswith("meta/stats.json: missing") for line in lines)
    assert any("total_frames is 29" in line for line in lines)
    status, out = run_dataset_command("validate", str(tmp_path / "nowhere"))
    assert status == 2 and "not a folder" in out
