"""Episodes per minute of `lerobot-ros eval` against the number of envs (`--num-envs N`), on this machine.

The policy is an ACT of the demo's size and inputs (joints and block/goal positions; random weights, so every
episode runs to `--max-steps`: equal episode lengths, throughput only) and the simulation is the SO-101
pick-and-place with the front camera rendered at 320x240 every step, as `lerobot-ros eval` runs it. Each N runs
the same seeds through `run_evaluation` (what the CLI calls) with `num_envs=N`; the serial evaluation through the
lockstep sim bridge (no `--num-envs`) runs the same seeds first, as the reference. Every run's per-episode
results (steps, returns, SHA-256 of the commanded targets) must equal the serial run's: the bench fails if not.

Reported per run: wall time from the call to the report (worker start-up included), episodes per minute, the
ratio to N=1 of the same bench run, the mean policy batch, the largest resident memory of one worker
(psutil, sampled every 0.2 s), and the load average before and after (the machine is shared).

Through ROS (`--num-envs N --through-ros`, `--ros-envs`): N sim bridges in real time, N action executors and one
policy node batching their inferences, for each N of `--ros-envs` (baseline: N=1 through ROS in the same bench
run). Those episodes run in real time, so they are not compared with the lockstep ones step by step; the bench
checks that each seed starts the same episode (block and goal positions) whatever N, and reports the policy node's
batch sizes. Wall time includes starting the nodes; episodes per minute are also given without it.

Usage: python bench/bench_parallel_eval.py [--envs 1,2,4] [--ros-envs 1,2,4] [--episodes 12] [--max-steps 150]
       [--no-serial]
Results: bench/results/parallel_eval.json
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import random
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

from headline import figure

# Nothing heavy at module level: the env workers are spawned, and a spawned process imports the main module.
ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "bench" / "results"
CONTRACT = ROOT / "config" / "contracts" / "so101_sim.yaml"
STATE, ENV_STATE = "observation.state", "observation.environment_state"


def demo_sized_act(directory: Path) -> Path:
    """An ACT with the demo's overrides and inputs, random weights, saved with the sim contract."""
    import torch
    import yaml

    from lerobot_eval.demo.workspace import DemoSettings
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
    overrides = dict(DemoSettings().policy_overrides)
    config = ACTConfig(input_features=inputs, output_features=outputs, **overrides)
    stats = {
        STATE: {"mean": torch.zeros(6), "std": torch.full((6,), 30.0)},
        ENV_STATE: {"mean": torch.zeros(6), "std": torch.full((6,), 0.2)},
        "action": {"mean": torch.full((6,), 10.0), "std": torch.full((6,), 20.0)},
    }
    stats = {k: {**v, "min": v["mean"] - 3 * v["std"], "max": v["mean"] + 3 * v["std"]} for k, v in stats.items()}
    save_policy(directory, ACTPolicy(config, stats), fps=30, contract=contract)
    return directory


class WorkerMemory:
    """The largest resident set of any child process while running (sampled)."""

    def __init__(self) -> None:
        import psutil

        self._me = psutil.Process()
        self.max_rss = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._sample, daemon=True)

    def _sample(self) -> None:
        import psutil

        while not self._stop.wait(0.2):
            for child in self._me.children(recursive=True):
                try:
                    self.max_rss = max(self.max_rss, child.memory_info().rss)
                except psutil.Error:
                    continue

    def __enter__(self) -> WorkerMemory:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()


