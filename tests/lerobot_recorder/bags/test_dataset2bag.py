"""dataset2bag: episodes back into an mcap bag; bag -> dataset -> bag -> dataset gives the same dataset."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest
from bag_helpers import REPO_ROOT, convert

from lerobot_bags.errors import BagError
from lerobot_bags.export import MARKER_TOPIC, dataset_to_bag
from lerobot_bags.pipeline import DEFAULT_CODEC
from lerobot_bags.reader import BagSource
from lerobot_bags.synthetic import SyntheticBagSpec, contract_for
from lerobot_dataset import DatasetReader
from lerobot_dataset.validate import validate

MakeBag = Callable[..., Path]


def _all_frames(root: Path) -> list[dict[str, object]]:
    with DatasetReader(root) as reader:
        return [reader[i] for i in range(len(reader))]


def test_round_trip_bag_dataset_bag_dataset(make_bag: MakeBag, tmp_path: Path) -> None:
    spec = SyntheticBagSpec(duration_s=0.5, height=24, width=32)
    contract = contract_for(spec, camera_dtype="image")
    bags = [make_bag("a", duration_s=0.5), make_bag("b", duration_s=0.5, seed=2)]
    first = tmp_path / "first"
    convert(bags[:1], contract, first, task="reach")
    convert(bags[1:], contract, first, task="grasp", append=True)
    exported = tmp_path / "exported"
    summary = dataset_to_bag(first, exported, contract, start_s=1_800_000_000.0)
    assert summary["episodes"] == 2
    with BagSource(exported) as bag:
        assert set(bag.info.topics) == {*contract.topics, MARKER_TOPIC}
        assert bag.info.storage == "mcap"
    second = tmp_path / "second"
    result = convert([exported], contract, second, task=None, split=f"marker:{MARKER_TOPIC}")
    assert [e["frames_dropped"] for e in result.episodes] == [0, 0]
    assert validate(second) == []
    before, after = _all_frames(first), _all_frames(second)
    assert len(before) == len(after)
    for a, b in zip(before, after, strict=True):
        assert a.keys() == b.keys()
        for key in a:
            if isinstance(a[key], np.ndarray) and a[key].dtype.kind == "f":
                np.testing.assert_allclose(b[key], a[key], rtol=1e-5, atol=1e-4, err_msg=key)
            else:
                np.testing.assert_array_equal(b[key], a[key], err_msg=key)


def test_dataset2bag_refuses_existing_output_and_unknown_episodes(make_bag: MakeBag, tmp_path: Path) -> None:
    spec = SyntheticBagSpec(duration_s=0.2, height=24, width=32)
    contract = contract_for(spec, camera_dtype="image")
    root = tmp_path / "ds"
    convert([make_bag("a", duration_s=0.2)], contract, root)
    with pytest.raises(BagError, match="do not exist"):
        dataset_to_bag(root, tmp_path / "out", contract, episodes=[3])
    (tmp_path / "exists").mkdir()
    with pytest.raises(BagError, match="exists"):
        dataset_to_bag(root, tmp_path / "exists", contract)


def test_cli_bag2dataset_and_dataset2bag(make_bag: MakeBag, tmp_path: Path) -> None:
    """The registered verbs, end to end, as a user runs them (a subprocess of the installed CLI)."""
    bag = make_bag("bag", duration_s=0.3)
    root = tmp_path / "ds"
    cli = [sys.executable, "-m", "lerobot_ros.cli"]
    contract = REPO_ROOT / "config" / "contracts" / "so101.yaml"
    run = subprocess.run(
        [*cli, "bag2dataset", str(bag), "--contract", str(contract), "--output", str(root), "--task", "t"],
        capture_output=True,
        check=False,
        text=True,
        timeout=120,
    )
    # so101.yaml declares 640x480 cameras; the small synthetic bag has 32x24: a clear, reported failure.
    assert run.returncode == 2, run.stdout + run.stderr
    assert "image is 32x24, the contract declares shape [480, 640, 3]" in run.stdout + run.stderr
    assert not root.exists()
    small = tmp_path / "small.yaml"
    small.write_text(contract.read_text().replace("[480, 640, 3]", "[24, 32, 3]"))
    run = subprocess.run(
        [
            *cli,
            "bag2dataset",
            str(bag),
            "--contract",
            str(small),
            "--output",
            str(root),
            "--task",
            "t",
            "--codec",
            "h264",
            "--jobs",
            "2",
        ],
        capture_output=True,
        check=False,
        text=True,
        timeout=120,
    )
    assert run.returncode == 0, run.stdout + run.stderr
    assert "episode    0" in run.stdout and "sync report:" in run.stdout
    assert (tmp_path / "ds.sync_report.json").is_file()
    run = subprocess.run(
        [*cli, "dataset2bag", str(root), "--output", str(tmp_path / "back")],
        capture_output=True,
        check=False,
        text=True,
        timeout=120,
    )
    assert run.returncode == 0, run.stdout + run.stderr
    assert "1 episode(s)" in run.stdout
    run = subprocess.run(
        [*cli, "bag2dataset", str(bag), "--contract", str(small), "--output", str(root)],
        capture_output=True,
        check=False,
        text=True,
        timeout=120,
    )
    assert run.returncode == 2 and "needs a task" in run.stderr + run.stdout
    other = tmp_path / "other"
    args = ["--contract", str(small), "--output", str(other), "--task", "t", "--codec", "vp9"]
    run = subprocess.run(
        [*cli, "bag2dataset", str(bag), *args],
        capture_output=True,
        check=False,
        text=True,
        timeout=120,
    )
    assert run.returncode == 2 and "--codec 'vp9' is not one of libsvtav1, h264, h264-ultrafast" in run.stderr
    assert not other.exists()
    run = subprocess.run([*cli, "bag2dataset", "--help"], capture_output=True, check=False, text=True, timeout=120)
    assert f"{DEFAULT_CODEC} (default" in " ".join(run.stdout.split())  # the help names the converter's default
