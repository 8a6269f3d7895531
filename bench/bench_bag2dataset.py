"""Bag -> dataset conversion throughput for every encoder setting, against LeRobot's own writer, in one run.

Synthetic bags (lerobot_bags.synthetic): 2 cameras 640x480 @ 30 fps (sensor_msgs/Image rgb8, with
sensor noise so frames compress like a real camera's) and JointState @ 100 Hz (state and commands), header
stamps with jitter, mcap. Default: 10 episodes x 30 s.

* ours: `lerobot-ros bag2dataset`'s pipeline (`convert_bags`) with each encoder setting of
  `lerobot_dataset.video.VIDEO_ENCODINGS` (--codecs) and each --jobs value;
* baseline: the straightforward path -- deserialize every message with rosbags (AnyReader), hold-resample at the
  dataset fps, then LeRobot 0.4.4's `LeRobotDataset.create/add_frame/save_episode/finalize` with lerobot-record's
  defaults (PNG image writer, 4 threads per camera, libsvtav1; --baseline-codecs adds LeRobot's h264). It runs in
  the reference venv (.venv-lerobot-ref), with this venv's rosbags put on its path; skipped with a note when that
  venv is absent.

Each run is a separate process; for --rounds rounds every run kind goes once, alternating ours and the baseline,
and the best run of each kind is kept (the machine is shared with other jobs; the load average before and after
each run is recorded). Reported per setting: frames/s, x real time, CPU use (cores busy = CPU s / wall s; CPU ms
per frame over every process, workers and fork server included), peak RSS (largest process), video MB per
minute of recording, and the quality of the setting on 90 synthetic frames (PSNR against the source, KiB per
frame); the CLI's default setting; and ours' peak RSS for one bag of the full length against one a third as
long (memory must not grow with bag length). The JSON's "headline" list holds the figures issue #3 sets
targets for. Results: bench/results/bag2dataset.json.

Two more parts (issue 29 item 5), each in the same run as its own baseline:

* jobs-load: the default setting with `--jobs 1` and `--jobs 2` on the same bags (--load-bags x --load-duration),
  first with no extra load, then with --busy busy-loop processes (bench/load.py); runs alternate 1, 2 for
  --load-rounds rounds, the best of each is kept, and the JSON holds jobs 2 / jobs 1 (frames/s) per load with
  the jobs each run chose (`bag2dataset --jobs` runs at most one job per idle core);
* av1-memory: libsvtav1, `--jobs 1`, peak RSS of one episode of each of --av1-durations (default 30 s and
  300 s; cameras as JPEG CompressedImage so that a 300 s bag takes ~1 GB of disk, not 17 GB).

--parts picks the parts (default all); a run of some parts keeps the other parts' results in the JSON.

Usage: python bench/bench_bag2dataset.py [--quick] [--episodes N] [--duration S] [--codecs NAME...]
                                         [--jobs N...] [--rounds N] [--baseline-codecs NAME...] [--keep]
                                         [--parts throughput jobs-load av1-memory]
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

import numpy as np
from headline import figure
from load import busy_loops

from lerobot_bags.pipeline import DEFAULT_CODEC
from lerobot_dataset.video import VIDEO_ENCODINGS

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "bench" / "results"
REF_PYTHON = Path(os.environ.get("LEROBOT_ROS_REFERENCE_VENV", ROOT / ".venv-lerobot-ref")) / "bin" / "python"
OVERLAY_PACKAGES = ("rosbags", "apsw", "backports", "lz4", "ruamel", "typing_extensions.py")
FPS = 30
QUALITY_FRAMES = 90
ISSUE = "issue #3"
PARTS = ("throughput", "jobs-load", "av1-memory")


def _children_cpu_s() -> float:
    """CPU seconds of this process's still-running children themselves (the fork server), from /proc."""
    tick = os.sysconf("SC_CLK_TCK")
    total = 0.0
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[1]) == os.getpid():  # ppid; utime and stime follow at 11 and 12
            total += (int(fields[11]) + int(fields[12])) / tick
    return total


