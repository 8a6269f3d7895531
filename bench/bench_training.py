"""Training and inference speed of the policies on CPU, on a synthetic LeRobot v3 dataset.

Writes bench/results/training.json:
* decode: samples/s over one epoch in random order (camera frames decoded from the mp4), per-frame
  decoding (baseline: the reader seeks for every sample) against whole-episode decoding into the
  cache, cold (first epoch, decoding included) and warm (later epochs);
* train.<policy>: samples/s of full optimisation steps (batch 8, DataLoader in the main process), and
  how the step time splits between fetching data (decode, windows, collate) and the model
  (forward, backward, AdamW);
* inference.<policy>: latency of one `predict_chunk` (one observation -> one chunk) p50/p99, which
  the policy node pays per chunk. Baseline for diffusion: LeRobot's default sampler (DDPM, 100 steps)
  against DDIM with 10 steps.

Sizes: `act_cpu` (dim_model 256, 2+1 layers, chunk 30) and `diffusion_cpu` (down_dims 64/128/256,
horizon 16, 2 observation steps) are the demo sizes for CPU training; `act_lerobot_default` is LeRobot's
default ACT (51.6 M parameters, chunk 100). Camera 240x320 (the sim bridge's), 6 joints, 30 fps.

Wall-clock figures depend on what else runs on the machine (2 shared cores here); the CPU-time
figures (process time, all threads) are less sensitive to that and are reported next to them. torch
runs one intra-op thread by default: on a loaded 2-core machine, 2 OpenMP threads spin-wait for each
other and burn several times the CPU (measured here: ResNet-18 forward at 240x320, 0.12 CPU s with one
thread, 0.89 CPU s with two).

Usage: python bench/bench_training.py [--quick]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import random
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np
import torch
from headline import figure
from torch.utils.data import DataLoader

from lerobot_dataset import DatasetReader, DatasetWriter, FeatureSpec
from lerobot_training.data import PolicyDataset, StepBatchSampler, dataset_features, to_policy_batch, training_stats
from lerobot_training.policies.act import ACTConfig, ACTPolicy
from lerobot_training.policies.base import Policy
from lerobot_training.policies.diffusion import DiffusionConfig, DiffusionPolicy

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "bench" / "results"
FPS = 30

SIZES: dict[str, tuple[type[Policy], type[Any], dict[str, Any]]] = {
    "act_cpu": (ACTPolicy, ACTConfig, {"chunk_size": 30, "n_action_steps": 30, "dim_model": 256, "n_heads": 8,
                                        "dim_feedforward": 1024, "n_encoder_layers": 2, "n_vae_encoder_layers": 2}),
    "diffusion_cpu": (DiffusionPolicy, DiffusionConfig, {"horizon": 16, "n_obs_steps": 2, "n_action_steps": 8,
                                                         "down_dims": (64, 128, 256), "num_inference_steps": 10}),
    "act_lerobot_default": (ACTPolicy, ACTConfig, {}),
}  # fmt: skip


def write_dataset(root: Path, episodes: int, frames: int, height: int, width: int) -> None:
    rng = np.random.default_rng(0)
    y, x = np.mgrid[0:height, 0:width].astype(np.float32)
    base = np.stack([x / width * 180 + 40, y / height * 160 + 50, (x + y) / (width + height) * 120 + 60], axis=-1)
    features = {
        "observation.state": FeatureSpec("float32", (6,)),
        "observation.images.front": FeatureSpec("video", (height, width, 3)),
        "action": FeatureSpec("float32", (6,)),
    }
    with DatasetWriter.create(root, repo_id="bench/training", fps=FPS, features=features) as writer:
        for episode in range(episodes):
            writer.start_episode("pick the cube")
            for i in range(frames):
                frame = base.copy()
                cx, cy = (20 + 3 * i + 17 * episode) % (width - 40), (30 + 2 * i) % (height - 40)
                frame[cy : cy + 30, cx : cx + 25] = (200, 60, 40)
                frame += rng.normal(0, 3, frame.shape).astype(np.float32)
                state = np.sin(np.arange(6) + i / 10 + episode).astype(np.float32) * 45
                image = np.clip(frame, 0, 255).astype(np.uint8)
                writer.add_frame({"observation.state": state, "observation.images.front": image, "action": state + 1})
            writer.save_episode()


def build(name: str, reader: DatasetReader, episodes: list[int]) -> Policy:
    policy_cls, config_cls, overrides = SIZES[name]
    inputs, outputs = dataset_features(reader)
    config = config_cls(input_features=inputs, output_features=outputs, **overrides)
    stats = training_stats(reader, episodes, {**inputs, **outputs})
    return policy_cls(config, stats)


def bench_decode(root: Path, policy: Policy, episodes: list[int], samples: int) -> dict[str, Any]:
    """Random-order sample fetches: per-frame decoding vs whole-episode cache (cold, then warm)."""
    order = random.Random(0).sample(range(samples), samples)

    def rate(dataset: PolicyDataset) -> float:
        started = time.perf_counter()
        for index in order:
            dataset[index]
        return samples / (time.perf_counter() - started)

    uncached = rate(PolicyDataset(root, episodes, policy.config, cache_episodes=False))
    cached = PolicyDataset(root, episodes, policy.config, cache_episodes=True)
    cold = rate(cached)
    warm = rate(cached)
    return {
        "per_frame_samples_per_s": {"value": uncached, "unit": "samples/s (baseline: seek + decode per sample)"},
        "cached_cold_samples_per_s": {"value": cold, "baseline": round(uncached, 2), "unit": "samples/s"},
        "cached_warm_samples_per_s": {"value": warm, "baseline": round(uncached, 2), "unit": "samples/s"},
    }


def bench_train(root: Path, policy: Policy, episodes: list[int], steps: int, batch_size: int) -> dict[str, Any]:
    """Optimisation steps with the data loaded in the main process, time split data vs model."""
    dataset = PolicyDataset(root, episodes, policy.config)
    cameras = [k for k in policy.config.input_features if k.startswith("observation.images")]
    sampler = StepBatchSampler(len(dataset), batch_size, seed=0, start_step=0, total_steps=steps + 1)
    optimizer = torch.optim.AdamW(policy.parameters(), lr=1e-4)
    policy.train()
    data_s, model_s, model_cpu_s = 0.0, 0.0, 0.0
    fetched = time.perf_counter()
    for step, batch in enumerate(DataLoader(dataset, batch_sampler=sampler)):
        started, started_cpu = time.perf_counter(), time.process_time()
        loss, _ = policy.compute_loss(to_policy_batch(batch, cameras, torch.device("cpu")))
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        done, done_cpu = time.perf_counter(), time.process_time()
        if step > 0:  # the first step warms up allocators and fills the episode cache
            data_s += started - fetched
            model_s += done - started
            model_cpu_s += done_cpu - started_cpu
        fetched = time.perf_counter()
    total = data_s + model_s
    return {
        "samples_per_s": {"value": steps * batch_size / total, "unit": f"samples/s (batch {batch_size})"},
        "step_s": {"value": total / steps, "unit": "s"},
        "data_fraction": {"value": data_s / total, "unit": "share of step time spent fetching data"},
        "model_fraction": {"value": model_s / total, "unit": "share of step time in forward/backward/AdamW"},
        "model_cpu_s_per_sample": {"value": model_cpu_s / (steps * batch_size), "unit": "CPU s (all threads)"},
        "parameters_m": {"value": sum(p.numel() for p in policy.parameters()) / 1e6, "unit": "M"},
    }


def bench_inference(policy: Policy, height: int, width: int, runs: int) -> dict[str, Any]:
    observation = {
        "observation.state": torch.zeros(6),
        "observation.images.front": torch.zeros(height, width, 3, dtype=torch.uint8),
    }
    policy.eval()
    for _ in range(2):
        policy.predict_chunk(observation)
    times, cpu_times = [], []
    for _ in range(runs):
        started, started_cpu = time.perf_counter(), time.process_time()
        policy.predict_chunk(observation)
        times.append((time.perf_counter() - started) * 1000)
        cpu_times.append((time.process_time() - started_cpu) * 1000)
    times.sort()
    return {
        "cpu_ms_p50": {"value": statistics.median(cpu_times), "unit": "CPU ms per chunk (all threads)"},
        "p50_ms": {"value": statistics.median(times), "unit": "ms per chunk"},
        "p99_ms": {"value": times[min(len(times) - 1, round(0.99 * (len(times) - 1)))], "unit": "ms per chunk"},
        "chunk_length": policy.config.chunk_length,
    }


def headline(results: dict[str, Any]) -> list[dict[str, Any]]:
    """Decoding against per-frame seeking; per policy training and inference cost, diffusion against DDPM 100.
    The issue sets no targets."""
    decode = results["decode"]
    seek: dict[str, Any] = {
        "baseline": decode["per_frame_samples_per_s"]["value"],
        "baseline_what": "per-frame seek + decode for every sample (no episode cache), same run",
    }
    rows = [
        figure("decode, episode cache, first epoch", decode["cached_cold_samples_per_s"]["value"], "samples/s", **seek),
        figure(
            "decode, episode cache, later epochs", decode["cached_warm_samples_per_s"]["value"], "samples/s", **seek
        ),
    ]
    ddpm = results["inference"].get("diffusion_cpu_ddpm100")

    def against_ddpm(name: str, key: str) -> dict[str, Any]:
        if name != "diffusion_cpu" or ddpm is None:
            return {}
        what = "DDPM with 100 steps (LeRobot's default sampler), same model, same run"
        return {"baseline": ddpm[key]["value"], "baseline_what": what}

    for name, train in results["train"].items():
        inference = results["inference"][name]
        rows += [
            figure(f"training, {name}", train["samples_per_s"]["value"], train["samples_per_s"]["unit"]),
            figure(f"training CPU per sample, {name}", train["model_cpu_s_per_sample"]["value"], "CPU s"),
            figure(
                f"inference per chunk p50, {name}", inference["p50_ms"]["value"], "ms", **against_ddpm(name, "p50_ms")
            ),
            figure(
                f"inference CPU per chunk p50, {name}",
                inference["cpu_ms_p50"]["value"],
                "CPU ms",
                **against_ddpm(name, "cpu_ms_p50"),
            ),
        ]
    return rows


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="smaller images and fewer steps (smoke run)")
    parser.add_argument("--threads", type=int, default=1, help="torch intra-op threads (default 1, see above)")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    height, width = (96, 128) if args.quick else (240, 320)
    episodes, frames = (2, 30) if args.quick else (4, 90)
    steps, runs = (2, 5) if args.quick else (3, 12)
    torch.manual_seed(0)
    results: dict[str, Any] = {
        "setup": {
            "camera": f"{width}x{height}",
            "episodes": episodes,
            "frames_per_episode": frames,
            "fps": FPS,
            "cpu_count": os.cpu_count(),
            "torch_threads": torch.get_num_threads(),
            "torch": torch.__version__,
            "machine": platform.machine(),
            "quick": args.quick,
        },
        "train": {},
        "inference": {},
    }
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp) / "dataset"
        started = time.perf_counter()
        write_dataset(root, episodes, frames, height, width)
        print(f"dataset written in {time.perf_counter() - started:.1f} s")
        reader = DatasetReader(root)
        train_episodes = list(range(episodes))
        act = build("act_cpu", reader, train_episodes)
        results["decode"] = bench_decode(root, act, train_episodes, len(reader))  # one epoch, random order
        print("decode:", json.dumps(results["decode"]))
        for name in SIZES:
            if args.quick and name == "act_lerobot_default":
                continue
            policy = act if name == "act_cpu" else build(name, reader, train_episodes)
            results["inference"][name] = bench_inference(policy, height, width, runs)
            print(f"inference {name}:", json.dumps(results["inference"][name]))
            results["train"][name] = bench_train(root, policy, train_episodes, steps, batch_size=8)
            print(f"train {name}:", json.dumps(results["train"][name]))
        ddpm = build("diffusion_cpu", reader, train_episodes)
        ddpm.config.noise_scheduler_type = "DDPM"
        ddpm.config.num_inference_steps = 100
        ddpm.diffusion.noise_scheduler.kind = "DDPM"
        baseline = bench_inference(ddpm, height, width, max(3, runs // 4))
        ddim = results["inference"]["diffusion_cpu"]
        ddim["p50_ms"]["baseline"] = round(baseline["p50_ms"]["value"], 1)
        ddim["p50_ms"]["unit"] = "ms per chunk (baseline: DDPM, 100 steps, LeRobot's default sampler)"
        ddim["cpu_ms_p50"]["baseline"] = round(baseline["cpu_ms_p50"]["value"], 1)
        results["inference"]["diffusion_cpu_ddpm100"] = baseline
        reader.close()
    results = {"headline": headline(results), **results}
    RESULTS.mkdir(parents=True, exist_ok=True)
    out = RESULTS / "training.json"
    out.write_text(json.dumps(results, indent=2) + "\n")
    print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
