"""Bag -> dataset conversion throughput, against LeRobot's own writer as a baseline, in the same run.

Synthetic bags (lerobot_recorder.bags.synthetic): 2 cameras 640x480 @ 30 fps (sensor_msgs/Image rgb8, with
sensor noise so frames compress like a real camera's) and JointState @ 100 Hz (state and commands), header
stamps with jitter, mcap. Default: 10 episodes x 30 s.

* ours: `lerobot-ros bag2dataset`'s pipeline (`convert_bags`), libsvtav1, with --jobs 1 and 2;
* baseline: the straightforward path -- deserialize every message with rosbags (AnyReader), hold-resample at the
  dataset fps, then LeRobot 0.4.4's `LeRobotDataset.create/add_frame/save_episode/finalize` with lerobot-record's
  defaults (PNG image writer, 4 threads per camera, libsvtav1). It runs in the reference venv
  (.venv-lerobot-ref), with this venv's rosbags put on its path; skipped with a note when that venv is absent.

Each run is a separate process; ours (--jobs 1) and the baseline alternate for --rounds rounds and the best
run of each is kept (the machine is shared with other jobs). Reported: frames/s, x real time, CPU use (cores
busy = CPU s / wall s, and CPU ms per frame over all processes), peak RSS (largest process); and ours' peak
RSS for one bag of the full length against one a third as long (memory must not grow with bag length).
Results: bench/results/bag2dataset.json.

Usage: python bench/bench_bag2dataset.py [--quick] [--episodes N] [--duration S] [--keep]
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "bench" / "results"
REF_PYTHON = Path(os.environ.get("LEROBOT_ROS_REFERENCE_VENV", ROOT / ".venv-lerobot-ref")) / "bin" / "python"
OVERLAY_PACKAGES = ("rosbags", "apsw", "backports", "lz4", "ruamel", "typing_extensions.py")


def _child_rusage() -> dict[str, float]:
    """CPU seconds and peak RSS (MiB) of this process and its waited-for children (run at child exit)."""
    me = resource.getrusage(resource.RUSAGE_SELF)
    kids = resource.getrusage(resource.RUSAGE_CHILDREN)
    return {
        "cpu_s": me.ru_utime + me.ru_stime + kids.ru_utime + kids.ru_stime,
        "peak_rss_mb": max(me.ru_maxrss, kids.ru_maxrss) / 1024,
    }


def run_ours(bags: list[Path], out: Path, jobs: int, codec: str) -> dict[str, Any]:
    """Child mode: convert with the project's pipeline."""
    from lerobot_recorder.bags.convert import ConvertOptions
    from lerobot_recorder.bags.pipeline import convert_bags
    from lerobot_recorder.bags.synthetic import SyntheticBagSpec, contract_for
    from lerobot_recorder.contract import Contract

    spec = json.loads((bags[0].parent / "spec.json").read_text())
    contract: Contract = contract_for(SyntheticBagSpec(**spec), camera_dtype="video")
    options = ConvertOptions(contract=contract, task="bench")
    start = time.perf_counter()
    result = convert_bags(bags, options, root=out, repo_id="bench/ours", codec=codec, jobs=jobs)
    wall = time.perf_counter() - start
    usage = _child_rusage()
    # Fork-server workers are not our children: their CPU time comes back in the per-bag report.
    usage["cpu_s"] += sum(bag.get("worker_cpu_s", 0.0) for bag in result.bags)
    usage["peak_rss_mb"] = max([usage["peak_rss_mb"], *(bag.get("worker_peak_rss_mb", 0.0) for bag in result.bags)])
    return {"wall_s": wall, "frames": result.frames, "episodes": len(result.episodes), **usage}


