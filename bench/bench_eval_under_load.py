"""One checkpoint evaluated through ROS idle and under load, in one run, on the same seeds (issue 29 item 2).

Each level runs `lerobot-ros demo eval` (sim bridge in real time + policy node + action executor, the demo's
real-time evaluation) on the same checkpoint and the same unseen seeds (1000..), once with the project's
defaults (sim loop and executor tick SCHED_FIFO where permitted) and once with `--no-realtime` (normal
scheduling), while a load generator runs beside it:

- `idle`: nothing added (the baseline of every figure);
- `busy-N`: N busy-loop processes (bench/load.py);
- `mix-N`: N copies of a realistic mix: a second ROS graph in another ROS_DOMAIN_ID publishing the SO-101
  contract's synthetic cameras and joints (launch/synthetic_streams.launch.yaml, cameras at 30 Hz), a torch
  training with its default threads, and a video encode (PyAV, libx264, 640x480).

Per level: success, chunk latency p50/p99, starvation (events, seconds), tick jitter p99, each failed
episode's cause (lerobot_eval.failure_causes: starved, late_observations, sim_behind_real_time, late_start,
policy_failed) and the 1-minute load average sampled during the level. Headline: success per level against
the idle run (target >= 0.9) and tick jitter p99.

The checkpoint: `--demo DIR` (a `lerobot-ros demo` work folder with a trained checkpoint: the default demo's is
what the issue asks for), else one trained here: `--quick` records 2 demonstrations and trains 20 steps (a
smoke run of the bench itself, not a policy that succeeds), without --quick the default demo's record + train.

Writes bench/results/eval_under_load.json (`--quick`: eval_under_load_quick.json).

Usage: python bench/bench_eval_under_load.py [--quick] [--demo DIR] [--episodes 20] [--eval-max-s 20]
       [--levels idle,busy-4,busy-16,mix-1,mix-2] [--no-realtime-variant] [--keep DIR]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from headline import figure
from load import busy_loops

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "bench" / "results"
TARGET = ">= 0.9"
LOAD_EVERY_S = 2.0
# Another domain than the evaluation's, so that the second graph's traffic is DDS work only, never its topics.
LOAD_DOMAIN_BASE = 150

TORCH_TRAINING = """
import torch
model = torch.nn.Sequential(torch.nn.Linear(512, 2048), torch.nn.ReLU(), torch.nn.Linear(2048, 512))
optimizer = torch.optim.Adam(model.parameters())
x = torch.randn(256, 512)
while True:
    loss = model(x).pow(2).mean()
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
"""

VIDEO_ENCODE = """
import io, av, numpy as np
rng = np.random.default_rng(0)
frames = [rng.integers(0, 255, (480, 640, 3), dtype=np.uint8) for _ in range(8)]
while True:
    with av.open(io.BytesIO(), mode="w", format="mp4") as container:
        stream = container.add_stream("libx264", rate=30)
        stream.width, stream.height, stream.pix_fmt = 640, 480, "yuv420p"
        for i in range(90):
            container.mux(stream.encode(av.VideoFrame.from_ndarray(frames[i % 8], format="rgb24")))
        container.mux(stream.encode())
