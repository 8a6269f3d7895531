"""Success of the demo's ACT policy against the number of demonstrations and training steps (the #10 curve).

`make demo` records its demonstrations through ROS in real time; this benchmark makes the same data faster
so that several sizes fit in one run: the scripted expert drives the SO-101 sim in this process (the bridge's
joint-level loop at 30 Hz, no ROS, no camera) and its episodes are written with the recorder's dataset writer
under the sim contract's features (joints in LeRobot units, block and goal positions, action). For each
number of demonstrations, ACT is trained with the demo's own settings (`lerobot-ros demo train`: same size,
learning rate, batch, one torch thread), and every checkpoint (each quarter of the steps) is rolled out in
this process on unseen seeds, re-planning every 15 steps like the executor (which asks for the next chunk when
half of the current one is left). Baseline: the expert itself on the same seeds.

`--relative-actions` also trains every size with relative actions (`lerobot-ros train --relative-actions`: targets
are action - state at the frame for every joint but the gripper) on the same demonstrations, rolls it out on
the same seeds and reports its success beside the absolute policy's (issue #19 item 1).

Writes bench/results/demo_curve.json and bench/results/demo_curve.png (success vs training steps, one line
per number of demonstrations).

Usage: python bench/bench_demo_curve.py [--quick] [--episodes 10,30,100] [--steps 6000] [--eval-episodes 50]
       [--relative-actions]
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import platform
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np
from headline import figure

from lerobot_contract import Contract
from lerobot_dataset import DatasetWriter, feature_specs
from lerobot_eval.demo.train import train_config
from lerobot_eval.demo.workspace import ENV_STATE, STATE, TASK, DemoSettings
from lerobot_sim_bridge.adapters import SimConfig, make_adapter
from lerobot_sim_bridge.experts.base import expert_steps, make_expert, run_expert_episodes

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "bench" / "results"
CONTRACT = ROOT / "config" / "contracts" / "so101_sim.yaml"
ENV_ID = "so101_pick_place"
FPS = 30.0
REPLAN_EVERY = 15
ACTION = "action"
TARGET = ">= 0.8"


class Observer:
    """The contract's features from the in-process sim: what the recorder would write from the bridge's topics."""

    def __init__(self) -> None:
        self.contract = Contract.load(CONTRACT).select([STATE, ENV_STATE, ACTION])
        self.state_units = self.contract.features[STATE].joint_units()
        self.action_units = self.contract.features[ACTION].joint_units()

    def observe(self, joint_positions: np.ndarray, objects: dict[str, Any]) -> dict[str, np.ndarray]:
        block, goal = objects["block"].position, objects["goal"].position
        return {
            STATE: self.state_units.apply(joint_positions).astype(np.float32),
            ENV_STATE: np.array([*block, *goal], dtype=np.float32),
        }


def record(root: Path, seeds: range, observer: Observer, max_steps: int) -> int:
    """Expert demonstrations on `seeds` into a LeRobot v3 dataset at `root`; returns the expert's successes."""
    adapter, expert = make_adapter(ENV_ID, SimConfig(fps=FPS)), make_expert(ENV_ID)
    successes = 0
    with DatasetWriter.create(
        root, repo_id="bench/demo_curve", fps=int(FPS), features=feature_specs(observer.contract),
        robot_type="so101_follower", contract=observer.contract.to_dict(),
    ) as writer:  # fmt: skip
        for seed in seeds:
            writer.start_episode(TASK)
            success = False
            for joint_positions, objects, targets, outcome in expert_steps(adapter, expert, seed, max_steps):
                action = observer.action_units.apply(targets).astype(np.float32)
                writer.add_frame({**observer.observe(joint_positions, objects), ACTION: action})
                success = outcome.success
            successes += int(success)
            writer.save_episode()
    adapter.close()
    return successes


def rollout(checkpoint: Path, seeds: list[int], observer: Observer, max_steps: int) -> list[bool]:
    """The checkpoint on `seeds`: success per seed, a new chunk every REPLAN_EVERY steps."""
    import torch

    from lerobot_training.checkpoint import load_policy

    torch.set_num_threads(1)
    policy = load_policy(checkpoint, device="cpu").policy
    policy.eval()
    adapter = make_adapter(ENV_ID, SimConfig(fps=FPS))
    results = []
    for seed in seeds:
        adapter.reset(seed)
        success = False
        for step in range(max_steps):
            if step % REPLAN_EVERY == 0:
                objects = {pose.name: pose for pose in adapter.object_poses()}
                with torch.no_grad():
                    observation = observer.observe(adapter.joint_positions(), objects)
                    chunk = np.asarray(policy.predict_chunk(observation), dtype=np.float64)
                plan = observer.action_units.inverse(chunk)
            outcome = adapter.step(plan[step % REPLAN_EVERY])
            if outcome.success or outcome.terminated:
                success = outcome.success
                break
        results.append(success)
    adapter.close()
    return results


