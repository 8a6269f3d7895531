"""`lerobot-ros dataset merge` throughput: stream copy against re-encoding, on the same two datasets.

Two datasets of --episodes episodes each (--frames frames per episode, one 480x640 camera with sensor-like
noise so it compresses like a real one, libsvtav1 as LeRobot writes it, plus state/action vectors) are written
with the project's DatasetWriter, then merged twice: videos copied packet by packet (the default when the
encodings match) and with `reencode=True` (decode + encode every frame, libsvtav1). Each merge runs --rounds
times; the best time is kept (the machine is shared; the load average is recorded). Results:
bench/results/dataset_merge.json.

Usage: python bench/bench_dataset_merge.py [--episodes N] [--frames N] [--rounds N]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import tempfile
import time
from pathlib import Path

import numpy as np

from lerobot_dataset import DatasetWriter, FeatureSpec
from lerobot_dataset.merge import merge_datasets
from lerobot_dataset.validate import validate

HEIGHT, WIDTH = 480, 640
NAMES = [f"joint{i}" for i in range(6)]


def write(root: Path, episodes: int, frames: int, seed: int) -> None:
    features = {
        "observation.state": FeatureSpec("float32", (6,), NAMES),
        "action": FeatureSpec("float32", (6,), NAMES),
        "observation.images.front": FeatureSpec("video", (HEIGHT, WIDTH, 3)),
    }
    rng = np.random.default_rng(seed)
    y, x = np.mgrid[0:HEIGHT, 0:WIDTH]
    with DatasetWriter.create(root, repo_id="bench/merge", fps=30, features=features) as writer:
        for episode in range(episodes):
            writer.start_episode(f"task {episode % 3}")
            for step in range(frames):
                frame = np.empty((HEIGHT, WIDTH, 3), dtype=np.uint8)
                frame[..., 0] = (x // 3 + step * 2 + episode) % 256
                frame[..., 1] = (y // 2 + step) % 256
                frame[..., 2] = 90
                frame = np.clip(frame + rng.normal(0, 3, frame.shape), 0, 255).astype(np.uint8)
                state = rng.normal(size=6).astype(np.float32)
                writer.add_frame({"observation.state": state, "action": state, "observation.images.front": frame})
            writer.save_episode()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--episodes", type=int, default=10, help="episodes per source dataset")
    parser.add_argument("--frames", type=int, default=150, help="frames per episode (30 fps)")
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--out", type=Path, default=Path(__file__).parent / "results" / "dataset_merge.json")
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="bench-merge-"))
    try:
        started = time.perf_counter()
        write(work / "a", args.episodes, args.frames, 1)
        write(work / "b", args.episodes, args.frames, 2)
        write_s = time.perf_counter() - started
        results: dict[str, object] = {
            "episodes": 2 * args.episodes,
            "frames": 2 * args.episodes * args.frames,
            "camera": f"{WIDTH}x{HEIGHT} libsvtav1",
            "cpus": os.cpu_count(),
            "write_sources_s": round(write_s, 1),
        }
        for mode, reencode in (("copy", False), ("reencode", True)):
            times = []
            for round_ in range(args.rounds):
                out = work / f"{mode}{round_}"
                load = os.getloadavg()[0]
                t0 = time.perf_counter()
                report = merge_datasets([work / "a", work / "b"], out, reencode=reencode)
                times.append(time.perf_counter() - t0)
                assert validate(out) == [], f"{mode} merge does not validate"
                results[f"{mode}_load_avg"] = round(load, 1)
                results[f"{mode}_reencoded"] = len(report.reencoded)
                shutil.rmtree(out)
            best = min(times)
            results[f"{mode}_s"] = round(best, 2)
            results[f"{mode}_episodes_per_s"] = round(2 * args.episodes / best, 2)
            results[f"{mode}_frames_per_s"] = round(2 * args.episodes * args.frames / best, 1)
        results["speedup"] = round(float(results["reencode_s"]) / float(results["copy_s"]), 1)  # type: ignore[arg-type]
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps(results, indent=2) + "\n")
        print(json.dumps(results, indent=2))
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
