"""The SO-101 pick-and-place simulation as a closed-loop task of `bench_rtc.py` (`--task so101`).

Demonstrations: the scripted expert drives the sim in this process and `bench_demo_curve.record` writes them
under the sim contract's low-dimensional features (joints in LeRobot units, block and goal positions, action;
no camera), as `bench_demo_curve.py` does for ACT. A diffusion policy of this repo is trained on them with the
repo's `Trainer` (one torch thread, like the demo). Episodes: the sim's joint-level loop at 30 Hz, the executor's
targets (radians) as the joint commands; success is the sim's own (the block in the bin).
"""

from __future__ import annotations

import csv
import dataclasses
import json
import shutil
import time
from pathlib import Path
from typing import Any

import numpy as np
from bench_demo_curve import ACTION, ENV_ID, FPS, Observer, record

from lerobot_eval.demo.workspace import ENV_STATE, STATE, DemoSettings
from lerobot_sim_bridge.adapters import SimConfig, make_adapter

# The policy: a small U-Net (1.05 M parameters), 32-step chunks predicted from the current observation, DDIM 10.
POLICY_OVERRIDES: dict[str, Any] = {
    "n_obs_steps": 1,
    "horizon": 32,
    "n_action_steps": 16,
    "down_dims": [32, 64, 128],
    "diffusion_step_embed_dim": 32,
    "kernel_size": 5,
    "n_groups": 8,
    "num_inference_steps": 10,
    # LeRobot's diffusion leaves observation.environment_state unnormalised (no ENV entry): the block and goal
    # positions vary by a few centimetres, 0.1 of the joints' [-1, 1] range; scaled to [-1, 1] like the joints
    # (a run without it had 0/10 and grasps several degrees off at 1250 steps; with it 1/10 at 1000, 2/10 at
    # 1500: whether it matters was not settled).
    "normalization_mapping": {"VISUAL": "MEAN_STD", "STATE": "MIN_MAX", "ENV": "MIN_MAX", "ACTION": "MIN_MAX"},
}
LEARNING_RATE = 1e-3
BATCH_SIZE = 64
# Success with no delay (a new chunk every 15 steps, seeds 1000-1019): 8/20 after 2000 steps, 14/20 after 4500.
TRAIN_STEPS = 4500
DEMOS = 200
TRAINING_JSON = "bench_training.json"
EPISODE_S = 10.0  # the expert needs 2.4 s on average; a policy that has not placed the block by then has stalled


def train_policy(directory: Path, steps: int, work: Path, demos: int = DEMOS, seed: int = 1000) -> dict[str, Any]:
    """Record `demos` expert episodes (seeds 0..demos-1) into `work`/demos unless it holds them, train the
    diffusion policy on them, copy the final checkpoint to `directory`; returns what it took."""
    from lerobot_training.trainer import TrainConfig, Trainer

    began = time.perf_counter()
    observer = Observer()
    dataset = work / "demos"
    expert_ok = None  # a dataset left in `work` by an earlier run is used as it is
    if not (dataset / "meta" / "info.json").is_file():
        expert_ok = record(dataset, range(demos), observer, round(DemoSettings().max_episode_s * FPS))
    recorded = time.perf_counter()
    print(f"{demos} demonstrations ({expert_ok} successful) in {recorded - began:.0f} s", flush=True)
    config = TrainConfig(
        dataset=dataset, policy="diffusion", out=work / "train", steps=steps, batch_size=BATCH_SIZE,
        lr=LEARNING_RATE, seed=seed, input_features=[STATE, ENV_STATE], policy_overrides=dict(POLICY_OVERRIDES),
        save_every=max(steps // 4, 1), val_every=max(steps // 10, 1), log_every=max(min(steps // 50, 50), 1),
        val_fraction=0.05, threads=1, progress=False,
    )  # fmt: skip
    final = Path(Trainer(config, resume=False, write=lambda line: print(line, flush=True)).train())
    trained = time.perf_counter()
    directory.parent.mkdir(parents=True, exist_ok=True)
    shutil.copytree(final, directory, dirs_exist_ok=True)
    training = {
        "demos": demos,
        "expert_successes": expert_ok,
        "record_s": recorded - began,
        "steps": steps,
        "seconds": trained - recorded,
        "batch_size": BATCH_SIZE,
        "lr": LEARNING_RATE,
        "threads": 1,
        "policy": dict(POLICY_OVERRIDES),
        "final_val_loss": _last_logged(config.out / "log.csv", "val", "loss"),
        "final_loss": _last_logged(config.out / "log.csv", "train", "loss"),
    }
    # Kept with the checkpoint: a later run that reuses it (`--checkpoint`) reports how it was trained.
    (directory / TRAINING_JSON).write_text(json.dumps(training, indent=2) + "\n")
    return training


def _last_logged(log: Path, split: str, column: str) -> float | None:
    if not log.is_file():
        return None
    values = [row[column] for row in csv.DictReader(log.open()) if row["split"] == split and row.get(column)]
    return float(values[-1]) if values else None


class So101Task:
    """One SO-101 sim episode at a time, seen through the contract: observations in the policy's units (LeRobot
    degrees / gripper 0..100), commands in radians (what the executor streams to the bridge)."""

    episode_s = EPISODE_S
    what = "SO-101 pick-and-place sim (in-process, 30 Hz), low-dim diffusion policy trained on expert demos"

    def __init__(self) -> None:
        self.observer = Observer()
        self.adapter = make_adapter(ENV_ID, SimConfig(fps=FPS))
        self.names = tuple(self.observer.contract.features[ACTION].joints or ())
        # Seam and jerk on the arm's joints: the expert opens and closes the gripper in one step (0 -> 100 in a
        # tick), so its command jumps inside every chunk and a seam near a grasp would measure the grasp.
        self.metric_joints = tuple(i for i, name in enumerate(self.names) if name != "gripper")
        self.outcome: str | None = None

    def reset(self, seed: int) -> np.ndarray:
        self.adapter.reset(seed)
        self.outcome = None
        return np.asarray(self.adapter.joint_positions(), dtype=np.float64)

    def observation(self) -> dict[str, np.ndarray]:
        objects = {pose.name: pose for pose in self.adapter.object_poses()}
        return self.observer.observe(self.adapter.joint_positions(), objects)

    def to_command(self, actions: np.ndarray) -> np.ndarray:
        """A chunk in the policy's units -> radians (the contract's conversion, as the policy node does)."""
        return np.asarray(self.observer.action_units.inverse(np.asarray(actions, dtype=np.float64)), dtype=np.float64)

    def step(self, target: np.ndarray) -> bool:
        """Apply one tick's joint targets; True when the episode is over (success or the sim terminated it)."""
        outcome = self.adapter.step(target)
        if outcome.success:
            self.outcome = "success"
        elif outcome.terminated:
            self.outcome = "terminated"
        return self.outcome is not None

    def result(self) -> dict[str, Any]:
        return {"success": self.outcome == "success", "failure": None if self.outcome == "success" else
                (self.outcome or "timeout")}  # fmt: skip

    def close(self) -> None:
        self.adapter.close()


def settings() -> dict[str, Any]:
    return {"policy": dict(POLICY_OVERRIDES), "lr": LEARNING_RATE, "batch_size": BATCH_SIZE, "demos": DEMOS,
            "episode_s": EPISODE_S, **{k: v for k, v in dataclasses.asdict(DemoSettings()).items()
                                       if k in ("max_episode_s",)}}  # fmt: skip
