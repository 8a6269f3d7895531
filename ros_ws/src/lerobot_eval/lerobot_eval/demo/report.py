"""Stage 4, `lerobot-ros demo report`: one Markdown page with plots from what the stages left on disk.

report/report.md links training_loss.png (train and validation loss), success.png (policy vs scripted expert
per seed), latency.png (chunk latency and inference time histograms) and the evaluated episode's GIF. It is
rebuilt from the work folder each time, so it always matches the dataset, checkpoint and evaluation there.
"""

from __future__ import annotations

import csv
import shutil
from pathlib import Path
from typing import Any

import numpy as np

from lerobot_eval.demo.workspace import DemoLayout, read_json, read_jsonl
from lerobot_eval.failure_causes import cause_counts

TARGET_SUCCESS = 0.8


def read_training_log(path: Path) -> dict[str, list[tuple[int, float]]]:
    """(step, value) series of log.csv: train loss, validation loss; plus the training time in seconds."""
    series: dict[str, list[tuple[int, float]]] = {"train": [], "val": [], "seconds": []}
    if not path.is_file():
        return series
    elapsed = 0.0
    with path.open(newline="") as handle:
        for row in csv.DictReader(handle):
            step = int(row["step"])
            if row["split"] == "train":
                series["train"].append((step, float(row["loss"])))
                elapsed += float(row.get("data_s") or 0) + float(row.get("compute_s") or 0)
                series["seconds"].append((step, elapsed))
            elif row["split"] == "val" and row.get("loss"):
                series["val"].append((step, float(row["loss"])))
    return series


def _plot_loss(series: dict[str, list[tuple[int, float]]], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6, 3.5))
    for name, style in (("train", "-"), ("val", "o-")):
        if series[name]:
            steps, values = zip(*series[name], strict=True)
            ax.plot(steps, values, style, label=f"{name} loss", markersize=4)
    ax.set_yscale("log")
    ax.set_xlabel("step")
    ax.set_ylabel("loss (L1 + KL weight x KL)")
    ax.set_title("ACT training")
    ax.grid(True, alpha=0.3)
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)


def _plot_success(evaluation: dict[str, Any], expert_by_seed: dict[int, bool], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rows = evaluation["per_episode"]
    fig, (bars, grid) = plt.subplots(1, 2, figsize=(8, 3.2), gridspec_kw={"width_ratios": [1, 2.2]})
    rates = [evaluation["success_rate"], evaluation["expert_success_rate"]]
    bars.bar(["policy", "expert"], rates, color=["tab:blue", "tab:gray"])
    bars.axhline(TARGET_SUCCESS, color="tab:red", linestyle="--", linewidth=1, label="target 80 %")
    bars.set_ylim(0, 1.05)
    bars.set_ylabel("success rate")
    bars.legend(loc="lower right", fontsize=8)
    seeds = [r["seed"] for r in rows]
    policy = [1 if r["success"] else 0 for r in rows]
    expert = [1 if expert_by_seed.get(s, False) else 0 for s in seeds]
    grid.imshow(np.array([policy, expert]), cmap="RdYlGn", vmin=0, vmax=1, aspect="auto")
    grid.set_yticks([0, 1], ["policy", "expert"])
    grid.set_xticks(range(len(seeds)), [str(s) for s in seeds], rotation=90, fontsize=7)
    grid.set_xlabel("evaluation seed (green: success)")
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)


def _plot_latency(chunks: list[dict[str, Any]], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6, 3.2))
    latency = np.array([c["latency_s"] for c in chunks]) * 1e3
    inference = np.array([c["inference_s"] for c in chunks]) * 1e3
    top = max(float(np.percentile(latency, 99.5)), 1.0) if latency.size else 1.0
    bins = np.linspace(0, top, 40)
    ax.hist(latency.clip(max=top), bins=bins.tolist(), alpha=0.7, label="chunk latency (arrival - observation)")
    ax.hist(inference.clip(max=top), bins=bins.tolist(), alpha=0.7, label="inference time")
    ax.set_xlabel("ms")
    ax.set_ylabel("chunks")
    ax.legend(fontsize=8)
    ax.grid(True, alpha=0.3)
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)


def _ms(stats: dict[str, Any], key: str) -> str:
    """A duration in seconds from `stats`, shown in milliseconds."""
    return f"{stats[key] * 1e3:.1f} ms" if key in stats else "n/a"


def _num(stats: dict[str, Any], key: str, digits: int) -> str:
    return f"{float(stats[key]):.{digits}f}" if key in stats else "n/a"


