"""`lerobot-ros demo` end to end: every stage through the real nodes (record -> train -> eval -> report), artifacts
and report agree, and a later run resumes instead of starting over (the full-size demo is `make demo`, not a test).

The default run has the quick variant: one short demonstration, 4 training steps, a 1 s evaluation episode, then a
resumed training run (the resume check that costs no sim stack). The tiny variant (two demonstrations, 20 steps, a
4 s evaluation, every stage resumed: five demo runs, 2-8 min) is marked `demo_e2e` and runs with `make test-demo`
(or pytest -m demo_e2e, or LEROBOT_ROS_DEMO_E2E=1)."""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path

import pytest
from PIL import Image

from lerobot_dataset import DatasetReader
from lerobot_dataset.validate import validate
from lerobot_ros.testing import venv_script

pytestmark = [pytest.mark.ros, pytest.mark.slow]
REPO = Path(__file__).resolve().parents[2]


def _demo(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    run = subprocess.run(
        [venv_script("lerobot-ros"), "demo", *args],
        env=env,
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert run.returncode == 0, run.stdout[-4000:] + run.stderr[-4000:]
    return run


def _check_stages(work: Path, first: subprocess.CompletedProcess[str], episodes: int, steps: int) -> list[int]:
    """What one `demo all` left in `work` (`episodes` demonstrations, `steps` steps, one evaluation episode);
    returns the seeds recorded."""
    # Stage 1: a valid dataset with the expert's episodes, the block/goal state and the camera.
    dataset = work / "dataset"
    assert validate(dataset) == []
    reader = DatasetReader(dataset)
    assert reader.num_episodes == episodes
    assert {"observation.state", "observation.environment_state", "action", "observation.images.front"} <= set(
        reader.features
    )
    recorded = [json.loads(line) for line in (work / "record_episodes.jsonl").read_text().splitlines()]
    # Expert episode i runs seed i; one that starts before the recorder is up is not recorded (and not labelled).
    seeds = [r["seed"] for r in recorded]
    assert seeds == sorted(set(seeds)) and seeds[0] >= 0 and all(r["saved"] for r in recorded)
    assert sum(r["frames"] for r in recorded) == len(reader)

    # Stage 2: a checkpoint at the asked step, with its log.
    checkpoint = work / "train/checkpoints/last/pretrained_model"
    assert json.loads((checkpoint / "lerobot_ros.json").read_text())["step"] == steps
    config = json.loads((checkpoint / "config.json").read_text())
    assert config["input_features"].keys() == {"observation.state", "observation.environment_state"}

    # Stage 3: the policy ran through the policy node and executor on an unseen seed.
    evaluation = json.loads((work / "eval/eval.json").read_text())
    assert evaluation["episodes"] == 1 and evaluation["seeds"] == [1000]
    episode = evaluation["per_episode"][0]
    assert episode["end"] in ("success", "time_limit") and episode["chunks"] > 0
    assert evaluation["chunks"] == episode["chunks"] and evaluation["chunk_latency_s"]["p50"] > 0
    assert evaluation["executor"]["chunks_accepted"] > 0 and "tick_jitter_p99_ms" in evaluation["executor"]
    assert evaluation["expert_per_seed"][0]["seed"] == 1000
    gif = Image.open(work / "eval/episode_000.gif")
    assert gif.n_frames > 5 and gif.size == (320, 240)

    # Stage 4: the report shows the same numbers, with its plots next to it.
    report = (work / "report/report.md").read_text()
    assert f"{reader.num_episodes} episodes, {len(reader)} frames" in report
    assert f"policy success: {evaluation['successes']}/1" in report
    assert f"on the same seeds: {evaluation['expert_successes']}/1" in report
    for name in ("training_loss.png", "success.png", "latency.png", "episode_000.gif"):
        assert f"({name})" in report and (work / "report" / name).stat().st_size > 0
    assert f"report    {work / 'report/report.md'}" in first.stdout
    return seeds


@pytest.mark.timeout(600)  # two demo runs, one sim stack each for record and eval (about 1 min on a quiet machine)
def test_demo_quick_records_trains_deploys_and_reports_then_resumes_training(
    sim_env: dict[str, str], tmp_path: Path
) -> None:
    pytest.importorskip("mujoco", reason="the SO-101 simulation needs mujoco (scripts/setup.sh installs it)")
    work = tmp_path / "demo"
    # One demonstration cut at 2 s (60 frames), 4 steps of 4, one 1 s evaluation episode (30 steps: GIF of 15).
    quick = ["--workdir", str(work), "--episodes", "1", "--max-episode-s", "2", "--train-steps", "4"]
    quick += ["--batch-size", "4", "--eval-episodes", "1", "--eval-max-s", "1"]
    first = _demo(sim_env, "all", *quick)
    _check_stages(work, first, episodes=1, steps=4)

    # Resume: more steps continue the run from its last checkpoint instead of starting over.
    longer = _demo(sim_env, "train", "--workdir", str(work), "--train-steps", "6", "--batch-size", "4").stdout
    assert "resuming" in longer and "from step 4 to 6" in longer
    assert json.loads((work / "train/checkpoints/last/pretrained_model/lerobot_ros.json").read_text())["step"] == 6


@pytest.mark.demo_e2e
@pytest.mark.timeout(1200)  # five demo runs, each starting a sim stack (about 2-4 minutes on a quiet machine)
def test_demo_records_trains_deploys_and_reports_then_resumes(sim_env: dict[str, str], tmp_path: Path) -> None:
    pytest.importorskip("mujoco", reason="the SO-101 simulation needs mujoco (scripts/setup.sh installs it)")
    work = tmp_path / "demo"
    tiny = ["--workdir", str(work), "--episodes", "2", "--train-steps", "20", "--batch-size", "8"]
    tiny += ["--eval-episodes", "1", "--eval-max-s", "4"]
    first = _demo(sim_env, "all", *tiny)
    seeds = _check_stages(work, first, episodes=2, steps=20)
    dataset = work / "dataset"

    # Resume: a second run finds every stage done; more steps or episodes add just the missing work.
    again = _demo(sim_env, "all", *tiny).stdout
    assert "already holds 2 episodes" in again and "is at step 20" in again and "already evaluated" in again
    longer = _demo(sim_env, "train", "--workdir", str(work), "--train-steps", "30").stdout
    assert "resuming" in longer and "from step 20 to 30" in longer
    assert json.loads((work / "train/checkpoints/last/pretrained_model/lerobot_ros.json").read_text())["step"] == 30
    grown = _demo(sim_env, "record", "--workdir", str(work), "--episodes", "3").stdout
    assert f"(resuming after the 2 already there), seeds from {seeds[-1] + 1}" in grown
    assert DatasetReader(dataset).num_episodes == 3 and validate(dataset) == []
    recorded = [json.loads(line) for line in (work / "record_episodes.jsonl").read_text().splitlines()]
    assert [r["seed"] for r in recorded][:2] == seeds and recorded[2]["seed"] > seeds[-1]
    assert re.search(r"record: .*: 3 episodes", grown)
