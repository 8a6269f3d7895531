"""The default demo end to end, several times: does its success hold run after run? (issue #19 item 5)

Each run is `lerobot-ros demo all` (what `make demo` runs: 100 demonstrations recorded through ROS, ACT 6000
steps, 20 unseen evaluation seeds through policy node + executor + real-time sim bridge) in its own work folder,
with a different recording timing: its own first demonstration seed (`--seeds`, default 0,100,200; the evaluation
seeds 1000..1019 stay unseen) and, while it records, `--busy` extra busy-loop processes per run (default
0,2,4: more load than the machine already has). `--jobs N` runs N demos at once (each then loads the others).

Per run it reports the evaluation's success on the 20 seeds (and which seeds failed, how), the scripted expert
on the same seeds, the recording (frames, dropped, frames whose state repeats the previous frame's: 0 when
every frame is its own simulation step), training losses, chunk latency, starvation, the stage times and the
load average sampled every 5 s during each stage. Target: every run >= 90 %.

`--summarize DIR...` only summarises existing work folders of `lerobot-ros demo all` (runs made by hand with
the same command) into the same JSON, using the load samples the bench finds in each folder's `load.jsonl` if
present.

Writes bench/results/demo_runs.json.

Usage: python bench/bench_demo_runs.py [--runs 3] [--seeds 0,100,200] [--busy 0,2,4] [--jobs 1] [--keep DIR]
       python bench/bench_demo_runs.py --summarize DIR [DIR ...]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import numpy as np
from headline import figure
from load import busy_loops

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "bench" / "results"
TARGET = ">= 0.9"
LOAD_EVERY_S = 5.0


class LoadLog:
    """The 1-minute load average every LOAD_EVERY_S seconds, tagged with the stage running, as JSON lines."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.stage = "start"
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        with self.path.open("a") as out:
            while not self._stop.wait(LOAD_EVERY_S):
                out.write(json.dumps({"t": time.time(), "stage": self.stage, "load1": os.getloadavg()[0]}) + "\n")
                out.flush()

    def close(self) -> None:
        self._stop.set()
        self._thread.join()


def run_demo(workdir: Path, seed: int, busy: int, env: dict[str, str]) -> int:
    """One default demo, stage by stage (the same stages `demo all` runs), `busy` busy loops while it records."""
    workdir.mkdir(parents=True, exist_ok=True)
    load = LoadLog(workdir / "load.jsonl")
    cli = [sys.executable, "-m", "lerobot_ros.cli", "demo"]
    log = (workdir / "bench.log").open("a")
    try:
        for stage in ("record", "train", "eval", "report"):
            argv = [*cli, stage, "--workdir", str(workdir)] + (["--seed", str(seed)] if stage == "record" else [])
            load.stage = stage
            with busy_loops(busy if stage == "record" else 0):
                code = subprocess.call(argv, env=env, stdout=log, stderr=subprocess.STDOUT)
            if code != 0:
                print(f"  {workdir.name}: `demo {stage}` exited {code}; see {workdir / 'bench.log'}", flush=True)
                return code
        return 0
    finally:
        load.close()
        log.close()


def repeated_states(dataset: Path) -> dict[str, int]:
    """Frames whose joint state equals the previous frame's, over the dataset (a repeated simulation step)."""
    from lerobot_dataset import DatasetReader

    reader = DatasetReader(dataset)
    repeats = 0
    for episode in range(reader.num_episodes):
        state = reader.episode_frames(episode, "observation.state")
        repeats += int((np.abs(np.diff(state, axis=0)).max(axis=1) == 0).sum())
    return {"frames": len(reader), "repeated_state_frames": repeats}


def summarize(workdir: Path) -> dict[str, Any]:
    """One run's figures from its work folder."""
    from lerobot_eval.demo.report import read_training_log
    from lerobot_eval.demo.workspace import read_json, read_jsonl

    record = read_json(workdir / "record.json")
    evaluation = read_json(workdir / "eval" / "eval.json")
    loads: dict[str, list[float]] = {}
    for row in read_jsonl(workdir / "load.jsonl"):
        loads.setdefault(str(row["stage"]), []).append(float(row["load1"]))
    training = read_training_log(workdir / "train" / "log.csv") if (workdir / "train" / "log.csv").is_file() else {}
    episodes = read_jsonl(workdir / "record_episodes.jsonl")
    failures = [
        {"seed": r["seed"], "end": r["end"], "duration_s": r["duration_s"], "chunks": r["chunks"]}
        for r in evaluation.get("per_episode", [])
        if not r["success"]
    ]
    return {
        "workdir": str(workdir),
        "first_demo_seed": min((int(r["seed"]) for r in episodes), default=None),
        "success": evaluation.get("successes"),
        "episodes": evaluation.get("episodes"),
        "success_rate": evaluation.get("success_rate"),
        "expert_successes": evaluation.get("expert_successes"),
        "failures": failures,
        "record": {
            "episodes": record.get("episodes"),
            "frames": record.get("frames"),
            "dropped": record.get("dropped"),
            **(repeated_states(workdir / "dataset") if (workdir / "dataset").is_dir() else {}),
        },
        "train_loss": training.get("train", [(0, None)])[-1][1] if training.get("train") else None,
        "val_loss": training.get("val", [(0, None)])[-1][1] if training.get("val") else None,
        "chunk_latency_s": evaluation.get("chunk_latency_s", {}),
        "executor": evaluation.get("executor", {}),
        "timings_s": read_json(workdir / "timings.json"),
        "load1": {
            stage: {"mean": round(float(np.mean(v)), 2), "max": round(float(np.max(v)), 2), "samples": len(v)}
            for stage, v in loads.items()
        },
    }