def _own_rusage() -> dict[str, float]:
    """CPU seconds and peak RSS (MiB) of this process and its waited-for children (run at child exit)."""
    me = resource.getrusage(resource.RUSAGE_SELF)
    kids = resource.getrusage(resource.RUSAGE_CHILDREN)
    return {
        "cpu_s": me.ru_utime + me.ru_stime + kids.ru_utime + kids.ru_stime,
        "peak_rss_mb": max(me.ru_maxrss, kids.ru_maxrss) / 1024,
    }


def _video_bytes(root: Path) -> int:
    return sum(path.stat().st_size for path in (root / "videos").glob("**/*.mp4"))


def run_ours(bags: list[Path], out: Path, jobs: int, codec: str) -> dict[str, Any]:
    """Child mode: convert with the project's pipeline."""
    from lerobot_bags.convert import ConvertOptions
    from lerobot_bags.pipeline import convert_bags
    from lerobot_bags.synthetic import SyntheticBagSpec, contract_for
    from lerobot_contract import Contract

    spec = json.loads((bags[0].parent / "spec.json").read_text())
    contract: Contract = contract_for(SyntheticBagSpec(**spec), camera_dtype="video")
    options = ConvertOptions(contract=contract, task="bench")
    before = _own_rusage()["cpu_s"]  # the conversion's CPU, not the interpreter's start-up and imports
    start = time.perf_counter()
    result = convert_bags(bags, options, root=out, repo_id="bench/ours", codec=codec, jobs=jobs)
    wall = time.perf_counter() - start
    usage = _own_rusage()
    usage["cpu_s"] -= before
    # Forked workers are our children (already in RUSAGE_CHILDREN once joined); a fork server's are not: their
    # CPU time comes back in the per-bag report, the server's own from /proc.
    others = [bag for bag in result.bags if bag.get("worker_parent_pid") != os.getpid()]
    usage["cpu_s"] += _children_cpu_s() + sum(bag.get("worker_cpu_s", 0.0) for bag in others)
    usage["peak_rss_mb"] = max([usage["peak_rss_mb"], *(bag.get("worker_peak_rss_mb", 0.0) for bag in result.bags)])
    frames = result.frames
    return {
        "wall_s": wall,
        "frames": frames,
        "episodes": len(result.episodes),
        "video_bytes": _video_bytes(out),
        "parallelism": None if result.parallelism is None else result.parallelism.as_dict(),
        **usage,
    }


