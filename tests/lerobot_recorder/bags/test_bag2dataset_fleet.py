"""Fleet conversion on datatrove (issue 20 item 3): `bag2dataset --executor local` equals a single-process
conversion of the same sorted bags; a worker SIGKILLed mid-shard or a task that crashes is reported, the other
tasks finish, and the same command again resumes only what is unfinished; the Slurm job scripts."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from functools import partial
from pathlib import Path

import dill
import numpy as np
import pyarrow.parquet as pq
import pytest
import yaml
from fleet_faults import CrashOnce
from test_bag2dataset_resume import _data_rows

from lerobot_bags.convert import ConvertOptions, SplitRule
from lerobot_bags.errors import BagError
from lerobot_bags.fleet import (
    FleetJob,
    SlurmSettings,
    run_local,
    shard_bags,
    slurm_executors,
    slurm_script,
    task_state,
)
from lerobot_bags.pipeline import DEFAULT_CODEC  # one encoder thread: frames reproducible bit for bit
from lerobot_bags.synthetic import SyntheticBagSpec, contract_for
from lerobot_dataset import DatasetReader
from lerobot_dataset.validate import validate
from lerobot_ros.cli import main as cli_main

MakeBag = Callable[..., Path]
SPEC = SyntheticBagSpec(duration_s=0.6, height=48, width=64, noise=3.0)


def _bags(make_bag: MakeBag, count: int, **overrides: object) -> list[Path]:
    fields = {"duration_s": 0.6, "height": 48, "width": 64, "noise": 3.0, **overrides}
    # Created in reverse name order: the fleet sorts by path, whatever order they are given in.
    return [make_bag(f"bag{i:02d}", seed=i, **fields) for i in reversed(range(count))]


def _contract(tmp_path: Path) -> Path:
    path = tmp_path / "contract.yaml"
    path.write_text(yaml.safe_dump(contract_for(SPEC, camera_dtype="video").to_dict()))
    return path


def _args(bags: list[Path], contract: Path, root: Path, *extra: str) -> list[str]:
    return [
        "bag2dataset",
        *map(str, bags),
        *("--contract", str(contract), "--output", str(root), "--task", "pick", "--codec", DEFAULT_CODEC, "--quiet"),
        *extra,
    ]


def _single_process(bags: list[Path], contract: Path, root: Path) -> None:
    assert cli_main(_args(sorted(bags), contract, root)) == 0


def _job(bags: list[Path], tmp_path: Path, root: Path, tasks: int) -> FleetJob:
    contract = contract_for(SPEC, camera_dtype="video")
    options = ConvertOptions(contract=contract, stamp=contract.stamp, task="pick", split=SplitRule.parse("one-per-bag"))
    return FleetJob.create(bags, options, root, tasks=tasks, repo_id=f"local/{root.name}", codec=DEFAULT_CODEC)


def _same_episodes(clean: Path, fleet: Path) -> None:
    """Episode for episode equal: frames, episode table (the merge writes its columns in another order), tasks,
    stats, info (but the file size limits the merge states), decoded video, validate, one source record each."""
    assert _data_rows(clean) == _data_rows(fleet)
    episodes_clean, episodes_fleet = (pq.read_table(r / "meta/episodes") for r in (clean, fleet))
    assert sorted(episodes_clean.column_names) == sorted(episodes_fleet.column_names)
    assert episodes_clean.equals(episodes_fleet.select(episodes_clean.column_names))
    assert (clean / "meta/tasks.parquet").read_bytes() == (fleet / "meta/tasks.parquet").read_bytes()
    contracts = [json.loads((r / "meta/contract.json").read_text()) for r in (clean, fleet)]
    assert contracts[0] == contracts[1]
    stats_clean, stats_fleet = (json.loads((r / "meta/stats.json").read_text()) for r in (clean, fleet))
    assert stats_clean.keys() == stats_fleet.keys()
    for key, values in stats_clean.items():
        for stat, value in values.items():
            np.testing.assert_allclose(stats_fleet[key][stat], value, rtol=1e-9, atol=1e-12, err_msg=f"{key} {stat}")
    info_clean, info_fleet = (json.loads((r / "meta/info.json").read_text()) for r in (clean, fleet))
    for info in (info_clean, info_fleet):
        for key in ("data_files_size_in_mb", "video_files_size_in_mb"):
            info.pop(key, None)
    assert info_clean == info_fleet
    with DatasetReader(clean) as a, DatasetReader(fleet) as b:
        assert len(a) == len(b) and a.num_episodes == b.num_episodes
        for i in range(len(a)):
            np.testing.assert_array_equal(a[i]["observation.images.front"], b[i]["observation.images.front"])
    assert validate(fleet) == []
    records = json.loads((fleet / "meta/lerobot_ros_sources.json").read_text())["episodes"]
    assert [e["episode_index"] for e in records] == list(range(b.num_episodes))
    assert [e["bag_hash"] for e in records] == [
        e["bag_hash"] for e in json.loads((clean / "meta/lerobot_ros_sources.json").read_text())["episodes"]
    ]


def test_shards_are_contiguous_runs_of_the_sorted_bags() -> None:
    bags = [Path(f"/b/{name}") for name in ("e", "a", "d", "c", "b")]
    assert shard_bags(bags, 2) == [[Path("/b/a"), Path("/b/b"), Path("/b/c")], [Path("/b/d"), Path("/b/e")]]
    assert shard_bags(bags, 7)[5:] == [[], []]
    assert [bag for shard in shard_bags(bags, 3) for bag in shard] == sorted(bags)
    with pytest.raises(ValueError, match="tasks"):
        shard_bags(bags, 0)


def test_fleet_equals_single_process_conversion(make_bag: MakeBag, tmp_path: Path) -> None:
    """5 bags, 3 tasks, 2 workers: the merged dataset equals the single-process run over the sorted bags."""
    bags = _bags(make_bag, 5)
    contract = _contract(tmp_path)
    _single_process(bags, contract, tmp_path / "clean")
    fleet = tmp_path / "fleet"
    assert cli_main(_args(bags, contract, fleet, "--executor", "local", "--tasks", "3", "--workers", "2")) == 0
    shards = fleet.parent / "fleet.shards"
    assert sorted(p.name for p in (shards / "completions").iterdir()) == ["00000", "00001", "00002"]
    assert not (shards / "datasets").exists()  # dropped after the merge (--keep-shards keeps them)
    sources = json.loads((fleet / "meta/lerobot_ros_sources.json").read_text())
    assert [Path(e["bag"]).name for e in sources["episodes"]] == [f"bag{i:02d}" for i in range(5)]
    _same_episodes(tmp_path / "clean", fleet)
    # The same command again: every task completed, the merge is done; nothing is converted twice.
    assert cli_main(_args(bags, contract, fleet, "--executor", "local", "--tasks", "3", "--workers", "2")) == 0
    with DatasetReader(fleet) as reader:
        assert reader.num_episodes == 5


def _sigint_ignored() -> None:
    signal.signal(signal.SIGINT, signal.SIG_IGN)


@pytest.mark.parametrize("sigint", ["default", pytest.param("ignored", marks=pytest.mark.extended)])
def test_worker_killed_mid_shard_is_reported_and_the_rerun_completes(
    make_bag: MakeBag, tmp_path: Path, sigint: str
) -> None:
    """SIGKILL the datatrove worker converting a shard after its first episode is committed: the command ends
    with the task named (the others finish), and the same command again resumes that shard: no episode twice,
    none lost. Also with SIGINT ignored, as a shell script's `bag2dataset ... &` or a CI runner starts it: the
    watchdog interrupted the wait with SIGINT, so that run hung forever (seen in a clean-clone run started so)."""
    bags = _bags(make_bag, 6, duration_s=1.5)
    contract = _contract(tmp_path)
    fleet = tmp_path / "fleet"
    args = _args(bags, contract, fleet, "--executor", "local", "--tasks", "2", "--workers", "2")
    job = _job(bags, tmp_path, fleet, 2)
    proc = subprocess.Popen(
        [sys.executable, "-m", "lerobot_ros.cli", *args], stdout=subprocess.PIPE, text=True,
        preexec_fn=_sigint_ignored if sigint == "ignored" else None,  # noqa: PLW1509 - one signal() in the child
    )  # fmt: skip
    killed = None
    while killed is None and proc.poll() is None:
        for rank in range(2):
            info = job.shard_root(rank) / "meta" / "info.json"
            running = job.records / "running" / f"{rank:05d}"
            started = task_state(job, rank) == "running" and info.is_file()
            if started and json.loads(info.read_text()).get("total_episodes", 0) >= 1:
                killed = rank
                os.kill(int(running.read_text()), signal.SIGKILL)
                break
        time.sleep(0.02)
    try:  # under pytest-timeout's 300 s, so that a hung conversion is killed here rather than left running
        out, _ = proc.communicate(timeout=240)
    except subprocess.TimeoutExpired:
        proc.kill()
        raise AssertionError(f"the conversion still ran 240 s after task {killed}'s worker was killed") from None
    assert killed is not None, f"the conversion ended before a shard had an episode: {out}"
    assert proc.returncode == 1, out
    assert f"task {killed} FAILED" in out and "died" in out, out
    assert task_state(job, 1 - killed) == "completed"
    assert not fleet.exists()  # nothing merged while a task is unfinished
    assert cli_main(args) == 0
    _single_process(bags, contract, tmp_path / "clean")
    _same_episodes(tmp_path / "clean", fleet)


def test_a_crashing_task_is_reported_the_rest_finish_and_the_rerun_picks_it_up(
    make_bag: MakeBag, tmp_path: Path
) -> None:
    bags = _bags(make_bag, 4)
    fleet = tmp_path / "fleet"
    job = _job(bags, tmp_path, fleet, 3)
    step = partial(CrashOnce, rank=1)
    first = run_local(job, 2, step=step)
    assert list(first.failed) == [1] and "injected fault in task 1" in first.failed[1]
    assert [task_state(job, rank) for rank in range(3)] == ["completed", "failed", "completed"]
    assert first.merged is None and not fleet.exists()
    again = run_local(job, 2, step=step)
    assert again.ran == [1] and not again.failed and again.merged is not None
    assert again.merged["episodes"] == 4
    _single_process(bags, _contract(tmp_path), tmp_path / "clean")
    _same_episodes(tmp_path / "clean", fleet)


def test_rerun_with_other_tasks_or_output_is_refused(make_bag: MakeBag, tmp_path: Path) -> None:
    bags = _bags(make_bag, 2)
    fleet = tmp_path / "fleet"
    job = _job(bags, tmp_path, fleet, 2)
    (job.records).mkdir(parents=True)
    (job.records / "plan.json").write_text(json.dumps(_job(bags, tmp_path, fleet, 1).plan()))
    with pytest.raises(BagError, match="other tasks; repeat that command unchanged"):
        run_local(job, 1)
    taken = tmp_path / "taken"
    taken.mkdir()
    with pytest.raises(BagError, match="exists; choose a new --output"):
        run_local(_job(bags, tmp_path, taken, 1), 1)


def test_cli_refuses_options_that_do_not_fit_the_executor(
    make_bag: MakeBag, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    bags = _bags(make_bag, 1)
    contract = _contract(tmp_path)
    cases = {
        ("--tasks", "2"): "only apply with --executor",
        ("--executor", "local", "--append"): "--append does not apply with --executor",
        ("--executor", "local", "--jobs", "2"): "--workers sets how many tasks run at a time",
        ("--executor", "local", "--tasks", "0"): "--tasks 0: give 1..100000 tasks",
        ("--executor", "slurm"): "--executor slurm needs --slurm-partition NAME",
    }
    for extra, message in cases.items():
        assert cli_main(_args(bags, contract, tmp_path / "out", *extra)) != 0
        assert message in capsys.readouterr().err, extra


def test_slurm_job_scripts(make_bag: MakeBag, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The array job (one array task per datatrove task, W at a time) and the merge job datatrove would submit;
    built and read here, never submitted (no Slurm on this machine)."""
    bags = _bags(make_bag, 3)
    fleet = tmp_path / "fleet"
    job = _job(bags, tmp_path, fleet, 3)
    settings = SlurmSettings(partition="cpu", time="02:00:00", cpus_per_task=2, mem_per_cpu_gb=3, workers=2)
    convert_exec, merge_exec = slurm_executors(job, settings)
    script = slurm_script(convert_exec)
    lines = script.splitlines()
    assert lines[0] == "#!/bin/bash"
    for directive in (
        "#SBATCH --array=0-2%2",
        "#SBATCH --partition=cpu",
        "#SBATCH --time=02:00:00",
        "#SBATCH --cpus-per-task=2",
        "#SBATCH --mem-per-cpu=3G",
        "#SBATCH --job-name=bag2dataset",
        "#SBATCH --requeue",
        f"source {Path(sys.prefix) / 'bin' / 'activate'}",
        f"srun  -l -n 1 launch_pickled_pipeline {job.logging_dir / 'executor.pik'}",
    ):
        assert directive in lines or any(line.strip() == directive for line in lines), (directive, script)
    merge_script = slurm_script(merge_exec)
    assert "#SBATCH --array=0-0%1" in merge_script and "--job-name=bag2dataset-merge" in merge_script
    assert str(job.logging_dir / "merge" / "executor.pik") in merge_script
    assert merge_exec.depends is convert_exec and merge_exec.run_on_dependency_fail is False  # afterok
    # What each Slurm task unpickles: the same shard plan.
    loaded = dill.loads(dill.dumps(convert_exec))
    assert loaded.pipeline[0].job.shard(2) == job.shard(2) and loaded.world_size == 3
    contract = _contract(tmp_path)
    extra = ("--executor", "slurm", "--slurm-partition", "cpu", "--tasks", "3", "--workers", "2")
    assert cli_main(_args(bags, contract, fleet, *extra, "--slurm-print-script")) == 0
    assert "#SBATCH --array=0-2%2" in capsys.readouterr().out
    env_path = os.environ.get("PATH", "")
    if any((Path(d) / "sbatch").exists() for d in env_path.split(os.pathsep) if d):
        pytest.skip("sbatch exists here: not submitting a real job from a test")
    assert cli_main(_args(bags, contract, fleet, *extra)) != 0
    assert "sbatch not found" in capsys.readouterr().err