def _execution_section(evaluation: dict[str, Any], chunks: list[dict[str, Any]], out: Path) -> list[str]:
    latency, inference, executor = evaluation["chunk_latency_s"], evaluation["inference_s"], evaluation["executor"]
    lines = [
        "## 4. Chunk execution",
        "",
        "| figure | value |",
        "|---|---|",
        f"| chunks computed on the episodes' observations | {evaluation['chunks']} |",
        f"| chunk latency p50 / p90 / p99 (observation stamp to arrival) | {_ms(latency, 'p50')} / "
        f"{_ms(latency, 'p90')} / {_ms(latency, 'p99')} |",
        f"| inference time mean / p99 | {_ms(inference, 'mean')} / {_ms(inference, 'p99')} |",
        f"| executor starvation (events, total s) | {_num(executor, 'starvation_events', 0)}, "
        f"{_num(executor, 'starvation_s', 2)} |",
        f"| executor tick jitter p50 / p99 (ms) | {_num(executor, 'tick_jitter_p50_ms', 2)} / "
        f"{_num(executor, 'tick_jitter_p99_ms', 2)} |",
        f"| largest target step at a chunk switch / elsewhere (rad) | {_num(executor, 'max_boundary_step', 4)} / "
        f"{_num(executor, 'max_inner_step', 4)} |",
        f"| chunks accepted / rejected by the executor | {_num(executor, 'chunks_accepted', 0)} / "
        f"{_num(executor, 'chunks_rejected', 0)} |",
        "",
        "Chunks arriving while the executor is stopped between episodes (the sim is being reset) count as rejected.",
        "",
    ]
    if chunks:
        _plot_latency(chunks, out / "latency.png")
        lines += ["![latency](latency.png)", ""]
    return lines


def _run_lines(runs: list[dict[str, Any]], modes: list[str]) -> list[str]:
    """Which evaluation mode ran, and each run's episodes per minute (runs.jsonl)."""
    if not runs:  # a work folder evaluated before runs.jsonl existed
        return [f"- mode: {', '.join(modes)}"] if modes else []
    return [
        f"- mode: {run['mode']}: {run['episodes']} episodes in {run['wall_s']:.0f} s = "
        f"{run['episodes_per_minute']:.1f} episodes/min"
        for run in runs
    ]