BASELINE = r"""
import json, sys, time, resource
from pathlib import Path
import numpy as np
from rosbags.highlevel import AnyReader
from rosbags.typesys import Stores, get_typestore
from lerobot.datasets.lerobot_dataset import LeRobotDataset

bags, out, spec = [Path(p) for p in json.loads(sys.argv[1])], Path(sys.argv[2]), json.loads(sys.argv[3])
vcodec = sys.argv[4]
cams = spec["cameras"]
joints = ["shoulder_pan", "shoulder_lift", "elbow_flex", "wrist_flex", "wrist_roll", "gripper"]
names = [f"{j}.pos" for j in joints]
features = {"observation.state": {"dtype": "float32", "shape": (6,), "names": names},
            "action": {"dtype": "float32", "shape": (6,), "names": names}}
for cam in cams:
    features[f"observation.images.{cam}"] = {"dtype": "video", "shape": (spec["height"], spec["width"], 3),
                                              "names": ["height", "width", "channels"]}
def cpu_s():
    me, kids = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return me.ru_utime + me.ru_stime + kids.ru_utime + kids.ru_stime
cpu_before = cpu_s()  # the conversion's CPU, not the imports'
start = time.perf_counter()
dataset = LeRobotDataset.create("bench/baseline", fps=30, root=out, features=features, robot_type="so101_follower",
                                use_videos=True, image_writer_processes=0, image_writer_threads=4 * len(cams),
                                vcodec=vcodec)
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
video_bytes = sum(p.stat().st_size for p in (out / "videos").glob("**/*.mp4"))
print("RESULT " + json.dumps({"wall_s": wall, "frames": frames, "episodes": len(bags), "video_bytes": video_bytes,
      "cpu_s": cpu_s() - cpu_before, "peak_rss_mb": max(me.ru_maxrss, kids.ru_maxrss) / 1024}))
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
    load_before = os.getloadavg()[0]
    run = subprocess.run(cmd, capture_output=True, text=True, env=env, check=False)
    lines = [line for line in run.stdout.splitlines() if line.startswith("RESULT ")]
    if run.returncode != 0 or not lines:
        raise RuntimeError(f"{cmd[:3]} failed ({run.returncode}):\n{run.stdout[-2000:]}\n{run.stderr[-4000:]}")
    result = dict(json.loads(lines[-1][len("RESULT ") :]))
    result["load_1min"] = [round(load_before, 2), round(os.getloadavg()[0], 2)]
    shutil.rmtree(out, ignore_errors=True)
    return result


def _figures(result: dict[str, Any], seconds: float) -> dict[str, Any]:
    wall, frames = result["wall_s"], result["frames"]
    return {
        "frames": frames,
        "wall_s": round(wall, 2),
        "frames_per_s": round(frames / wall, 1),
        "x_real_time": round(seconds / wall, 2),
        "cpu_cores_busy": round(result["cpu_s"] / wall, 2),
        "cpu_ms_per_frame": round(1000 * result["cpu_s"] / frames, 1),
        "peak_rss_mb": round(result["peak_rss_mb"], 1),
        "video_mb_per_minute": round(result["video_bytes"] / 2**20 / (frames / FPS / 60), 2),
        "load_1min_before_after": result["load_1min"],
    }


def quality(codec: str, work: Path, noise: float) -> dict[str, float]:
    """PSNR (dB, against the source) and KiB per frame of one camera's 90 synthetic frames through `codec`."""
    import av

    from lerobot_bags.synthetic import camera_pixels
    from lerobot_dataset.video import EpisodeVideoEncoder

    frames = [camera_pixels(i, 0, 480, 640, noise) for i in range(QUALITY_FRAMES)]
    path = work / f"quality-{codec}.mp4"
    encoder = EpisodeVideoEncoder(path, codec=codec, fps=FPS, height=480, width=640)
    for frame in frames:
        encoder.encode(frame)
    encoder.finish()
    with av.open(str(path)) as container:
        decoded = [f.to_ndarray(format="rgb24") for f in container.decode(video=0)]
    mse = np.mean([np.mean((d.astype(np.float64) - f) ** 2) for d, f in zip(decoded, frames, strict=True)])
    size = path.stat().st_size
    path.unlink()
    return {
        "psnr_db": round(float(10 * np.log10(255**2 / mse)), 2),
        "kib_per_frame": round(size / 1024 / len(frames), 2),
    }


