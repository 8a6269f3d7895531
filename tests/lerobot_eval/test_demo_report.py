"""The demo's work folder bookkeeping and its report, from hand-made stage results (no ROS, no training)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from lerobot_eval.demo.evaluate import merge_executor_runs, write_gif
from lerobot_eval.demo.report import build_report
from lerobot_eval.demo.workspace import DemoLayout, append_jsonl, read_jsonl, recorded_episodes, trained_step


def test_jsonl_keeps_complete_lines_only(tmp_path: Path) -> None:
    path = tmp_path / "rows.jsonl"
    append_jsonl(path, [{"a": 1}, {"a": 2}])
    with path.open("a") as out:
        out.write('{"a": 3')  # a crash in the middle of a line
    assert read_jsonl(path) == [{"a": 1}, {"a": 2}]
    assert read_jsonl(tmp_path / "missing.jsonl") == []


def test_stage_progress_is_read_from_disk(tmp_path: Path) -> None:
    layout = DemoLayout(tmp_path)
    assert recorded_episodes(layout) == 0 and trained_step(layout) == 0
    (layout.dataset / "meta").mkdir(parents=True)
    (layout.dataset / "meta" / "info.json").write_text(json.dumps({"total_episodes": 7}))
    layout.checkpoint.mkdir(parents=True)
    (layout.checkpoint / "config.json").write_text(json.dumps({"lerobot_ros": {"step": 300}}))
    assert recorded_episodes(layout) == 7
    assert trained_step(layout) == 0  # no weights yet: the checkpoint is not complete
    (layout.checkpoint / "model.safetensors").write_bytes(b"weights")
    assert trained_step(layout) == 300


def test_executor_figures_of_a_resumed_evaluation_add_up() -> None:
    runs = [
        {"chunks_accepted": 10.0, "starvation_events": 1.0, "starvation_s": 0.5, "tick_jitter_p99_ms": 0.8},
        {"chunks_accepted": 5.0, "starvation_events": 0.0, "starvation_s": 0.0, "tick_jitter_p99_ms": 1.4},
    ]
    merged = merge_executor_runs(runs)
    assert merged == {"chunks_accepted": 15.0, "starvation_events": 1.0, "starvation_s": 0.5, "tick_jitter_p99_ms": 1.4}


def _stage_results(layout: DemoLayout) -> dict[str, object]:
    record = {
        "dataset": str(layout.dataset), "episodes": 2, "frames": 300, "fps": 30, "duration_s": 10.0,
        "features": ["observation.state", "action"], "dropped": 1, "expert_successes": 2, "expert_episodes": 2,
        "skew_max_s": {"action": 0.05}, "valid": True, "problems": [],
        "stats": {"action": {"names": ["a", "b"], "min": [0, 1], "max": [2, 3], "mean": [1, 2], "std": [1, 1]}},
    }  # fmt: skip
    (layout.root / "record.json").write_text(json.dumps(record))
    layout.train.mkdir(parents=True)
    (layout.train / "log.csv").write_text(
        "step,split,loss,data_s,compute_s\n10,train,1.0,0.1,0.9\n20,train,0.5,0.1,0.9\n20,val,0.6,,\n"
    )
    layout.eval.mkdir(parents=True)
    rows = [
        {"episode": 0, "seed": 1000, "success": True, "end": "success", "duration_s": 6.0, "chunks": 12},
        {"episode": 1, "seed": 1001, "success": False, "end": "time_limit", "duration_s": 20.0, "chunks": 40},
    ]
    evaluation = {
        "checkpoint_step": 20, "episodes": 2, "successes": 1, "success_rate": 0.5, "expert_successes": 2,
        "expert_success_rate": 1.0, "seeds": [1000, 1001], "per_episode": rows,
        "expert_per_seed": [{"seed": 1000, "success": True}, {"seed": 1001, "success": True}],
        "chunk_latency_s": {"p50": 0.05, "p90": 0.07, "p99": 0.09}, "inference_s": {"mean": 0.01, "p99": 0.02},
        "chunks": 52, "executor": {"starvation_events": 0.0, "starvation_s": 0.0, "tick_jitter_p99_ms": 0.9},
        "gifs": ["episode_000.gif"],
    }  # fmt: skip
    layout.eval_summary.write_text(json.dumps(evaluation))
    append_jsonl(layout.chunk_log, [{"latency_s": 0.05 + i * 1e-3, "inference_s": 0.01} for i in range(52)])
    write_gif(layout.eval / "episode_000.gif", [np.full((24, 32, 3), i * 20, np.uint8) for i in range(5)], 15.0)
    return evaluation


def test_report_shows_every_stage_with_its_plots(tmp_path: Path) -> None:
    layout = DemoLayout(tmp_path)
    _stage_results(layout)
    path, text = build_report(layout)
    report = path.read_text()
    assert "2 episodes, 300 frames at 30 fps (10 s), 1 frames dropped" in report
    assert "20 steps in 0.0 min of training loop time; final train loss 0.5, validation loss 0.6" in report
    assert "**policy success: 1/2 = 50%**" in report and "same seeds: 2/2 = 100%" in report
    assert "is below the 80 % target" in report
    assert "| 1 | 1001 | failure | time_limit | 20.0 | 40 |" in report
    assert "| chunk latency p50 / p90 / p99 (observation stamp to arrival) | 50.0 ms / 70.0 ms / 90.0 ms |" in report
    for name in ("training_loss.png", "success.png", "latency.png", "episode_000.gif"):
        assert f"({name})" in report and (layout.report / name).stat().st_size > 0
    assert "policy    success 1/2 (50%) vs scripted expert 2/2 (100%)" in text


def test_report_of_a_fresh_work_folder_says_what_to_run(tmp_path: Path) -> None:
    path, _ = build_report(DemoLayout(tmp_path))
    report = path.read_text()
    assert "Not recorded yet (`lerobot-ros demo record`)" in report
    assert "Not trained yet (`lerobot-ros demo train`)" in report
    assert "Not evaluated yet (`lerobot-ros demo eval`)" in report
