"""bag2dataset --jobs under load: the jobs and encoder threads chosen from the idle cores (pure decision), the
conversion running what it chose, and the encoders opened with the capped threads."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from lerobot_bags.convert import ConvertOptions
from lerobot_bags.parallelism import choose_parallelism, measure_idle_cores, usable_cores
from lerobot_bags.pipeline import convert_bags
from lerobot_bags.synthetic import SyntheticBagSpec, contract_for
from lerobot_dataset.staging import EpisodeStager
from lerobot_dataset.video import VIDEO_ENCODINGS, encoder_thread_options

MakeBag = Callable[..., Path]


def test_idle_two_cores_run_two_jobs_with_one_encoder_thread_per_camera() -> None:
    choice = choose_parallelism(2, bags=10, cameras=2, cores=2, idle_cores=1.9)
    assert (choice.jobs, choice.encoder_threads, choice.note) == (2, 1, None)


def test_four_busy_loops_on_two_cores_run_one_job_and_say_why() -> None:
    """The measured case: --jobs 2 at load 6-11 ran at 0.45-0.59x the speed of --jobs 1."""
    choice = choose_parallelism(2, bags=10, cameras=2, cores=2, idle_cores=0.05)
    assert (choice.jobs, choice.encoder_threads) == (1, 1)
    assert choice.note == (
        "--jobs 2 runs as --jobs 1: 0.1 of the 2 core(s) this process may use are idle "
        "(more jobs than idle cores convert slower)"
    )
    assert "\n" not in choice.note


@pytest.mark.parametrize(
    ("idle", "jobs"), [(0.0, 1), (0.6, 1), (1.4, 1), (1.5, 2), (1.6, 2), (2.0, 2), (7.0, 2), (float("nan"), 1)]
)
def test_jobs_follow_the_idle_cores_rounded(idle: float, jobs: int) -> None:
    assert choose_parallelism(2, bags=4, cameras=2, cores=2, idle_cores=idle).jobs == jobs


def test_more_jobs_than_cores_or_bags() -> None:
    more = choose_parallelism(8, bags=10, cameras=2, cores=2, idle_cores=2.0)
    assert more.jobs == 2 and more.note is not None and "may use 2 core(s)" in more.note
    few_bags = choose_parallelism(4, bags=1, cameras=2, cores=8, idle_cores=8.0)
    assert (few_bags.jobs, few_bags.note) == (1, None)  # one bag is one job: nothing was held back
    assert few_bags.encoder_threads == 4


@pytest.mark.parametrize("cores", [1, 2, 3, 4, 8, 16, 64])
@pytest.mark.parametrize("requested", [1, 2, 3, 8])
@pytest.mark.parametrize("cameras", [0, 1, 2, 3])
def test_jobs_times_cameras_times_threads_fit_the_idle_cores(cores: int, requested: int, cameras: int) -> None:
    for tenth in range(0, 10 * cores + 1, 3):
        idle = tenth / 10
        choice = choose_parallelism(requested, bags=20, cameras=cameras, cores=cores, idle_cores=idle)
        free = round(idle + 1e-9)
        assert 1 <= choice.jobs <= max(1, min(requested, free))
        assert choice.encoder_threads >= 1
        if choice.encoder_threads > 1:
            assert choice.jobs * max(cameras, 1) * choice.encoder_threads <= free
        assert (choice.note is None) == (choice.jobs == min(requested, 20))


def test_bad_arguments() -> None:
    with pytest.raises(ValueError, match="requested"):
        choose_parallelism(0, bags=1, cameras=1, cores=2, idle_cores=2.0)
    with pytest.raises(ValueError, match="cores"):
        choose_parallelism(1, bags=1, cameras=1, cores=0, idle_cores=2.0)


def test_measured_idle_cores_are_within_the_usable_cores() -> None:
    idle = measure_idle_cores(0.05)
    assert 0.0 <= idle <= usable_cores() + 1e-6


def test_encoder_threads_reach_the_encoder_options() -> None:
    """SVT-AV1 takes its parallelism as lp (FFmpeg does not pass the thread count on); libx264 its thread count;
    h264-ultrafast stays at its one thread."""
    av1 = VIDEO_ENCODINGS["libsvtav1"]
    assert encoder_thread_options(av1, None) == (dict(av1.options), None)
    options, count = encoder_thread_options(av1, 1)
    assert options == {**av1.options, "svtav1-params": "lp=1"} and count is None
    with_params = av1.__class__(**{**av1.__dict__, "options": {**av1.options, "svtav1-params": "tune=0:lp=8"}})
    assert encoder_thread_options(with_params, 3)[0]["svtav1-params"] == "tune=0:lp=3"
    assert encoder_thread_options(VIDEO_ENCODINGS["h264"], 2) == (dict(VIDEO_ENCODINGS["h264"].options), 2)
    assert encoder_thread_options(VIDEO_ENCODINGS["h264-ultrafast"], 4)[1] == 1
    with pytest.raises(ValueError, match="threads"):
        encoder_thread_options(av1, 0)


def _bags(make_bag: MakeBag, count: int) -> list[Path]:
    return [make_bag(f"bag{i}", seed=i, height=48, width=64) for i in range(count)]


def test_conversion_runs_one_job_when_no_core_is_idle(
    make_bag: MakeBag, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """--jobs 2 with no idle core converts serially, says so in one line, and opens its AV1 encoders with lp=1."""
    bags = _bags(make_bag, 2)
    contract = contract_for(SyntheticBagSpec(height=48, width=64), camera_dtype="video")
    lines: list[str] = []
    opened: list[dict[str, str]] = []
    real_start = EpisodeStager._start_camera

    def spy(self: EpisodeStager, key: str, spec: Any) -> Any:
        camera = real_start(self, key, spec)
        opened.append(camera.encoder.options)
        return camera

    monkeypatch.setattr(EpisodeStager, "_start_camera", spy)
    result = convert_bags(
        bags,
        ConvertOptions(contract=contract, task="t"),
        root=tmp_path / "ds",
        repo_id="test/jobs",
        codec="libsvtav1",
        jobs=2,
        on_status=lines.append,
        idle_cores=0.0,
    )
    assert result.parallelism is not None
    assert (result.parallelism.jobs, result.parallelism.encoder_threads) == (1, 1)
    assert len(result.episodes) == 2
    assert lines == [result.parallelism.note] and lines[0].startswith("--jobs 2 runs as --jobs 1: 0.0 of the ")
    assert opened and all(options["svtav1-params"] == "lp=1" for options in opened)
    assert result.as_dict()["parallelism"]["jobs"] == 1


def test_exact_jobs_runs_the_workers_asked_for(make_bag: MakeBag, tmp_path: Path) -> None:
    bags = _bags(make_bag, 3)
    contract = contract_for(SyntheticBagSpec(height=48, width=64), camera_dtype="video")
    lines: list[str] = []
    result = convert_bags(
        bags,
        ConvertOptions(contract=contract, task="t"),
        root=tmp_path / "ds",
        repo_id="test/jobs",
        codec="h264",
        jobs=2,
        on_status=lines.append,
        idle_cores=0.0,
        exact_jobs=True,
    )
    assert result.parallelism is not None and result.parallelism.jobs == 2
    assert lines == [] and len(result.episodes) == 3
    # Worker processes report their own CPU time: the bags were converted in workers.
    assert all("worker_cpu_s" in bag for bag in result.bags)