def make_bags(
    work: Path, episodes: int, duration: float, tag: str, noise: float, compressed: bool = False
) -> list[Path]:
    from lerobot_bags.synthetic import SyntheticBagSpec, write_synthetic_bag

    folder = work / tag
    folder.mkdir(parents=True, exist_ok=True)
    spec = SyntheticBagSpec(duration_s=duration, noise=noise)
    fields = {k: v for k, v in spec.__dict__.items() if k != "extra"}
    fields["cameras"], fields["joints"] = list(spec.cameras), list(spec.joints)
    fields["compressed"] = list(spec.cameras) if compressed else []
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
    parser.add_argument("--quick", action="store_true", help="2 episodes x 6 s, one round")
    parser.add_argument("--episodes", type=int, default=10)
    parser.add_argument("--duration", type=float, default=30.0, help="seconds per episode")
    parser.add_argument(
        "--codecs", nargs="+", default=None, help=f"encoder settings (default: all, {DEFAULT_CODEC} first)"
    )
    parser.add_argument("--jobs", nargs="+", type=int, default=[1, 2], help="--jobs values to run ours with")
    parser.add_argument("--baseline-codecs", nargs="+", default=["libsvtav1"], help="LeRobot vcodec values")
    parser.add_argument("--workdir", type=Path, default=None, help="where bags and datasets go (default: a temp dir)")
    parser.add_argument("--keep", action="store_true", help="keep the work folder")
    parser.add_argument("--noise", type=float, default=3.0, help="camera sensor noise std (grey levels)")
    parser.add_argument("--skip-baseline", action="store_true")
    parser.add_argument("--rounds", type=int, default=1, help="rounds over every run kind (best of each kept)")
    parser.add_argument("--parts", nargs="+", choices=PARTS, default=list(PARTS), help="what to measure")
    parser.add_argument("--load-bags", type=int, default=4, help="jobs-load: bags per run")
    parser.add_argument("--load-duration", type=float, default=10.0, help="jobs-load: seconds per bag")
    parser.add_argument("--load-rounds", type=int, default=3, help="jobs-load: rounds of --jobs 1, 2 per load")
    parser.add_argument("--busy", type=int, default=4, help="jobs-load: busy-loop processes of the loaded runs")
    parser.add_argument(
        "--av1-durations", nargs=2, type=float, default=[30.0, 300.0], help="av1-memory: the two episode lengths"
    )
    parser.add_argument("--child", choices=("ours",), help=argparse.SUPPRESS)
    parser.add_argument("--bags", nargs="*", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--out", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--codec", default=DEFAULT_CODEC, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child == "ours":
        print("RESULT " + json.dumps(run_ours(args.bags, args.out, args.jobs[0], args.codec)))
        return 0
    if args.quick:
        args.episodes, args.duration, args.rounds = 2, 6.0, 1
        args.load_bags, args.load_duration, args.load_rounds, args.av1_durations = 2, 4.0, 1, [4.0, 12.0]
    codecs = args.codecs or sorted(VIDEO_ENCODINGS, key=lambda name: name != DEFAULT_CODEC)
    unknown = [c for c in codecs if c not in VIDEO_ENCODINGS]
    if unknown:
        parser.error(f"unknown --codecs {unknown}; choose from {list(VIDEO_ENCODINGS)}")
    work = args.workdir or Path(tempfile.mkdtemp(prefix="bench_bag2dataset_"))
    work.mkdir(parents=True, exist_ok=True)
    try:
        results = _bench(args, codecs, work) if "throughput" in args.parts else _previous_results()
        me = [sys.executable, str(Path(__file__).resolve()), "--child", "ours"]
        rows = []
        if "jobs-load" in args.parts:
            results["jobs_under_load"] = _jobs_under_load(args, me, work)
            rows += _jobs_headline(results["jobs_under_load"])
        if "av1-memory" in args.parts:
            results["av1_memory_vs_episode_length"] = _av1_memory(args, me, work)
            rows.append(_av1_headline(results["av1_memory_vs_episode_length"]))
        kinds = {row["figure"].split(",")[0] for row in rows}  # a part's rows replace its earlier rows
        results["headline"] = [r for r in results.get("headline", []) if r["figure"].split(",")[0] not in kinds] + rows
        RESULTS.mkdir(parents=True, exist_ok=True)
        out = RESULTS / "bag2dataset.json"
        out.write_text(json.dumps(results, indent=2))
        for row in results["headline"]:
            print(
                f"  {row['figure']}: {row['value']} {row['unit']} (baseline {row['baseline']}, target {row['target']})"
            )
        print(f"wrote {out}")
        return 0
    finally:
        if not args.keep:
            shutil.rmtree(work, ignore_errors=True)


def _baseline_setup(args: argparse.Namespace, work: Path, bags: list[Path]) -> tuple[list[str] | None, dict[str, str]]:
    """The baseline's command line (without its codec argument) and environment; None when it cannot run."""
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "LD_LIBRARY_PATH", "VIRTUAL_ENV")}
    if args.skip_baseline or not REF_PYTHON.exists():
        return None, env
    env.update(PYTHONPATH=str(_overlay(work)), HF_HUB_OFFLINE="1", HF_HOME=str(work / "hf"))
    spec = (bags[0].parent / "spec.json").read_text()
    return [str(REF_PYTHON), "-c", BASELINE, json.dumps([str(b) for b in bags]), str(work / "baseline"), spec], env


