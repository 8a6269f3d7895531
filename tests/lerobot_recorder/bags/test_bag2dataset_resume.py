"""Resumable conversion (issue 18): every episode records its source in the dataset; re-running the command of an
interrupted conversion converts only what is missing and ends equal to a clean run; --append refuses a bag the
dataset already holds."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow.parquet as pq
import pytest
import yaml
from bag_helpers import convert

from lerobot_bags.convert import ConvertOptions, SplitRule
from lerobot_bags.errors import BagError
from lerobot_bags.pipeline import DEFAULT_CODEC, convert_bags
from lerobot_bags.sources import HASH_KIND, SOURCES_PATH, SourceLog, bag_hash
from lerobot_bags.synthetic import SyntheticBagSpec, contract_for
from lerobot_dataset import DatasetReader
from lerobot_dataset.validate import validate
from lerobot_ros.cli import main as cli_main

MakeBag = Callable[..., Path]
SPEC = SyntheticBagSpec(duration_s=0.6, height=48, width=64, noise=3.0)


def _bags(make_bag: MakeBag, count: int = 3) -> list[Path]:
    return [make_bag(f"bag{i}", duration_s=0.6, height=48, width=64, noise=3.0, seed=i) for i in range(count)]


def _data_rows(root: Path) -> dict[str, list[Any]]:
    rows: dict[str, list[Any]] = {}
    for path in sorted((root / "data").glob("*/*.parquet")):
        for key, values in pq.read_table(path).to_pydict().items():
            rows.setdefault(key, []).extend(values)
    return rows


def assert_same_dataset(clean: Path, resumed: Path) -> None:
    """Episode for episode the same dataset: frames, episode table, tasks, stats, info, decoded video.

    Both sides must be encoded with DEFAULT_CODEC (one encoder thread per camera): libx264 with its default threads
    is not bit-reproducible under load, so equal frames could not be asserted with "h264"."""
    assert _data_rows(clean) == _data_rows(resumed)
    assert pq.read_table(clean / "meta/episodes").equals(pq.read_table(resumed / "meta/episodes"))
    for name in ("meta/stats.json", "meta/info.json", "meta/tasks.parquet"):
        assert (clean / name).read_bytes() == (resumed / name).read_bytes(), name
    with DatasetReader(clean) as a, DatasetReader(resumed) as b:
        assert len(a) == len(b) and a.num_episodes == b.num_episodes
        for i in range(len(a)):
            np.testing.assert_array_equal(a[i]["observation.images.front"], b[i]["observation.images.front"])
    assert validate(resumed) == []
    sources = json.loads((resumed / SOURCES_PATH).read_text())
    indices = [e["episode_index"] for e in sources["episodes"]]
    assert indices == list(range(len(indices)))  # one record per episode, none twice
    assert [e["bag_hash"] for e in sources["episodes"]] == [
        e["bag_hash"] for e in json.loads((clean / SOURCES_PATH).read_text())["episodes"]
    ]


def _cli_args(bags: list[Path], contract: Path, root: Path, *extra: str) -> list[str]:
    return [
        "bag2dataset",
        *map(str, bags),
        "--contract",
        str(contract),
        "--output",
        str(root),
        "--task",
        "pick",
        "--codec",
        DEFAULT_CODEC,
        "--quiet",
        *extra,
    ]


@pytest.mark.parametrize("jobs", [1, pytest.param(2, marks=pytest.mark.extended)])
def test_killed_conversion_rerun_equals_a_clean_run(
    make_bag: MakeBag, tmp_path: Path, capsys: pytest.CaptureFixture[str], jobs: int
) -> None:
    """SIGKILL after the first episode is printed, then the same command again: nothing twice, nothing missing."""
    bags = _bags(make_bag, 4)
    contract = tmp_path / "contract.yaml"
    contract.write_text(yaml.safe_dump(contract_for(SPEC, camera_dtype="video").to_dict()))
    clean, resumed = tmp_path / "clean", tmp_path / "resumed"
    assert cli_main(_cli_args(bags, contract, clean)) == 0
    capsys.readouterr()
    command = [
        sys.executable,
        "-m",
        "lerobot_ros.cli",
        *_cli_args(bags, contract, resumed, "--jobs", str(jobs), "--exact-jobs"),
    ]
    proc = subprocess.Popen(command, stdout=subprocess.PIPE, text=True)
    assert proc.stdout is not None
    for line in proc.stdout:
        if line.startswith("  episode "):
            break
    proc.kill()
    proc.wait()
    assert cli_main(_cli_args(bags, contract, resumed, "--jobs", str(jobs), "--exact-jobs")) == 0
    out = capsys.readouterr().out
    skipped = [line for line in out.splitlines() if "skipping" in line]
    assert len(skipped) == 1 and "already converted" in skipped[0], out
    already = int(skipped[0].split("skipping ")[1].split()[0])
    assert already >= 1 and already + out.count("  episode ") == 4, out
    assert_same_dataset(clean, resumed)


def _marker_bag(make_bag: MakeBag) -> Path:
    tasks = ((0.0, "reach"), (0.3, "grasp"), (0.6, "lift"))
    return make_bag("marked", duration_s=0.9, height=48, width=64, noise=3.0, task_topic="/task", tasks=tasks)


def test_interrupted_in_the_middle_of_a_bag_resumes_with_its_next_episode(make_bag: MakeBag, tmp_path: Path) -> None:
    """A bag split by markers, interrupted after its first episode: the re-run converts only the later parts."""
    bags = [_marker_bag(make_bag), *_bags(make_bag, 1)]
    contract = contract_for(SPEC, camera_dtype="video")
    options = ConvertOptions(contract=contract, split=SplitRule.parse("marker:/task"), task=None)

    def run(root: Path, on_episode: Callable[[dict[str, Any]], None] | None = None) -> Any:
        return convert_bags(bags[:1], options, root=root, repo_id="t/r", codec=DEFAULT_CODEC, on_episode=on_episode)

    clean = run(tmp_path / "clean")
    assert [e["task"] for e in clean.episodes] == ["reach", "grasp", "lift"]

    def interrupt(entry: dict[str, Any]) -> None:
        raise KeyboardInterrupt  # Ctrl-C right after episode 0 was committed

    with pytest.raises(KeyboardInterrupt):
        run(tmp_path / "resumed", interrupt)
    resumed = run(tmp_path / "resumed")
    assert [e["part"] for e in resumed.already] == [0]
    assert [e["task"] for e in resumed.episodes] == ["grasp", "lift"]
    assert_same_dataset(tmp_path / "clean", tmp_path / "resumed")


def test_rerun_of_a_finished_conversion_converts_nothing(
    make_bag: MakeBag, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    bags = _bags(make_bag, 2)
    contract = tmp_path / "contract.yaml"
    contract.write_text(yaml.safe_dump(contract_for(SPEC, camera_dtype="video").to_dict()))
    root = tmp_path / "ds"
    assert cli_main(_cli_args(bags, contract, root)) == 0
    before = {p: p.read_bytes() for p in root.rglob("*") if p.is_file() and "staging" not in str(p)}
    capsys.readouterr()
    assert cli_main(_cli_args(bags, contract, root)) == 0
    out = capsys.readouterr().out
    assert "skipping 2 already converted episode(s) of 2 bag(s)" in out
    assert "nothing left to convert" in out
    after = {p: p.read_bytes() for p in root.rglob("*") if p.is_file() and "staging" not in str(p)}
    assert before == after


def test_append_refuses_a_bag_the_dataset_holds(
    make_bag: MakeBag, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    a, b = _bags(make_bag, 2)
    contract = contract_for(SPEC, camera_dtype="video")
    root = tmp_path / "ds"
    convert([a], contract, root)
    copy = tmp_path / "copy-of-a"
    shutil.copytree(a, copy)  # another path, same content: the same source
    for again in (a, copy):
        with pytest.raises(BagError, match=r"is already in .* \(episode\(s\) 0\); leave it out, or pass --allow-dup"):
            convert([b, again], contract, root, append=True)
    with DatasetReader(root) as reader:
        assert reader.num_episodes == 1
    assert [e["episode_index"] for e in convert([b], contract, root, append=True).episodes] == [1]
    forced = convert([a], contract, root, append=True, allow_duplicates=True)
    assert [e["episode_index"] for e in forced.episodes] == [2]
    assert validate(root) == []
    contract_file = tmp_path / "contract.yaml"
    contract_file.write_text(yaml.safe_dump(contract.to_dict()))
    assert cli_main(_cli_args([a], contract_file, root, "--append")) == 2
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1 and "--allow-duplicates" in err
    with pytest.raises(BagError, match="hold the same bag"):
        convert([b, copy, a], contract, tmp_path / "new")


def test_rerun_with_other_bags_or_settings_is_refused(make_bag: MakeBag, tmp_path: Path) -> None:
    a, b, c = _bags(make_bag, 3)
    contract = contract_for(SPEC, camera_dtype="video")
    root = tmp_path / "ds"
    convert([a, b], contract, root)
    with pytest.raises(BagError, match=r"episode\(s\) 0-1 come from other bags; pass --append"):
        convert([c], contract, root)
    with pytest.raises(BagError, match=r"episode\(s\) 0-1 were converted with other settings"):
        convert([a, b, c], contract, root, task="place")
    convert([a, b, c], contract, root)  # the same command plus a bag: resumes and adds c
    with DatasetReader(root) as reader:
        assert reader.num_episodes == 3
    recorder_made = tmp_path / "recorded"
    convert([a], contract, recorder_made)
    (recorder_made / SOURCES_PATH).unlink()  # a dataset without source records (the live recorder's)
    with pytest.raises(BagError, match=r"it holds episodes this command did not convert.*; pass --append"):
        convert([a], contract, recorder_made)


def test_source_records(make_bag: MakeBag, tmp_path: Path) -> None:
    bags = _bags(make_bag, 2)
    root = tmp_path / "ds"
    result = convert(bags, contract_for(SPEC, camera_dtype="video"), root)
    data = json.loads((root / SOURCES_PATH).read_text())
    assert data["format"] == 1 and data["hash"] == HASH_KIND
    for bag, record, episode in zip(bags, data["episodes"], result.episodes, strict=True):
        assert record["bag"] == str(bag.resolve()) and record["bag_hash"] == bag_hash(bag)
        assert record["part"] == 0 and record["frames"] == episode["frames"]
        assert record["start_stamp_s"] == episode["start_stamp_s"]
        assert record["end_stamp_s"] == pytest.approx(episode["start_stamp_s"] + episode["frames"] / 30)
        assert record["settings"] in data["settings"]
    assert [b["bag_hash"] for b in data["bags"]] == [bag_hash(b) for b in bags]
    # A record written before a commit that never happened names an index the dataset lacks: it is dropped.
    data["episodes"].append({**data["episodes"][-1], "episode_index": 2, "bag_hash": "x"})
    data["bags"].append({**data["bags"][-1], "bag_hash": "x"})
    (root / SOURCES_PATH).write_text(json.dumps(data))
    log = SourceLog.load(root, total_episodes=2)
    assert [e["episode_index"] for e in log.episodes] == [0, 1]
    assert all(b["bag_hash"] != "x" for b in log.bags)
    (root / SOURCES_PATH).write_text("{not json")
    with pytest.raises(BagError, match=r"cannot be read.*move it away"):
        SourceLog.load(root, total_episodes=2)


def test_bag_hash_reads_samples_not_whole_files(tmp_path: Path) -> None:
    """Cheap on big bags: the name, size and first/last MiB of each file; a change there changes the hash."""
    bag = tmp_path / "bag"
    bag.mkdir()
    (bag / "metadata.yaml").write_text("rosbag2_bagfile_information: {}\n")
    big = bag / "bag_0.mcap"
    big.write_bytes(bytes(5 << 20))
    first = bag_hash(bag)
    with big.open("r+b") as handle:
        handle.seek(3 << 20)
        handle.write(b"x")  # the middle: not read (documented)
    assert bag_hash(bag) == first
    with big.open("r+b") as handle:
        handle.seek((5 << 20) - 10)
        handle.write(b"x")  # the tail (an mcap's summary and chunk CRCs)
    assert bag_hash(bag) != first


def test_rerun_after_a_kill_before_the_first_commit(make_bag: MakeBag, tmp_path: Path) -> None:
    """Killed before its first commit, a conversion leaves a root with no episode (issue 18 #4): the same
    command then converts everything (it used to stop at "already holds a dataset")."""
    from lerobot_dataset import DatasetWriter, feature_specs

    bags = _bags(make_bag, 2)
    contract = contract_for(SPEC, camera_dtype="video")
    root = tmp_path / "ds"
    DatasetWriter.create(
        root, repo_id="t/r", fps=contract.fps, features=feature_specs(contract), video_codec=DEFAULT_CODEC
    ).close()  # the state a SIGKILL between create and the first commit leaves (other repo id, no contract)
    convert(bags, contract, root, codec=DEFAULT_CODEC)
    convert(bags, contract, tmp_path / "clean", codec=DEFAULT_CODEC)
    assert_same_dataset(tmp_path / "clean", root)


def test_interrupted_append_resumes_when_run_again(make_bag: MakeBag, tmp_path: Path) -> None:
    """`--append b c` interrupted after b: the same command again adds only c; another `--append b` is refused."""
    a, b, c = _bags(make_bag, 3)
    contract = contract_for(SPEC, camera_dtype="video")
    options = ConvertOptions(contract=contract, task="pick the cube", split=SplitRule())
    root = tmp_path / "ds"
    convert([a], contract, root, codec=DEFAULT_CODEC)

    def interrupt(entry: dict[str, Any]) -> None:
        raise KeyboardInterrupt

    def append(bags: list[Path], on_episode: Callable[[dict[str, Any]], None] | None = None) -> Any:
        return convert_bags(
            bags, options, root=root, repo_id="t/r", append=True, codec=DEFAULT_CODEC, on_episode=on_episode
        )

    with pytest.raises(KeyboardInterrupt):
        append([b, c], interrupt)
    resumed = append([b, c])
    assert [e["episode_index"] for e in resumed.already] == [1]
    assert [e["bag"] for e in resumed.episodes] == [str(c)]
    convert([a, b, c], contract, tmp_path / "clean", codec=DEFAULT_CODEC)
    assert_same_dataset(tmp_path / "clean", root)
    with pytest.raises(BagError, match=r"is already in .* \(episode\(s\) 1\)"):
        append([b])