"""


def _stop_group(process: subprocess.Popen[bytes]) -> None:
    """SIGINT the process group (a launcher stops its nodes), SIGKILL it if it lingers."""
    if process.poll() is None:
        os.killpg(process.pid, signal.SIGINT)
        try:
            process.wait(15)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()


@contextmanager
def realistic_mix(copies: int, env: dict[str, str], log_dir: Path) -> Iterator[None]:
    """`copies` x (a second ROS graph with synthetic cameras, a torch training, a video encode)."""
    started: list[subprocess.Popen[bytes]] = []
    contract = ROOT / "config" / "contracts" / "so101.yaml"
    launch = ROOT / "launch" / "synthetic_streams.launch.yaml"
    try:
        for i in range(copies):
            graph_env = {**env, "ROS_DOMAIN_ID": str(LOAD_DOMAIN_BASE + i)}
            commands = [
                ([sys.executable, "-m", "lerobot_ros.cli", "launch", str(launch), f"contract:={contract}"], graph_env),
                ([sys.executable, "-c", TORCH_TRAINING], env),
                ([sys.executable, "-c", VIDEO_ENCODE], env),
            ]
            for n, (argv, process_env) in enumerate(commands):
                with (log_dir / f"load_{i}_{n}.log").open("wb") as log:
                    started.append(
                        subprocess.Popen(
                            argv, env=process_env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True
                        )
                    )
        time.sleep(5.0)  # the graph discovers itself and the cameras start before the evaluation does
        yield
    finally:
        for process in started:
            _stop_group(process)


@contextmanager
def load_level(level: str, env: dict[str, str], log_dir: Path) -> Iterator[None]:
    kind, _, count = level.partition("-")
    if kind == "idle":
        yield
    elif kind == "busy":
        with busy_loops(int(count)):
            yield
    elif kind == "mix":
        with realistic_mix(int(count), env, log_dir):
            yield
    else:
        raise SystemExit(f"unknown level {level!r}: idle, busy-N or mix-N")


class LoadSampler:
    """The 1-minute load average every LOAD_EVERY_S seconds while a level runs."""

    def __init__(self) -> None:
        self.samples: list[float] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.wait(LOAD_EVERY_S):
            self.samples.append(os.getloadavg()[0])

    def close(self) -> dict[str, float]:
        self._stop.set()
        self._thread.join()
        values = self.samples or [os.getloadavg()[0]]
        return {"min": min(values), "mean": sum(values) / len(values), "max": max(values)}


def demo(env: dict[str, str], log: Path, *args: str) -> None:
    argv = [sys.executable, "-m", "lerobot_ros.cli", "demo", *args]
    with log.open("ab") as out:
        code = subprocess.call(argv, env=env, stdout=out, stderr=subprocess.STDOUT)
    if code != 0:
        tail = log.read_text(errors="replace").strip().splitlines()[-3:]
        raise SystemExit(f"`lerobot-ros demo {args[0]}` exited {code}: {' | '.join(tail)} (log {log})")


def run_level(
    work: Path, level: str, realtime: bool, args: argparse.Namespace, env: dict[str, str], out: Path
) -> dict[str, Any]:
    """One evaluation of the checkpoint in `work` under `level`; its eval folder is moved to `out`."""
    from lerobot_eval.failure_causes import cause_counts

    eval_dir = work / "eval"
    shutil.rmtree(eval_dir, ignore_errors=True)
    argv = ["eval", "--workdir", str(work), "--eval-episodes", str(args.episodes), "--eval-seed", "1000",
            "--eval-max-s", str(args.eval_max_s)] + ([] if realtime else ["--no-realtime"])  # fmt: skip
    out.mkdir(parents=True, exist_ok=True)
    started = time.monotonic()
    with load_level(level, env, out):
        sampler = LoadSampler()
        try:
            demo(env, out / "eval.log", *argv)
        finally:
            load = sampler.close()
    wall = time.monotonic() - started
    shutil.move(str(eval_dir), str(out / "eval"))
    evaluation = json.loads((out / "eval" / "eval.json").read_text())
    executor, latency = evaluation.get("executor", {}), evaluation.get("chunk_latency_s", {})
    rows = evaluation.get("per_episode", [])
    return {
        "level": level,
        "realtime": realtime,
        "successes": evaluation["successes"],
        "episodes": evaluation["episodes"],
        "success_rate": evaluation["success_rate"],
        "expert_successes": evaluation["expert_successes"],
        "chunk_latency_p50_s": latency.get("p50"),
        "chunk_latency_p99_s": latency.get("p99"),
        "starvation_events": executor.get("starvation_events"),
        "starvation_s": executor.get("starvation_s"),
        "tick_jitter_p99_ms": executor.get("tick_jitter_p99_ms"),
        "failure_causes": cause_counts(rows),
        "failures": [
            {k: r.get(k) for k in ("seed", "end", "duration_s", "cause", "why", "signals")}
            for r in rows
            if not r["success"]
        ],
        "load1": load,
        "wall_s": round(wall, 1),
    }


def checkpoint(args: argparse.Namespace, work: Path, env: dict[str, str]) -> Path:
    """The work folder whose checkpoint is evaluated: --demo's (copied without its evaluation), else trained here."""
    if args.demo:
        source = Path(args.demo).resolve()
        if not (source / "train").is_dir():
            raise SystemExit(f"--demo {source}: no train/ folder; run `lerobot-ros demo train --workdir {source}`")
        shutil.copytree(source, work, ignore=shutil.ignore_patterns("eval", "report", "logs"))
        return work
    log = work / "prepare.log"
    work.mkdir(parents=True, exist_ok=True)
    if args.quick:
        demo(env, log, "record", "--workdir", str(work), "--episodes", "2")
        demo(env, log, "train", "--workdir", str(work), "--train-steps", "20", "--batch-size", "8")
    else:
        demo(env, log, "record", "--workdir", str(work))
        demo(env, log, "train", "--workdir", str(work))
    return work