def _bench(args: argparse.Namespace, codecs: list[str], work: Path) -> dict[str, Any]:
    started = time.perf_counter()
    load_start = [round(x, 2) for x in os.getloadavg()]
    bags = make_bags(work, args.episodes, args.duration, "full", args.noise)
    short = make_bags(work, 1, args.duration / 3, "short", args.noise)
    recorded_s = args.episodes * args.duration
    print(f"bags: {args.episodes} x {args.duration:.0f} s written in {time.perf_counter() - started:.1f} s", flush=True)
    me = [sys.executable, str(Path(__file__).resolve()), "--child", "ours"]
    baseline_cmd, env = _baseline_setup(args, work, bags)
    if baseline_cmd is None:
        note = "skipped (--skip-baseline)" if args.skip_baseline else f"skipped: {REF_PYTHON.parent.parent} absent"
    else:
        note = "LeRobot 0.4.4 add_frame/save_episode (reference venv), rosbags AnyReader deserialization"
    kinds = [(codec, jobs) for codec in codecs for jobs in args.jobs]
    baseline_codecs = args.baseline_codecs if baseline_cmd is not None else []
    candidates: dict[str, list[dict[str, Any]]] = {}
    for round_index in range(args.rounds):
        # Alternate: one baseline run after every codec's runs, so each kind sees a similar mix of load.
        order: list[tuple[str, Any]] = []
        for i, kind in enumerate(kinds):
            order.append(("ours", kind))
            if i < len(baseline_codecs):
                order.append(("baseline", baseline_codecs[i]))
        order += [("baseline", c) for c in baseline_codecs[len(kinds) :]]
        for what, kind in order:
            if what == "baseline":
                assert baseline_cmd is not None
                name = f"baseline_{kind}"
                result = _measure([*baseline_cmd, kind], work / "baseline", env)
            else:
                codec, jobs = kind
                name = f"{codec}/jobs_{jobs}"
                out = work / "ours"
                cmd = [*me, "--codec", codec, "--jobs", str(jobs), "--out", str(out), "--bags", *map(str, bags)]
                result = _measure(cmd, out)
            figures = _figures(result, recorded_s)
            candidates.setdefault(name, []).append(figures)
            print(f"round {round_index + 1} {name}: {figures}", flush=True)
    best = {name: max(found, key=lambda r: r["frames_per_s"]) for name, found in candidates.items()}
    baselines = {name.removeprefix("baseline_"): run for name, run in best.items() if name.startswith("baseline_")}
    reference = baselines.get("libsvtav1")
    memory = _memory_runs(me, work, bags, short, args.duration)
    results: dict[str, Any] = {
        "setup": {
            "episodes": args.episodes,
            "episode_s": args.duration,
            "cameras": f"2 x 640x480 rgb8 @ 30 fps (sensor_msgs/Image), sensor noise std {args.noise}",
            "joints": "JointState @ 100 Hz (state + commands)",
            "dataset_fps": FPS,
            "cpu_count": os.cpu_count(),
            "bag_mb": round(sum(f.stat().st_size for b in bags for f in b.iterdir()) / 2**20, 1),
            "rounds": args.rounds,
            "load_average_start": load_start,
            "load_average_end": [round(x, 2) for x in os.getloadavg()],
            "bench_wall_s": round(time.perf_counter() - started, 1),
        },
        "default_codec": DEFAULT_CODEC,
        "codecs": {},
        "baseline": baselines or {"note": note},
        "baseline_note": note,
        "memory_vs_bag_length": memory,
        "all_runs": candidates,
    }
    for codec in codecs:
        runs = {f"jobs_{jobs}": best[f"{codec}/jobs_{jobs}"] for jobs in args.jobs}
        top = max(runs.values(), key=lambda r: r["frames_per_s"])
        results["codecs"][codec] = {
            "description": VIDEO_ENCODINGS[codec].description,
            "default": codec == DEFAULT_CODEC,
            **runs,
            "quality_one_camera": quality(codec, work, args.noise),
            **_key_figures(top, reference, codec),
        }
    results["headline"] = _headline(results, codecs, reference, memory)
    return results


def _previous_results() -> dict[str, Any]:
    """The JSON of an earlier run (its other parts are kept when only some parts run now)."""
    try:
        previous: dict[str, Any] = json.loads((RESULTS / "bag2dataset.json").read_text())
    except (OSError, json.JSONDecodeError):
        return {}
    return previous