@pytest.mark.extended  # a failing task's isolation: test_a_crashing_task_is_reported_the_rest_finish...
def test_a_bag_that_does_not_fit_the_contract_fails_only_its_task(
    make_bag: MakeBag, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The bag the single-process run would refuse up front refuses only its shard: the other task completes,
    the command names the task and the reason; with the bag replaced, the same command runs that task and
    merges."""
    bags = _bags(make_bag, 4)
    shutil.rmtree(bags[0])  # bag03, in the second shard
    make_bag("bag03", seed=3, duration_s=0.6, height=48, width=64, noise=3.0, cameras=("front",))
    contract = _contract(tmp_path)
    fleet = tmp_path / "fleet"
    args = _args(bags, contract, fleet, "--executor", "local", "--tasks", "2", "--workers", "2")
    assert cli_main(args) == 1
    out = capsys.readouterr().out
    assert "task 1 FAILED (2 bag(s))" in out and "/cameras/wrist/image_raw" in out, out
    assert "task 0 FAILED" not in out and not fleet.exists()
    shutil.rmtree(bags[0])
    make_bag("bag03", seed=3, duration_s=0.6, height=48, width=64, noise=3.0)
    assert cli_main(args) == 0
    assert "1 of 2 task(s) completed before; running 1" in capsys.readouterr().out
    _single_process(bags, contract, tmp_path / "clean")
    _same_episodes(tmp_path / "clean", fleet)


def test_the_merged_sync_report_numbers_episodes_as_the_merged_dataset(make_bag: MakeBag, tmp_path: Path) -> None:
    """4 bags, 4 tasks: each task numbered its one episode 0 in its shard, and the merged sync report kept those
    numbers, so `dataset view` showed episode 0's report for every episode. The merged report's entries carry
    the merged dataset's indices (as the single-process run's), and the view finds each episode's own entry."""
    from lerobot_recorder.view.episode import episode_sync_entry, sync_report_path

    bags = _bags(make_bag, 4)
    contract = _contract(tmp_path)
    _single_process(bags, contract, tmp_path / "clean")
    fleet = tmp_path / "fleet"
    assert cli_main(_args(bags, contract, fleet, "--executor", "local", "--tasks", "4", "--workers", "2")) == 0
    runs = json.loads(sync_report_path(fleet).read_text())["runs"]
    assert [e["episode_index"] for run in runs for e in run["episodes"]] == [0, 1, 2, 3]
    assert [run["shard"]["episode_offset"] for run in runs] == [0, 1, 2, 3]
    sources = json.loads((fleet / "meta/lerobot_ros_sources.json").read_text())["episodes"]
    for index in range(4):
        entry, clean = episode_sync_entry(fleet, index), episode_sync_entry(tmp_path / "clean", index)
        assert entry is not None and clean is not None, index
        assert Path(entry["bag"]).name == Path(clean["bag"]).name == f"bag{index:02d}"
        assert Path(entry["bag"]).resolve() == Path(sources[index]["bag"])
        assert entry["frames"] == clean["frames"]
    # A report whose runs still number episodes per shard (written before the merge renumbered them) names no
    # episode of the merged dataset: the view shows none rather than another episode's.
    stale = {"dataset": str(fleet), "runs": [{"rank": 1, "episodes": [{"episode_index": 0, "bag": "x"}]}]}
    sync_report_path(fleet).write_text(json.dumps(stale))
    assert episode_sync_entry(fleet, 0) is None