def headline(levels: list[dict[str, Any]]) -> list[dict[str, Any]]:
    idle = next((r for r in levels if r["level"] == "idle" and r["realtime"]), None)
    out = []
    for r in levels:
        name = f"{r['level']}{'' if r['realtime'] else ', realtime off'}"
        out.append(
            figure(f"success, {name}", r["success_rate"], "fraction",
                   baseline=idle["success_rate"] if idle else None,
                   baseline_what="idle, project defaults, same seeds, same run" if idle else None, target=TARGET)
        )  # fmt: skip
        jitter_target = "<= 2 ms idle" if r["level"] == "idle" else "<= 5 ms under the mix"
        out.append(
            figure(f"tick jitter p99, {name}", r["tick_jitter_p99_ms"], "ms",
                   baseline=idle["tick_jitter_p99_ms"] if idle else None,
                   baseline_what="idle, project defaults, same run" if idle else None,
                   target=jitter_target if r["level"] == "idle" or r["level"].startswith("mix") else None)
        )  # fmt: skip
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="tiny checkpoint, 2 episodes, idle/busy-2/mix-1")
    parser.add_argument("--demo", help="a demo work folder with a trained checkpoint (default: train one here)")
    parser.add_argument("--episodes", type=int, default=None, help="episodes per level (20; --quick 2)")
    parser.add_argument("--eval-max-s", type=float, default=None, help="episode limit in sim seconds (20; quick 4)")
    parser.add_argument("--levels", default=None, help="comma-separated: idle, busy-N, mix-N")
    parser.add_argument(
        "--no-realtime-variant", action="store_true", help="only the project's defaults (not also with realtime off)"
    )
    parser.add_argument("--keep", help="keep the work folders here (default: a temporary folder)")
    args = parser.parse_args()
    args.episodes = args.episodes or (2 if args.quick else 20)
    args.eval_max_s = args.eval_max_s or (4.0 if args.quick else 20.0)
    levels = (args.levels or ("idle,busy-2,mix-1" if args.quick else "idle,busy-4,busy-16,mix-1,mix-2")).split(",")

    from lerobot_ros.dds import ros_environment

    env = ros_environment(dict(os.environ))
    env.setdefault("ROS_AUTOMATIC_DISCOVERY_RANGE", "LOCALHOST")
    env.setdefault("ROS_DOMAIN_ID", "97")
    env.setdefault("MUJOCO_GL", "egl")
    base = Path(args.keep).resolve() if args.keep else Path(tempfile.mkdtemp(prefix="eval_under_load_"))
    base.mkdir(parents=True, exist_ok=True)
    results: list[dict[str, Any]] = []
    path = RESULTS / ("eval_under_load_quick.json" if args.quick else "eval_under_load.json")
    try:
        work = checkpoint(args, base / "demo", env)
        for level in levels:
            for realtime in (True,) if args.no_realtime_variant else (True, False):
                name = f"{level}{'' if realtime else '-no-realtime'}"
                print(f"level {name}: {args.episodes} episodes ...", flush=True)
                row = run_level(work, level, realtime, args, env, base / "levels" / name)
                results.append(row)
                print(
                    f"  {row['successes']}/{row['episodes']} successful, chunk latency p50/p99 "
                    f"{_ms(row['chunk_latency_p50_s'])}/{_ms(row['chunk_latency_p99_s'])} ms, starvation "
                    f"{row['starvation_events']} events ({row['starvation_s']} s), tick jitter p99 "
                    f"{row['tick_jitter_p99_ms']} ms, causes {row['failure_causes'] or 'none'}, load "
                    f"{row['load1']['min']:.1f}-{row['load1']['max']:.1f}, {row['wall_s']} s",
                    flush=True,
                )
                write_report(path, args, results, complete=False)  # what is measured survives a later failure
    finally:
        if not args.keep:
            shutil.rmtree(base, ignore_errors=True)
    write_report(path, args, results, complete=True)
    print(f"wrote {path}")
    return 0


def write_report(path: Path, args: argparse.Namespace, results: list[dict[str, Any]], complete: bool) -> None:
    report = {
        "bench": "eval_under_load",
        "quick": args.quick,
        "checkpoint": str(args.demo or ("tiny: 2 demonstrations, 20 training steps" if args.quick else "default demo")),
        "episodes_per_level": args.episodes,
        "eval_max_s": args.eval_max_s,
        "seeds": [1000, 1000 + args.episodes - 1],
        "machine": {"cpus": os.cpu_count(), "platform": platform.platform()},
        "complete": complete,
        "levels": results,
        "headline": headline(results),
    }
    RESULTS.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(report, indent=2) + "\n")


def _ms(seconds: float | None) -> str:
    return "-" if seconds is None else f"{seconds * 1e3:.0f}"


if __name__ == "__main__":
    sys.exit(main())