def main() -> None:
    from lerobot_training.trainer import Trainer

    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="10 and 30 demonstrations, 1000 steps, 10 seeds")
    parser.add_argument("--episodes", default="10,30,100", help="numbers of demonstrations (comma-separated)")
    parser.add_argument("--steps", type=int, default=DemoSettings().train_steps, help="training steps")
    parser.add_argument("--eval-episodes", type=int, default=50, help="unseen seeds per checkpoint")
    parser.add_argument(
        "--relative-actions", action="store_true", help="also train with relative actions and compare (#19 item 1)"
    )
    args = parser.parse_args()
    counts = [10, 30] if args.quick else sorted({int(n) for n in args.episodes.split(",")})
    steps = 1000 if args.quick else args.steps
    eval_seeds = list(range(1000, 1000 + (10 if args.quick else args.eval_episodes)))
    settings = DemoSettings(train_steps=steps)
    max_steps = round(settings.eval_max_s * FPS)
    observer = Observer()
    started = time.time()

    print(f"expert on {len(eval_seeds)} unseen seeds (baseline)", flush=True)
    expert = run_expert_episodes(ENV_ID, eval_seeds, FPS, max_steps)
    curve: dict[str, list[dict[str, Any]]] = {}
    timings: dict[str, dict[str, float]] = {}
    with tempfile.TemporaryDirectory(prefix="bench_demo_curve_") as tmp:
        for count in counts:
            t0 = time.time()
            dataset = Path(tmp) / f"demos_{count}"
            # Seeds 0..count-1 are what `demo record` uses; the larger sets extend the smaller ones.
            expert_ok = record(dataset, range(count), observer, round(settings.max_episode_s * FPS))
            recorded = time.time()
            print(
                f"{count} demonstrations ({expert_ok} successful) in {recorded - t0:.0f} s; {steps} training steps",
                flush=True,
            )
            variants: dict[str, list[str] | None] = {str(count): None}
            if args.relative_actions:
                variants[f"{count} relative"] = []  # every joint but the gripper
            for name, relative in variants.items():
                t1 = time.time()
                config = train_config(settings, dataset, Path(tmp) / f"train_{name.replace(' ', '_')}")
                config = dataclasses.replace(config, progress=False, relative_actions=relative)
                Trainer(config, resume=False, write=lambda _: None).train()
                t2 = time.time()
                points = []
                for directory in sorted((config.out / "checkpoints").glob("[0-9]*")):
                    results = rollout(directory / "pretrained_model", eval_seeds, observer, max_steps)
                    point = {"step": int(directory.name), "successes": sum(results), "episodes": len(results)}
                    point["success_rate"] = point["successes"] / point["episodes"]
                    points.append(point)
                    print(f"  {name}: step {point['step']}: {point['successes']}/{point['episodes']}", flush=True)
                curve[name] = points
                timings[name] = {"record_s": recorded - t0, "train_s": t2 - t1, "eval_s": time.time() - t2}

    # The demo's default size when it is in the grid, else the largest.
    default_count = str(DemoSettings().episodes) if str(DemoSettings().episodes) in curve else str(counts[-1])
    default = curve[default_count][-1]
    # Per number of demonstrations: the first checkpoint at or above 80 % (None: not reached in this run).
    crossing = {
        count: next((p["step"] for p in points if p["success_rate"] >= 0.8), None) for count, points in curve.items()
    }
    headline = [
        figure(
            f"policy success, {default_count} demos x {default['step']} steps", default["success_rate"], "fraction",
            baseline=expert["success_rate"], baseline_what="the scripted expert on the same seeds",
            target=None if args.quick else TARGET + " (issue #10)",  # a smoke run is not the measurement
        ),
    ]  # fmt: skip
    headline += [
        figure(f"policy success, {count} demos x {points[-1]['step']} steps", points[-1]["success_rate"], "fraction")
        for count, points in curve.items()
        if count != default_count and not count.endswith(" relative")
    ]
    headline += [
        figure(
            f"policy success with relative actions, {name.split()[0]} demos x {points[-1]['step']} steps",
            points[-1]["success_rate"], "fraction", baseline=curve[name.split()[0]][-1]["success_rate"],
            baseline_what="absolute actions, same demonstrations, steps and seeds",
        )
        for name, points in curve.items()
        if name.endswith(" relative")
    ]  # fmt: skip
    out = {
        "benchmark": "demo_curve",
        "headline": headline,
        "machine": {"cpus": os.cpu_count(), "platform": platform.platform(), "loadavg": os.getloadavg()},
        "settings": {
            "replan_every": REPLAN_EVERY,
            "eval_seeds": [eval_seeds[0], eval_seeds[-1]],
            "relative_actions": "every joint but the gripper" if args.relative_actions else None,
            **settings.to_json(),
        },
        "expert": {k: expert[k] for k in ("episodes", "successes", "success_rate", "mean_steps")},
        "curve": curve,
        "first_at_or_above_80_percent": crossing,
        "timings_s": timings,
        "wall_s": time.time() - started,
    }
    RESULTS.mkdir(parents=True, exist_ok=True)
    name = "demo_curve_quick" if args.quick else "demo_curve"
    if args.relative_actions:
        name += "_relative"
    (RESULTS / f"{name}.json").write_text(json.dumps(out, indent=2) + "\n")
    plot(curve, expert["success_rate"], RESULTS / f"{name}.png")
    print(f"wrote {RESULTS / (name + '.json')} and {name}.png")


def plot(curve: dict[str, list[dict[str, Any]]], expert_rate: float, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6, 4))
    for count, points in curve.items():
        style = "--" if count.endswith(" relative") else "-"
        ax.plot([p["step"] for p in points], [p["success_rate"] for p in points], style, marker="o",
                label=f"{count} demos")  # fmt: skip
    ax.axhline(expert_rate, color="gray", linestyle="--", label="scripted expert")
    ax.axhline(0.8, color="red", linestyle=":", label="target 80 %")
    ax.set(xlabel="training steps", ylabel="success rate (unseen seeds)", ylim=(-0.02, 1.02))
    ax.set_title("Demo ACT: success vs demonstrations and steps")
    ax.legend(loc="lower right")
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)


if __name__ == "__main__":
    main()