def _jobs_under_load(args: argparse.Namespace, me: list[str], work: Path) -> dict[str, Any]:
    """--jobs 1 against --jobs 2 (default codec) with no extra load and with `args.busy` busy loops, one run."""
    bags = make_bags(work, args.load_bags, args.load_duration, "load", args.noise)
    recorded_s = args.load_bags * args.load_duration
    out = work / "ours"
    levels: dict[str, Any] = {}
    for busy in (0, args.busy):
        runs: dict[int, list[dict[str, Any]]] = {1: [], 2: []}
        with busy_loops(busy):
            for round_index in range(args.load_rounds):
                for jobs in (1, 2):
                    cmd = [*me, "--codec", DEFAULT_CODEC, "--jobs", str(jobs), "--out", str(out), "--bags"]
                    result = _measure([*cmd, *map(str, bags)], out)
                    figures = _figures(result, recorded_s)
                    figures["parallelism"] = result.get("parallelism")
                    runs[jobs].append(figures)
                    print(f"busy {busy} round {round_index + 1} --jobs {jobs}: {figures}", flush=True)
        best = {jobs: max(found, key=lambda r: r["frames_per_s"]) for jobs, found in runs.items()}
        paired = [round(b["frames_per_s"] / a["frames_per_s"], 3) for a, b in zip(runs[1], runs[2], strict=True)]
        levels[f"busy_{busy}"] = {
            "busy_loops": busy,
            "jobs_1": best[1],
            "jobs_2": best[2],
            "ratio_jobs2_over_jobs1": round(best[2]["frames_per_s"] / best[1]["frames_per_s"], 3),
            "ratio_each_round": paired,
            "jobs_chosen_by_jobs_2_runs": [r["parallelism"]["jobs"] if r["parallelism"] else None for r in runs[2]],
            "all_runs": runs,
        }
    return {
        "setup": f"{args.load_bags} bags x {args.load_duration:g} s, {DEFAULT_CODEC}, {os.cpu_count()} cores, "
        f"best of {args.load_rounds} alternating rounds",
        **levels,
    }


def _jobs_headline(section: dict[str, Any]) -> list[dict[str, Any]]:
    rows = []
    for level in (value for key, value in section.items() if key.startswith("busy_")):
        target = ">= 1.2" if level["busy_loops"] == 0 else ">= 1.0"
        rows.append(
            figure(
                f"--jobs 2 / --jobs 1 frames/s, {level['busy_loops']} busy loops",
                level["ratio_jobs2_over_jobs1"],
                "x",
                target=f"{target} (issue 29 item 5, same run)",
            )
        )
    return rows


def _av1_memory(args: argparse.Namespace, me: list[str], work: Path) -> dict[str, Any]:
    """Peak RSS of one libsvtav1 episode of each length (--jobs 1), in one run."""
    out = work / "ours"
    peaks = {}
    for seconds in args.av1_durations:
        bag = make_bags(work, 1, seconds, f"av1-{seconds:g}s", args.noise, compressed=True)
        cmd = [*me, "--codec", "libsvtav1", "--jobs", "1", "--out", str(out), "--bags", *map(str, bag)]
        result = _measure(cmd, out)
        peaks[seconds] = result
        print(f"av1 {seconds:g} s episode: {_figures(result, seconds)}", flush=True)
        shutil.rmtree(bag[0].parent, ignore_errors=True)
    short, long = (peaks[s] for s in args.av1_durations)
    return {
        "episode_s": list(args.av1_durations),
        "peak_rss_mb": [round(short["peak_rss_mb"], 1), round(long["peak_rss_mb"], 1)],
        "growth": round(long["peak_rss_mb"] / short["peak_rss_mb"], 3),
        "parallelism": long.get("parallelism"),
        "frames": [short["frames"], long["frames"]],
        "note": "one episode each, 2 cameras 640x480 (JPEG CompressedImage in the bag), libsvtav1, --jobs 1",
    }


def _av1_headline(section: dict[str, Any]) -> dict[str, Any]:
    return figure(
        "libsvtav1 peak RSS, one {:g} s episode over one {:g} s episode".format(*reversed(section["episode_s"])),
        section["growth"],
        "x",
        target="<= 1.1 (issue 29 item 5)",
    )