def build_report(layout: DemoLayout) -> tuple[Path, str]:
    """Write report/report.md and its plots; returns its path and a short text summary for the terminal."""
    out = layout.report
    out.mkdir(parents=True, exist_ok=True)
    dataset = read_json(layout.record_summary)
    evaluation = read_json(layout.eval_summary)
    timings = read_json(layout.timings)
    series = read_training_log(layout.train / "log.csv")
    chunks = read_jsonl(layout.chunk_log)
    lines = ["# lerobot-ros demo: record, train, deploy in simulation", ""]
    summary: list[str] = []
    lines += ["Work folder: `" + str(layout.root) + "`. Rebuild this page with `lerobot-ros demo report`.", ""]
    if timings:
        lines += ["| stage | wall time |", "|---|---|"]
        lines += [f"| {stage} | {seconds / 60:.1f} min |" for stage, seconds in timings.items()]
        lines.append("")

    lines += ["## 1. Demonstrations (scripted expert, recorded by the recorder node)", ""]
    if dataset:
        lines += [
            f"- dataset: `{dataset['dataset']}` ({'valid' if dataset['valid'] else 'INVALID'} LeRobot v3.0)",
            f"- {dataset['episodes']} episodes, {dataset['frames']} frames at {dataset['fps']} fps "
            f"({dataset['duration_s']:.0f} s), {dataset['dropped']} frames dropped by the recorder",
            f"- expert success while recording: {dataset['expert_successes']}/{dataset['expert_episodes']}",
            f"- features: {', '.join('`' + f + '`' for f in dataset['features'])}",
            "- largest per-feature skew within a frame: "
            + ", ".join(f"{k} {v * 1e3:.0f} ms" for k, v in dataset.get("skew_max_s", {}).items()),
            "",
            "| feature | dimension | min | max | mean |",
            "|---|---|---|---|---|",
        ]
        for key, stats in dataset.get("stats", {}).items():
            for i, name in enumerate(stats.get("names") or [str(i) for i in range(len(stats["mean"]))]):
                lines.append(
                    f"| {key} | {name} | {stats['min'][i]:.3g} | {stats['max'][i]:.3g} | {stats['mean'][i]:.3g} |"
                )
        lines.append("")
        summary.append(
            f"dataset   {dataset['dataset']}: {dataset['episodes']} episodes, {dataset['frames']} frames, "
            f"{dataset['dropped']} dropped, {'valid' if dataset['valid'] else 'INVALID'}"
        )
    else:
        lines += ["Not recorded yet (`lerobot-ros demo record`).", ""]

    lines += ["## 2. Training (ACT on CPU)", ""]
    if series["train"]:
        _plot_loss(series, out / "training_loss.png")
        last_step, last_loss = series["train"][-1]
        val = series["val"][-1][1] if series["val"] else None
        seconds = series["seconds"][-1][1]
        lines += [
            f"- {last_step} steps in {seconds / 60:.1f} min of training loop time; final train loss {last_loss:.4g}"
            + (f", validation loss {val:.4g}" if val is not None else ""),
            f"- checkpoint: `{layout.checkpoint}`",
            "",
            "![training loss](training_loss.png)",
            "",
        ]
        summary.append(
            f"training  {last_step} steps, train loss {last_loss:.4g}"
            + (f", val loss {val:.4g}" if val is not None else "")
            + f" ({seconds / 60:.1f} min)"
        )
    else:
        lines += ["Not trained yet (`lerobot-ros demo train`).", ""]

    modes = [m for m in (evaluation or {}).get("mode", []) if m.startswith("lockstep")]
    lines += [
        f"## 3. Evaluation in {' and '.join(modes)} in-process sims (`--num-envs`, no ROS, no real-time effects)"
        if modes
        else "## 3. Deployment: policy node + action executor driving the sim bridge in real time",
        "",
    ]
    if evaluation:
        expert_by_seed = {}
        for row in evaluation.get("expert_per_seed", []):
            expert_by_seed[int(row["seed"])] = bool(row["success"])
        _plot_success(evaluation, expert_by_seed, out / "success.png")
        rate, expert_rate = evaluation["success_rate"], evaluation["expert_success_rate"]
        verdict = "meets" if rate >= TARGET_SUCCESS else "is below"
        lines += [
            f"- **policy success: {evaluation['successes']}/{evaluation['episodes']} = {rate:.0%}** on seeds "
            f"{min(evaluation['seeds'])}..{max(evaluation['seeds'])} (never used for recording); scripted expert "
            f"on the same seeds: {evaluation['expert_successes']}/{evaluation['episodes']} = {expert_rate:.0%}. "
            f"The policy {verdict} the 80 % target.",
            f"- checkpoint step {evaluation['checkpoint_step']}",
            *_run_lines(evaluation.get("runs", []), evaluation.get("mode", [])),
            "",
            "![success](success.png)",
            "",
            "| episode | seed | result | end | duration (s) | chunks | why it failed |",
            "|---|---|---|---|---|---|---|",
        ]
        lines += [
            f"| {r['episode']} | {r['seed']} | {'success' if r['success'] else 'failure'} | {r['end']} | "
            f"{r['duration_s']:.1f} | {r['chunks']} | {'' if r['success'] else r.get('why') or r.get('cause', '')} |"
            for r in evaluation["per_episode"]
        ]
        lines.append("")
        causes = cause_counts(evaluation["per_episode"])
        if causes:
            lines += [
                "Failures by cause (`lerobot_eval.failure_causes`: starvation, late observations and the sim's "
                "real-time factor over each episode, from the nodes' /diagnostics): "
                + ", ".join(f"{cause} {n}" for cause, n in sorted(causes.items())),
                "",
            ]
        summary.append(
            f"policy    success {evaluation['successes']}/{evaluation['episodes']} ({rate:.0%}) vs scripted expert "
            f"{evaluation['expert_successes']}/{evaluation['episodes']} ({expert_rate:.0%}) on the same unseen seeds"
        )
        lines += _execution_section(evaluation, chunks, out)
        latency, inference, executor = evaluation["chunk_latency_s"], evaluation["inference_s"], evaluation["executor"]
        summary.append(
            f"execution chunk latency p50 {_ms(latency, 'p50')}, p99 {_ms(latency, 'p99')}; inference "
            f"{_ms(inference, 'mean')}; starvation {_num(executor, 'starvation_events', 0)} events "
            f"({_num(executor, 'starvation_s', 2)} s); tick jitter p99 {_num(executor, 'tick_jitter_p99_ms', 2)} ms"
        )
        for name in evaluation.get("gifs", []):
            shutil.copyfile(layout.eval / name, out / name)
            lines += [f"Evaluated episode ({name}):", "", f"![episode]({name})", ""]
    else:
        lines += ["Not evaluated yet (`lerobot-ros demo eval`).", ""]
    path = out / "report.md"
    path.write_text("\n".join(lines) + "\n")
    summary.append(f"report    {path}")
    return path, "\n".join(summary)
