"""`lerobot-ros demo eval --num-envs N`: the demo's evaluation stage in lockstep on in-process sims (no ROS)."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
import torch
import yaml

from lerobot_eval.demo.evaluate import evaluate
from lerobot_eval.demo.report import build_report
from lerobot_eval.demo.workspace import ENV_STATE, STATE, DemoLayout, DemoSettings, read_jsonl

REPO = Path(__file__).resolve().parents[2]
CONTRACT = REPO / "config" / "contracts" / "so101_sim.yaml"


def _demo_checkpoint(layout: DemoLayout) -> None:
    """A random ACT of the demo's inputs where the train stage leaves its last checkpoint (step 20)."""
    from lerobot_training.checkpoint import save_policy
    from lerobot_training.features import FeatureType, PolicyFeature
    from lerobot_training.policies.act import ACTConfig, ACTPolicy

    contract = yaml.safe_load(CONTRACT.read_text())
    features = contract["features"]
    torch.manual_seed(0)
    inputs = {
        STATE: PolicyFeature(FeatureType.STATE, (6,), tuple(features[STATE]["names"])),
        ENV_STATE: PolicyFeature(FeatureType.ENV, (6,), tuple(features[ENV_STATE]["names"])),
    }
    outputs = {"action": PolicyFeature(FeatureType.ACTION, (6,), tuple(features["action"]["names"]))}
    config = ACTConfig(
        input_features=inputs, output_features=outputs, chunk_size=10, n_action_steps=10, dim_model=32, n_heads=2,
        dim_feedforward=64, n_encoder_layers=1, n_decoder_layers=1, use_vae=False,
    )  # fmt: skip
    stats = {key: {"mean": torch.zeros(6), "std": torch.full((6,), 20.0)} for key in (STATE, ENV_STATE, "action")}
    stats = {k: {**v, "min": v["mean"] - 60, "max": v["mean"] + 60} for k, v in stats.items()}
    save_policy(layout.checkpoint, ACTPolicy(config, stats), fps=30, contract=contract, extra={"step": 20})


@pytest.mark.extended  # test_parallel_eval.py proves the lockstep episodes equal the serial ones
def test_demo_eval_on_two_envs_writes_the_rows_the_report_shows(tmp_path: Path) -> None:
    layout = DemoLayout(tmp_path / "demo")
    _demo_checkpoint(layout)
    settings = DemoSettings(eval_episodes=3, eval_seed=1000, eval_max_s=0.5, gif_episodes=1)
    lines: list[str] = []
    summary = evaluate(layout, settings, lines.append, num_envs="2")
    rows = read_jsonl(layout.eval_log)
    assert [(r["episode"], r["seed"], r["mode"]) for r in rows] == [(i, 1000 + i, "lockstep, 2 envs") for i in range(3)]
    assert all(r["duration_s"] == 0.5 and r["end"] == "time_limit" and r["chunks"] > 0 for r in rows)
    assert (
        summary["mode"] == ["lockstep, 2 envs"] and summary["episodes"] == 3 and summary["seeds"] == [1000, 1001, 1002]
    )
    assert (layout.eval / "episode_000.gif").stat().st_size > 0 and summary["gifs"] == ["episode_000.gif"]
    assert json.loads(layout.eval_summary.read_text())["expert_success_rate"] >= 0.0
    [run] = summary["runs"]
    assert (run["mode"], run["envs"], run["episodes"]) == ("lockstep, 2 envs", 2, 3) and run["wall_s"] > 0
    assert run["episodes_per_minute"] == pytest.approx(60 * 3 / run["wall_s"], rel=0.01)
    path, _ = build_report(layout)
    report = path.read_text()
    assert "## 3. Evaluation in lockstep, 2 envs in-process sims" in report
    rate = f"{run['episodes_per_minute']:.1f} episodes/min"
    assert f"- mode: lockstep, 2 envs: 3 episodes in {run['wall_s']:.0f} s = {rate}" in report
    # A second run finds every episode done.
    evaluate(layout, settings, lines.append, num_envs="2")
    assert len(read_jsonl(layout.eval_log)) == 3 and any("nothing to run" in line for line in lines)