BASELINE = r"""
import json, sys, time, resource
import numpy as np
from pathlib import Path
from rosbags.highlevel import AnyReader
from rosbags.typesys import Stores, get_typestore
from lerobot.datasets.lerobot_dataset import LeRobotDataset

bags, out, spec = [Path(p) for p in json.loads(sys.argv[1])], Path(sys.argv[2]), json.loads(sys.argv[3])
cams = spec["cameras"]
joints = ["shoulder_pan", "shoulder_lift", "elbow_flex", "wrist_flex", "wrist_roll", "gripper"]
names = [f"{j}.pos" for j in joints]
features = {"observation.state": {"dtype": "float32", "shape": (6,), "names": names},
            "action": {"dtype": "float32", "shape": (6,), "names": names}}
for cam in cams:
    features[f"observation.images.{cam}"] = {"dtype": "video", "shape": (spec["height"], spec["width"], 3),
                                              "names": ["height", "width", "channels"]}
start = time.perf_counter()
dataset = LeRobotDataset.create("bench/baseline", fps=30, root=out, features=features, robot_type="so101_follower",
                                use_videos=True, image_writer_processes=0, image_writer_threads=4 * len(cams))
topics = {"/follower/joint_states": "observation.state", "/follower/joint_commands": "action"}
topics.update({f"/cameras/{c}/image_raw": f"observation.images.{c}" for c in cams})
frames = 0
typestore = get_typestore(Stores.ROS2_HUMBLE)
for bag in bags:
    data = {key: ([], []) for key in topics.values()}
    with AnyReader([bag], default_typestore=typestore) as reader:
        for conn, _, raw in reader.messages():
            msg = reader.deserialize(raw, conn.msgtype)
            key = topics.get(conn.topic)
            if key is None:
                continue
            stamp = msg.header.stamp.sec * 10**9 + msg.header.stamp.nanosec
            if key.startswith("observation.images"):
                value = msg.data.reshape(msg.height, msg.width, 3)
            else:
                order = [list(msg.name).index(j) for j in joints]
                value = np.degrees(np.asarray(msg.position)[order]).astype(np.float32)
            data[key][0].append(stamp)
            data[key][1].append(value)
    t0 = max(s[0] for s, _ in data.values())
    t_end = min(s[-1] for s, _ in data.values())
    k = 0
    while True:
        t = t0 + (2 * k * 10**9 + 30) // 60
        if t > t_end:
            break
        frame = {"task": "bench"}
        for key, (stamps, values) in data.items():
            frame[key] = values[int(np.searchsorted(stamps, t, side="right")) - 1]
        dataset.add_frame(frame)
        frames += 1
        k += 1
    dataset.save_episode()
dataset.finalize()
wall = time.perf_counter() - start
me, kids = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
print("RESULT " + json.dumps({"wall_s": wall, "frames": frames, "episodes": len(bags),
      "cpu_s": me.ru_utime + me.ru_stime + kids.ru_utime + kids.ru_stime,
      "peak_rss_mb": max(me.ru_maxrss, kids.ru_maxrss) / 1024}))
"""


def _overlay(work: Path) -> Path:
    """A folder of links to this venv's rosbags and its dependencies, for the reference venv's path."""
    import rosbags

    site = Path(next(iter(rosbags.__path__))).resolve().parent
    overlay = work / "overlay"
    overlay.mkdir(exist_ok=True)
    for name in OVERLAY_PACKAGES:
        if (site / name).exists() and not (overlay / name).exists():
            (overlay / name).symlink_to(site / name)
    for so in site.glob("apsw*.so"):
        if not (overlay / so.name).exists():
            (overlay / so.name).symlink_to(so)
    return overlay


def _measure(cmd: list[str], out: Path, env: dict[str, str] | None = None) -> dict[str, Any]:
    shutil.rmtree(out, ignore_errors=True)
    run = subprocess.run(cmd, capture_output=True, text=True, env=env, check=False)
    lines = [line for line in run.stdout.splitlines() if line.startswith("RESULT ")]
    if run.returncode != 0 or not lines:
        raise RuntimeError(f"{cmd[:3]} failed ({run.returncode}):\n{run.stdout[-2000:]}\n{run.stderr[-4000:]}")
    return dict(json.loads(lines[-1][len("RESULT ") :]))