def _memory_runs(me: list[str], work: Path, bags: list[Path], short: list[Path], duration: float) -> dict[str, Any]:
    """Peak RSS of one bag of the full length against one a third as long (default codec, --jobs 1)."""
    out = work / "ours"
    cmd = [*me, "--codec", DEFAULT_CODEC, "--jobs", "1", "--out", str(out), "--bags"]
    full = _measure([*cmd, str(bags[0])], out)
    third = _measure([*cmd, *map(str, short)], out)
    return {
        "peak_rss_mb_one_bag_full_length": round(full["peak_rss_mb"], 1),
        "peak_rss_mb_one_bag_third_length": round(third["peak_rss_mb"], 1),
        "growth": round(full["peak_rss_mb"] / third["peak_rss_mb"], 3),
        "bag_s": [duration, round(duration / 3, 1)],
        "note": f"one process, --jobs 1, {DEFAULT_CODEC}",
    }


def _key_figures(top: dict[str, Any], reference: dict[str, Any] | None, codec: str) -> dict[str, Any]:
    """The setting's best run as {value, baseline, target, unit} objects (baseline: LeRobot's libsvtav1 path)."""
    target = (lambda text: text) if codec == DEFAULT_CODEC else (lambda text: None)

    def base(key: str) -> float | None:
        return reference[key] if reference else None

    return {
        "frames_per_s": {
            "value": top["frames_per_s"],
            "baseline": base("frames_per_s"),
            "target": target(">= 2x baseline"),
            "unit": "dataset frames/s (2 cameras each), best of the --jobs runs",
        },
        "x_real_time": {
            "value": top["x_real_time"],
            "baseline": base("x_real_time"),
            "target": target(">= 4"),
            "unit": "x",
        },
        "cpu_ms_per_frame": {
            "value": top["cpu_ms_per_frame"],
            "baseline": base("cpu_ms_per_frame"),
            "unit": "CPU ms per dataset frame, all processes (less sensitive to other load than wall time)",
        },
        "peak_rss_mb": {"value": top["peak_rss_mb"], "baseline": base("peak_rss_mb"), "unit": "MiB, largest process"},
        "video_mb_per_minute": {
            "value": top["video_mb_per_minute"],
            "baseline": base("video_mb_per_minute"),
            "unit": "MiB of mp4 per minute of recording, 2 cameras",
        },
    }


def _headline(
    results: dict[str, Any], codecs: list[str], reference: dict[str, Any] | None, memory: dict[str, Any]
) -> list[dict[str, Any]]:
    what = "rosbags AnyReader + LeRobot 0.4.4 add_frame/save_episode, libsvtav1 (LeRobot's defaults), same run"
    base = (lambda key: reference[key]) if reference else (lambda key: None)
    rows = []
    for codec in codecs:
        entry = results["codecs"][codec]
        default = codec == DEFAULT_CODEC
        label = f"{codec}{' (bag2dataset default)' if default else ''}"
        rows.append(
            figure(
                f"conversion x real time, {label}",
                entry["x_real_time"]["value"],
                "x real time",
                baseline=base("x_real_time"),
                baseline_what=what if reference else None,
                target=f">= 4 ({ISSUE}, 2 cores)" if default else None,
            )
        )
        if default:
            rows.append(
                figure(
                    f"conversion frames/s, {label}",
                    entry["frames_per_s"]["value"],
                    "frames/s",
                    baseline=base("frames_per_s"),
                    baseline_what=what if reference else None,
                    target=f">= 2x baseline ({ISSUE})",
                )
            )
            rows.append(
                figure(
                    f"CPU per frame, {label}",
                    entry["cpu_ms_per_frame"]["value"],
                    "CPU ms/frame",
                    baseline=base("cpu_ms_per_frame"),
                    baseline_what=what if reference else None,
                )
            )
            rows.append(
                figure(
                    f"video size, {label}",
                    entry["video_mb_per_minute"]["value"],
                    "MiB per minute (2 cameras)",
                    baseline=base("video_mb_per_minute"),
                    baseline_what=what if reference else None,
                )
            )
    rows.append(
        figure(
            "peak RSS, one {:g} s bag over one {:g} s bag".format(*memory["bag_s"]),
            memory["growth"],
            "x",
            target=f"<= 1.1 ({ISSUE}: memory must not grow with bag length)",
        )
    )
    return rows


if __name__ == "__main__":
    sys.exit(main())