def test_through_ros_without_num_envs_is_one_line(tmp_path: Path) -> None:
    import argparse

    from lerobot_eval.demo.command import DEMO
    from lerobot_ros.command import CommandError

    layout = DemoLayout(tmp_path / "demo")
    message = r"^--through-ros runs several robots at once: give --num-envs N \(or --num-envs auto\)$"
    with pytest.raises(CommandError, match=message):
        evaluate(layout, DemoSettings(), print, num_envs=None, through_ros=True)
    parser = argparse.ArgumentParser()
    DEMO.add_arguments(parser)
    for verb in ("eval", "all"):  # refused before `all` records anything
        args = parser.parse_args([verb, "--workdir", str(tmp_path / verb), "--through-ros"])
        with pytest.raises(CommandError, match=message):
            DEMO.run(args)
        assert not (tmp_path / verb / "dataset").exists()
    args = parser.parse_args(["eval", "--workdir", str(tmp_path / "x"), "--num-envs", "100000", "--through-ros"])
    assert (args.num_envs, args.through_ros) == ("100000", True)


@pytest.mark.ros
@pytest.mark.parallel_eval
@pytest.mark.skipif(
    os.environ.get("LEROBOT_ROS_PARALLEL_EVAL") != "1",
    reason="about 2 min: LEROBOT_ROS_PARALLEL_EVAL=1 (or -m parallel_eval) runs it",
)
def test_demo_eval_through_ros_on_two_robots_reports_its_mode(tmp_path: Path, ros_domain: int) -> None:
    layout = DemoLayout(tmp_path / "demo")
    _demo_checkpoint(layout)
    settings = DemoSettings(eval_episodes=3, eval_seed=1000, eval_max_s=1.0, gif_episodes=0)
    lines: list[str] = []
    summary = evaluate(layout, settings, lines.append, num_envs="2", through_ros=True)
    rows = read_jsonl(layout.eval_log)
    mode = "real time through ROS, 2 robots"
    assert [(r["episode"], r["seed"], r["mode"]) for r in rows] == [(i, 1000 + i, mode) for i in range(3)]
    assert {r["robot"] for r in rows} == {"/robot_0", "/robot_1"}
    assert all(r["end"] == "time_limit" and r["chunks"] > 0 for r in rows)  # a random policy: no success
    [run] = summary["runs"]
    assert (run["mode"], run["envs"], run["episodes"]) == (mode, 2, 3) and run["episodes_per_minute"] > 0
    path, _ = build_report(layout)
    assert f"- mode: {mode}: 3 episodes in" in path.read_text()


def test_record_speed_and_realtime_reach_the_launch_arguments(tmp_path: Path, monkeypatch) -> None:
    """`demo record --record-speed F` caps the lockstep recording at F (0 = unlimited, the default; 1 = real time);
    `demo eval --realtime` asks the stack for SCHED_FIFO; a negative speed is one line."""
    import argparse

    from lerobot_eval.demo import command
    from lerobot_eval.demo import evaluate as evaluate_module
    from lerobot_eval.demo import record as record_module
    from lerobot_eval.demo.command import DEMO
    from lerobot_ros.command import CommandError

    parser = argparse.ArgumentParser()
    DEMO.add_arguments(parser)
    assert command._settings(parser.parse_args(["record"])).record_real_time_factor == 0.0
    assert command._settings(parser.parse_args(["record", "--record-speed", "1"])).record_real_time_factor == 1.0
    assert command._settings(parser.parse_args(["eval"])).eval_realtime is True
    assert command._settings(parser.parse_args(["eval", "--no-realtime"])).eval_realtime is False
    with pytest.raises(CommandError, match=r"^--record-speed must be >= 0 \(0 = unlimited\), got -1.0$"):
        command._settings(parser.parse_args(["record", "--record-speed", "-1"]))

    seen: list[dict[str, str]] = []

    class Stack:
        def __init__(self, _file: Path, arguments: dict[str, str], _log: Path) -> None:
            seen.append(arguments)
            raise RuntimeError("stop here")

    for module in (record_module, evaluate_module):
        monkeypatch.setattr(module, "LaunchedStack", Stack)
    layout = DemoLayout(tmp_path / "demo")
    with pytest.raises(RuntimeError, match="stop here"):
        record_module._record_more(layout, DemoSettings(record_real_time_factor=0.0), 0, 0, 1, print, 1.0)
    with pytest.raises(RuntimeError, match="stop here"):
        evaluate_module._run_episodes(layout, DemoSettings(eval_realtime=True), (1, "x"), 0, print)
    assert seen[0]["lockstep_real_time_factor"] == "0.0" and seen[0]["mode"] == "lockstep"
    assert seen[1]["realtime"] == "true"