def _figures(result: dict[str, Any], seconds: float) -> dict[str, Any]:
    wall = result["wall_s"]
    return {
        "frames": result["frames"],
        "wall_s": round(wall, 2),
        "frames_per_s": round(result["frames"] / wall, 1),
        "x_real_time": round(seconds / wall, 2),
        "cpu_cores_busy": round(result["cpu_s"] / wall, 2),
        "cpu_ms_per_frame": round(1000 * result["cpu_s"] / result["frames"], 1),
        "peak_rss_mb": round(result["peak_rss_mb"], 1),
    }


def make_bags(work: Path, episodes: int, duration: float, tag: str, noise: float) -> list[Path]:
    from lerobot_recorder.bags.synthetic import SyntheticBagSpec, write_synthetic_bag

    folder = work / tag
    folder.mkdir(parents=True, exist_ok=True)
    spec = SyntheticBagSpec(duration_s=duration, noise=noise)
    fields = {k: v for k, v in spec.__dict__.items() if k != "extra"}
    fields["cameras"], fields["compressed"], fields["joints"] = list(spec.cameras), [], list(spec.joints)
    (folder / "spec.json").write_text(json.dumps(fields))
    bags = []
    for i in range(episodes):
        path = folder / f"episode_{i:03d}"
        if not path.exists():
            write_synthetic_bag(path, SyntheticBagSpec(**{**fields, "seed": i}))
        bags.append(path)
    return bags


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="2 episodes x 6 s")
    parser.add_argument("--episodes", type=int, default=10)
    parser.add_argument("--duration", type=float, default=30.0, help="seconds per episode")
    parser.add_argument("--codec", default="libsvtav1", choices=("libsvtav1", "h264"))
    parser.add_argument("--workdir", type=Path, default=None, help="where bags and datasets go (default: a temp dir)")
    parser.add_argument("--keep", action="store_true", help="keep the work folder")
    parser.add_argument("--noise", type=float, default=3.0, help="camera sensor noise std (grey levels)")
    parser.add_argument("--skip-baseline", action="store_true")
    parser.add_argument("--rounds", type=int, default=2, help="alternating rounds of ours/baseline (best kept)")
    parser.add_argument("--child", choices=("ours",), help=argparse.SUPPRESS)
    parser.add_argument("--bags", nargs="*", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--out", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--jobs", type=int, default=1, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child == "ours":
        print("RESULT " + json.dumps(run_ours(args.bags, args.out, args.jobs, args.codec)))
        return 0
    if args.quick:
        args.episodes, args.duration, args.rounds = 2, 6.0, 1
    work = args.workdir or Path(tempfile.mkdtemp(prefix="bench_bag2dataset_"))
    work.mkdir(parents=True, exist_ok=True)
    try:
        return _bench(args, work)
    finally:
        if not args.keep:
            shutil.rmtree(work, ignore_errors=True)


def _bench(args: argparse.Namespace, work: Path) -> int:
    t = time.perf_counter()
    bags = make_bags(work, args.episodes, args.duration, "full", args.noise)
    short = make_bags(work, 1, args.duration / 3, "short", args.noise)
    recorded_s = args.episodes * args.duration
    print(f"bags: {args.episodes} x {args.duration:.0f} s written in {time.perf_counter() - t:.1f} s", flush=True)
    me = [sys.executable, str(Path(__file__).resolve()), "--child", "ours", "--codec", args.codec]
    results: dict[str, Any] = {
        "setup": {
            "episodes": args.episodes,
            "episode_s": args.duration,
            "cameras": f"2 x 640x480 rgb8 @ 30 fps (sensor_msgs/Image), sensor noise std {args.noise}",
            "joints": "JointState @ 100 Hz (state + commands)",
            "dataset_fps": 30,
            "codec": args.codec,
            "cpu_count": os.cpu_count(),
            "bag_mb": round(sum(f.stat().st_size for b in bags for f in b.iterdir()) / 2**20, 1),
        }
    }
    baseline_cmd: list[str] | None = None
    env: dict[str, str] | None = None
    if args.skip_baseline:
        note = "skipped (--skip-baseline)"
    elif not REF_PYTHON.exists():
        note = f"skipped: reference venv {REF_PYTHON.parent.parent} absent (scripts/setup.sh --with-lerobot-reference)"
    else:
        env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "LD_LIBRARY_PATH", "VIRTUAL_ENV")}
        env.update(PYTHONPATH=str(_overlay(work)), HF_HUB_OFFLINE="1", HF_HOME=str(work / "hf"))
        spec = (bags[0].parent / "spec.json").read_text()
        baseline_cmd = [
            str(REF_PYTHON),
            "-c",
            BASELINE,
            json.dumps([str(b) for b in bags]),
            str(work / "baseline"),
            spec,
        ]
        note = "LeRobot 0.4.4 add_frame/save_episode (reference venv), rosbags AnyReader deserialization"
    # The machine is shared: ours and the baseline run alternately, `--rounds` times, best run of each kept.
    candidates: dict[str, list[dict[str, Any]]] = {"jobs_1": [], "jobs_2": [], "baseline": []}
    for round_index in range(args.rounds):
        for name in ("jobs_1", "baseline", "jobs_2"):
            if name == "baseline" and baseline_cmd is None:
                continue
            if name == "jobs_2" and round_index > 0:
                continue
            if name == "baseline":
                assert baseline_cmd is not None
                result = _measure(baseline_cmd, work / "baseline", env)
            else:
                out = work / f"ours_{name}"
                jobs = name.split("_")[1]
                result = _measure([*me, "--jobs", jobs, "--out", str(out), "--bags", *map(str, bags)], out)
            figures = _figures(result, recorded_s)
            candidates[name].append(figures)
            print(f"round {round_index + 1} {name}: {figures}", flush=True)
    runs = {name: max(found, key=lambda r: r["frames_per_s"]) for name, found in candidates.items() if found}
    baseline = runs.pop("baseline", None)
    out = work / "ours_short"
    short_run = _measure([*me, "--jobs", "1", "--out", str(out), "--bags", *map(str, short)], out)
    out = work / "ours_one"
    one_run = _measure([*me, "--jobs", "1", "--out", str(out), "--bags", str(bags[0])], out)
    best = max(runs.values(), key=lambda r: r["frames_per_s"])
    results["ours"] = runs
    results["all_rounds"] = candidates
    results["baseline"] = baseline or {"note": note}
    results["baseline_note"] = note
    results["frames_per_s"] = {
        "value": best["frames_per_s"],
        "unit": "dataset frames/s (2 cameras each)",
        "baseline": baseline["frames_per_s"] if baseline else "",
        "target": ">= 2x baseline",
    }
    results["x_real_time"] = {"value": best["x_real_time"], "unit": "x", "target": ">= 4x"}
    if baseline:
        results["cpu_ms_per_frame"] = {
            "value": best["cpu_ms_per_frame"],
            "baseline": baseline["cpu_ms_per_frame"],
            "unit": "CPU ms per dataset frame (all processes; less sensitive to other load than wall time)",
        }
        results["speedup_vs_baseline"] = {
            "value": round(best["frames_per_s"] / baseline["frames_per_s"], 2),
            "unit": "x",
            "target": ">= 2",
        }
    results["memory_vs_bag_length"] = {
        "peak_rss_mb_one_bag_full_length": round(one_run["peak_rss_mb"], 1),
        "peak_rss_mb_one_bag_third_length": round(short_run["peak_rss_mb"], 1),
        "peak_rss_mb_all_bags": runs["jobs_1"]["peak_rss_mb"],
        "note": "one process per run, --jobs 1; one bag of the full episode length against one a third as long",
    }
    RESULTS.mkdir(parents=True, exist_ok=True)
    out = RESULTS / "bag2dataset.json"
    out.write_text(json.dumps(results, indent=2))
    print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