def run(
    checkpoint: Path, out: Path, num_envs: int | None, args: argparse.Namespace, through_ros: bool = False
) -> dict[str, Any]:
    from lerobot_eval.evaluation import EvalSettings, run_evaluation

    settings = EvalSettings(
        checkpoint=str(checkpoint), contract="", episodes=args.episodes, max_steps=args.max_steps, seed=args.seed,
        env_id="so101_pick_place", cameras="front:320x240", videos=0, blend="crossfade", threshold=0.5,
        device="cpu", output_dir=out, num_envs=None if num_envs is None else str(num_envs), through_ros=through_ros,
    )  # fmt: skip
    out.mkdir(parents=True, exist_ok=True)
    load_before = os.getloadavg()[0]
    started = time.perf_counter()
    with WorkerMemory() as memory:
        report = run_evaluation(settings, progress=lambda _line: None)
    wall = time.perf_counter() - started
    if through_ros:
        return {
            "num_envs": num_envs,
            "path": "through ROS: N bridges (real time), N executors, one batching policy node",
            "wall_s": round(wall, 2),
            "episodes_per_minute": round(60.0 * report["episodes"] / wall, 2),
            "episodes_per_minute_without_startup": round(report["episodes_per_minute"], 2),
            "startup_s": round(report["startup_s"], 2),
            "policy_batch_sizes": report["policy_batch_sizes"],
            "policy_processes": report["policy_processes"],
            "success_rate": report["success_rate"],
            "load_before": round(load_before, 2),
            "load_after": round(os.getloadavg()[0], 2),
            "per_episode": report["per_episode"],
        }
    return {
        "num_envs": num_envs,
        "path": "serial, lockstep sim bridge (ROS)" if num_envs is None else "in-process vector env",
        "wall_s": round(wall, 2),
        "episodes_per_minute": round(60.0 * report["episodes"] / wall, 2),
        "policy_batch_mean": report.get("policy_batch_sizes", {}).get("mean", 1.0),
        "max_child_rss_gib": round(memory.max_rss / 1024**3, 3),
        "load_before": round(load_before, 2),
        "load_after": round(os.getloadavg()[0], 2),
        "per_episode": report["per_episode"],
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--envs", default="1,2,4", help="numbers of envs to measure (comma-separated)")
    parser.add_argument("--episodes", type=int, default=12)
    parser.add_argument("--max-steps", type=int, default=150)
    parser.add_argument("--seed", type=int, default=3000)
    parser.add_argument("--no-serial", action="store_true", help="skip the serial run through the sim bridge")
    parser.add_argument("--ros-envs", default="1,2,4", help="robots through ROS (comma-separated; '' = none)")
    args = parser.parse_args()
    os.environ.setdefault("MUJOCO_GL", "egl")
    # The serial run's bridge gets a graph of its own (the machine may be running ROS tests).
    os.environ.setdefault("ROS_DOMAIN_ID", str(random.randint(150, 230)))
    os.environ.setdefault("ROS_AUTOMATIC_DISCOVERY_RANGE", "LOCALHOST")
    counts = [int(n) for n in args.envs.split(",") if n.strip()]
    ros_counts = [int(n) for n in args.ros_envs.split(",") if n.strip()]
    runs: list[dict[str, Any]] = []
    ros_runs: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory(prefix="bench_parallel_eval_") as tmp:
        checkpoint = demo_sized_act(Path(tmp) / "pretrained_model")
        for num_envs in ([] if args.no_serial else [None]) + counts:
            label = "serial (bridge)" if num_envs is None else f"{num_envs} env(s)"
            print(f"{label}: {args.episodes} episodes x {args.max_steps} steps ...", flush=True)
            result = run(checkpoint, Path(tmp) / f"run_{num_envs}", num_envs, args)
            runs.append(result)
            print(
                f"  {result['wall_s']:.1f} s, {result['episodes_per_minute']:.1f} episodes/min, worker rss "
                f"{result['max_child_rss_gib']:.2f} GiB, load {result['load_before']} -> {result['load_after']}",
                flush=True,
            )
        for num_envs in ros_counts:
            print(f"{num_envs} robot(s) through ROS: {args.episodes} episodes x {args.max_steps} steps ...", flush=True)
            result = run(checkpoint, Path(tmp) / f"ros_{num_envs}", num_envs, args, through_ros=True)
            ros_runs.append(result)
            print(
                f"  {result['wall_s']:.1f} s ({result['startup_s']:.1f} s starting the nodes), "
                f"{result['episodes_per_minute']:.1f} episodes/min, batch sizes "
                f"{result['policy_batch_sizes']['counts']}, load {result['load_before']} -> {result['load_after']}",
                flush=True,
            )
    reference = runs[0]["per_episode"] if runs else []
    identical = all(r["per_episode"] == reference for r in runs)
    base = next((r for r in runs if r["num_envs"] == 1), None)
    ros_base = next((r for r in ros_runs if r["num_envs"] == 1), None)
    starts = [[(e["seed"], e["initial_environment_state"]) for e in r["per_episode"]] for r in ros_runs]
    ros_same_starts = all(s == starts[0] for s in starts)
    for r in ros_runs:
        r["ratio_to_1_robot"] = (
            round(r["episodes_per_minute"] / ros_base["episodes_per_minute"], 2) if ros_base else None
        )
        keys = ("seed", "robot", "success", "steps", "chunks", "initial_environment_state")
        r["per_episode"] = [{k: e[k] for k in keys} for e in r["per_episode"]]
    for r in runs:
        r["ratio_to_1_env"] = round(r["episodes_per_minute"] / base["episodes_per_minute"], 2) if base else None
        r["per_episode"] = [{k: e[k] for k in ("seed", "steps", "success", "targets_sha256")} for e in r["per_episode"]]
    result = {
        "bench": "parallel_eval",
        "machine": {"cpus": os.cpu_count(), "platform": platform.platform()},
        "episodes": args.episodes,
        "max_steps": args.max_steps,
        "camera": "front 320x240, rendered every step (through ROS: none, the policy does not look at it)",
        "policy": "ACT, demo size, joints + block/goal positions, random weights (episodes run to max_steps)",
        "identical_per_seed": identical,
        "runs": runs,
        "ros_same_episode_starts_per_seed": ros_same_starts,
        "ros_runs": ros_runs,
    }
    base_rate = base["episodes_per_minute"] if base else None
    result["headline"] = [
        figure("episodes/min, serial through the sim bridge", r["episodes_per_minute"], "episodes/min")
        if r["num_envs"] is None
        else figure(
            f"episodes/min, --num-envs {r['num_envs']}",
            r["episodes_per_minute"],
            "episodes/min",
            baseline=None if r["num_envs"] == 1 else base_rate,
            baseline_what="--num-envs 1 in the same bench run",
        )
        for r in runs
    ] + [
        figure(
            f"episodes/min through ROS, {r['num_envs']} robot(s), one policy node",
            r["episodes_per_minute"],
            "episodes/min",
            baseline=None if r["num_envs"] == 1 or ros_base is None else ros_base["episodes_per_minute"],
            baseline_what="1 robot through ROS in the same bench run",
        )
        for r in ros_runs
    ]
    RESULTS.mkdir(parents=True, exist_ok=True)
    (RESULTS / "parallel_eval.json").write_text(json.dumps(result, indent=2) + "\n")
    print(json.dumps({k: v for k, v in result.items() if k not in ("runs", "ros_runs")}, indent=2))
    if not identical:
        raise SystemExit("per-episode results differ between runs: parallel evaluation is not the serial one")
    if not ros_same_starts:
        raise SystemExit("through ROS, a seed started a different episode with another number of robots")


if __name__ == "__main__":
    main()