def write(runs: list[dict[str, Any]], settings: dict[str, Any], started: float) -> Path:
    rates = [r["success_rate"] for r in runs if r["success_rate"] is not None]
    headline = [
        figure(f"policy success, run {i + 1} (20 unseen seeds)", r["success_rate"], "fraction", target=TARGET)
        for i, r in enumerate(runs)
    ]
    if rates:
        headline.append(figure("policy success, worst run", min(rates), "fraction", target=TARGET))
    out = {
        "benchmark": "demo_runs",
        "headline": headline,
        "machine": {"cpus": os.cpu_count(), "platform": platform.platform()},
        "settings": settings,
        "runs": runs,
        "wall_s": time.time() - started,
    }
    RESULTS.mkdir(parents=True, exist_ok=True)
    path = RESULTS / "demo_runs.json"
    path.write_text(json.dumps(out, indent=2) + "\n")
    return path


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=3, help="demo runs (default 3)")
    parser.add_argument("--seeds", default="0,100,200", help="first demonstration seed per run (comma-separated)")
    parser.add_argument("--busy", default="0,2,4", help="busy-loop processes while each run records")
    parser.add_argument("--jobs", type=int, default=1, help="demos at once (default 1)")
    parser.add_argument("--keep", type=Path, default=None, help="keep the work folders under this folder")
    parser.add_argument("--summarize", type=Path, nargs="+", default=None, metavar="DIR",
                        help="only summarise these existing demo work folders")  # fmt: skip
    args = parser.parse_args()
    started = time.time()
    if args.summarize:
        missing = [str(d) for d in args.summarize if not (d / "eval" / "eval.json").is_file()]
        if missing:
            parser.error(f"no finished demo (eval/eval.json) in {', '.join(missing)}; run `lerobot-ros demo all`")
        runs = [summarize(d) for d in args.summarize]
        path = write(runs, {"summarized": [str(d) for d in args.summarize]}, started)
        _print(runs, path)
        return
    seeds = [int(s) for s in args.seeds.split(",")]
    busy = [int(b) for b in args.busy.split(",")]
    if args.runs < 1 or len(seeds) < args.runs or len(busy) < args.runs:
        parser.error(f"--runs {args.runs} needs that many --seeds ({len(seeds)} given) and --busy ({len(busy)})")
    from lerobot_ros.testing import lease_domain

    base = args.keep or Path(tempfile.mkdtemp(prefix="bench_demo_runs_"))
    plans = [(base / f"run_{i + 1}", seeds[i], busy[i]) for i in range(args.runs)]
    leases = [lease_domain() for _ in plans]
    envs = [
        {**os.environ, "ROS_DOMAIN_ID": str(lease.domain_id), "ROS_AUTOMATIC_DISCOVERY_RANGE": "LOCALHOST"}
        for lease in leases
    ]
    print(f"{args.runs} default demo runs in {base}, {args.jobs} at a time", flush=True)
    codes: dict[int, int] = {}
    try:
        pending = list(range(args.runs))
        active: dict[int, threading.Thread] = {}
        while pending or active:
            while pending and len(active) < args.jobs:
                i = pending.pop(0)
                workdir, seed, loops = plans[i]
                print(f"run {i + 1}: demonstrations from seed {seed}, {loops} busy loops while recording", flush=True)

                def one(i: int = i, workdir: Path = workdir, seed: int = seed, loops: int = loops) -> None:
                    codes[i] = run_demo(workdir, seed, loops, envs[i])

                active[i] = threading.Thread(target=one)
                active[i].start()
            for i, thread in list(active.items()):
                thread.join(timeout=1.0)
                if not thread.is_alive():
                    del active[i]
                    print(f"run {i + 1} done (exit {codes[i]})", flush=True)
    finally:
        for lease in leases:
            lease.release()
    runs = [summarize(workdir) for workdir, _, _ in plans]
    settings = {"seeds": seeds[: args.runs], "busy_while_recording": busy[: args.runs], "jobs": args.jobs}
    path = write(runs, settings, started)
    _print(runs, path)


def _print(runs: list[dict[str, Any]], path: Path) -> None:
    for i, run in enumerate(runs):
        loads = ", ".join(f"{stage} {v['mean']:.1f}" for stage, v in run["load1"].items())
        print(
            f"run {i + 1}: {run['success']}/{run['episodes']} (expert {run['expert_successes']}), record "
            f"{run['record'].get('frames')} frames, {run['record'].get('dropped')} dropped, "
            f"{run['record'].get('repeated_state_frames')} repeated; load {loads or 'not sampled'}"
        )
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
