"""Data-parallel training throughput: `lerobot-ros train --nproc 2` against one process, same run.

Writes bench/results/training_ddp.json. Both runs train the CPU-sized ACT (`act_cpu` of
bench_training.py, one 240x320 camera) on the same synthetic dataset with the same per-process batch,
one torch thread per process; the figure is samples/s over the whole run (wall clock from the log's
`samples_per_s` of the last window, which excludes start-up). On this 2-core machine two ranks share the
cores, so the ratio says what data-parallelism buys when nothing else runs; with other load it drops.

Usage: python bench/bench_training_ddp.py [--quick]
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from bench_training import SIZES, write_dataset
from headline import figure

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "bench" / "results"


def train(dataset: Path, out: Path, nproc: int, steps: int, batch_size: int) -> dict[str, Any]:
    overrides = [f"--set={key}={json.dumps(value)}" for key, value in SIZES["act_cpu"][2].items()]
    args = [
        sys.executable, "-m", "lerobot_ros.cli", "train", "--dataset", str(dataset), "--policy", "act",
        "--out", str(out), "--steps", str(steps), "--batch-size", str(batch_size), "--log-every", str(steps),
        "--val-fraction", "0", "--save-every", str(steps), "--threads", "1", "--no-progress",
        "--nproc", str(nproc), *overrides,
    ]  # fmt: skip
    started = time.perf_counter()
    result = subprocess.run(args, capture_output=True, text=True, check=False)
    wall = time.perf_counter() - started
    if result.returncode != 0:
        raise SystemExit(f"training with --nproc {nproc} failed:\n{result.stderr[-3000:]}")
    with (out / "log.csv").open(newline="") as handle:
        rows = [row for row in csv.DictReader(handle) if row["split"] == "train"]
    return {
        "samples_per_s": {"value": float(rows[-1]["samples_per_s"]), "unit": "samples/s"},
        "global_batch": batch_size * nproc,
        "wall_s": {"value": round(wall, 2), "unit": "s", "note": "whole command, start-up included"},
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="fewer steps (a smoke run, noisy numbers)")
    args = parser.parse_args()
    steps = 6 if args.quick else 30
    batch_size = 4
    with tempfile.TemporaryDirectory() as scratch:
        dataset = Path(scratch) / "data"
        write_dataset(dataset, episodes=4, frames=60, height=240, width=320)
        single = train(dataset, Path(scratch) / "one", 1, steps, batch_size)
        double = train(dataset, Path(scratch) / "two", 2, steps, batch_size)
    results: dict[str, Any] = {
        "date": time.strftime("%Y-%m-%d %H:%M:%S"),
        "loadavg": os.getloadavg(),
        "steps": steps,
        "batch_per_process": batch_size,
        "nproc_1": single,
        "nproc_2": double,
    }
    results["headline"] = [
        figure(
            "training samples/s, 2 processes (torchrun, gloo)",
            double["samples_per_s"]["value"],
            "samples/s",
            baseline=single["samples_per_s"]["value"],
            baseline_what="1 process at the same per-process batch, same run",
        )
    ]
    RESULTS.mkdir(parents=True, exist_ok=True)
    out = RESULTS / "training_ddp.json"
    out.write_text(json.dumps(results, indent=2) + "\n")
    print(json.dumps({k: results[k] for k in ("nproc_1", "nproc_2")}, indent=2))
    print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
