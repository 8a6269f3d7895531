"""How far `lerobot-ros train --nproc 2` at batch B drifts from one process at batch 2B, step by step.

Writes bench/results/training_ddp_drift.json. Both runs see the same global batches (rank r trains on the r-th
slice of the batch one process at 2B draws) and DDP averages the gradients, so without randomness in the forward
pass each step is one process's step up to float rounding (another summation order), and the rounding compounds;
with dropout (or ACT's VAE, or diffusion noise) each rank draws its own masks, so the two runs are different
random draws. Measured: the relative weight difference ||w_2 - w_1|| / ||w_1|| over every tensor and the largest
element difference, at steps 4, 20, 100 and 300 of one 300-step run each (checkpoints every 4 steps), for a small
ACT (vector inputs, no VAE) with dropout 0 and with ACT's default 0.1.

Usage: python bench/bench_training_ddp_drift.py [--quick]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np
import torch
from safetensors.torch import load_file

from lerobot_dataset import DatasetWriter, FeatureSpec

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "bench" / "results"
SMALL_ACT = {"chunk_size": 6, "n_action_steps": 6, "dim_model": 32, "n_heads": 2, "dim_feedforward": 64,
             "n_encoder_layers": 1, "n_decoder_layers": 1, "use_vae": False}  # fmt: skip


def write_dataset(root: Path, episodes: int = 4, frames: int = 40) -> None:
    """State, environment state and action vectors (no camera: ACT without a ResNet, quick steps)."""
    features = {
        "observation.state": FeatureSpec("float32", (6,)),
        "observation.environment_state": FeatureSpec("float32", (2,)),
        "action": FeatureSpec("float32", (6,)),
    }
    with DatasetWriter.create(root, repo_id="bench/ddp_drift", fps=10, features=features) as writer:
        for episode in range(episodes):
            writer.start_episode("move")
            for i in range(frames):
                state = np.sin(np.arange(6) + i / 10 + episode).astype(np.float32) * 45
                target = np.array([episode, np.cos(i / 7)], dtype=np.float32)
                writer.add_frame(
                    {"observation.state": state, "observation.environment_state": target, "action": state + 1}
                )
            writer.save_episode()


def train(dataset: Path, out: Path, nproc: int, batch_size: int, steps: int, dropout: float) -> None:
    overrides = [f"--set={key}={json.dumps(value)}" for key, value in {**SMALL_ACT, "dropout": dropout}.items()]
    args = [
        sys.executable, "-m", "lerobot_ros.cli", "train", "--dataset", str(dataset), "--policy", "act",
        "--out", str(out), "--steps", str(steps), "--batch-size", str(batch_size), "--lr", "1e-3", "--seed", "5",
        "--warmup-steps", "1", "--val-fraction", "0", "--save-every", "4", "--threads", "1", "--no-progress",
        "--feature", "observation.state", "--feature", "observation.environment_state", "--nproc", str(nproc),
        *overrides,
    ]  # fmt: skip
    result = subprocess.run(args, capture_output=True, text=True, check=False)
    if result.returncode != 0:
        raise SystemExit(f"training with --nproc {nproc} failed:\n{result.stderr[-3000:]}")


def drift(one: Path, two: Path, step: int) -> dict[str, Any]:
    path = Path("checkpoints") / f"{step:06d}" / "pretrained_model" / "model.safetensors"
    a, b = load_file(str(one / path)), load_file(str(two / path))
    diff = sum(float(((a[k].double() - b[k].double()) ** 2).sum()) for k in a) ** 0.5
    norm = sum(float((a[k].double() ** 2).sum()) for k in a) ** 0.5
    largest = {k: float((a[k] - b[k]).abs().max()) for k in a}
    worst = max(largest, key=lambda k: largest[k])
    return {"relative_weight_difference": diff / norm, "max_element_difference": largest[worst], "worst": worst}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="20 steps (a smoke run)")
    args = parser.parse_args()
    steps = 20 if args.quick else 300
    checked = [s for s in (4, 20, 100, 300) if s <= steps]
    results: dict[str, Any] = {
        "date": time.strftime("%Y-%m-%d %H:%M:%S"),
        "loadavg": os.getloadavg(),
        "torch": torch.__version__,
        "policy": {**SMALL_ACT, "inputs": ["observation.state", "observation.environment_state"], "lr": 1e-3},
        "batch": "2 ranks x 2 against 1 process x 4",
        "drift": {},
    }
    with tempfile.TemporaryDirectory() as scratch:
        dataset = Path(scratch) / "data"
        write_dataset(dataset)
        for dropout in (0.0, 0.1):
            one, two = Path(scratch) / f"one-{dropout}", Path(scratch) / f"two-{dropout}"
            train(dataset, one, 1, 4, steps, dropout)
            train(dataset, two, 2, 2, steps, dropout)
            results["drift"][f"dropout {dropout}"] = {str(s): drift(one, two, s) for s in checked}
            print(json.dumps({f"dropout {dropout}": results["drift"][f"dropout {dropout}"]}, indent=1), flush=True)
    RESULTS.mkdir(parents=True, exist_ok=True)
    out = RESULTS / "training_ddp_drift.json"
    out.write_text(json.dumps(results, indent=2) + "\n")
    print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
