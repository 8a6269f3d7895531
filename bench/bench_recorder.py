"""Live recorder under sustained load: 3 cameras 640x480 @ 30 fps + joints @ 100 Hz for a few minutes.

Runs the synthetic publishers (scene-like pictures with noise, so the encoders do real work) and the
recorder node as separate processes in their own ROS domain, records one long episode, and reports:

* frames expected (duration x fps) vs written, dropped (stale / sync / writer overrun / bad input), late samples;
* encoder lag: the most frames waiting in the recorder's writer queue and in the encoder queues (from
  /diagnostics, sampled every second), and how long the save took after the episode ended;
* CPU (% of one core, averaged over the run) and memory (peak RSS) of the recorder and of the publishers;
* in the same run, the direct DatasetWriter throughput on the same frames (frames/s with add_frame as fast as
  the encoders take them): the ceiling the live path is compared with.

LeRobot's guidance for comparison: 2 cameras 640x480 @ 30 fps is its "low" recording load.
Writes bench/results/recorder.json (recorder_quick.json with --quick).

Usage: python bench/bench_recorder.py [--quick] [--duration S] [--codec libsvtav1|h264] [--cameras N]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import numpy as np
import yaml
from headline import figure
from load import busy_loops

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "bench" / "results"
CLOCK_TICKS = os.sysconf("SC_CLK_TCK")
CAMERA_NAMES = ("front", "wrist", "top", "side")


def contract(cameras: int, height: int, width: int) -> dict[str, Any]:
    joints = ["shoulder_pan", "shoulder_lift", "elbow_flex", "wrist_flex", "wrist_roll", "gripper"]
    features: dict[str, Any] = {
        "observation.state": {
            "topic": "/follower/joint_states",
            "type": "sensor_msgs/msg/JointState",
            "field": "position",
            "joints": joints,
            "names": [f"{j}.pos" for j in joints],
            "units": "rad_to_deg",
            "max_age_s": 0.1,
        }
    }
    for name in CAMERA_NAMES[:cameras]:
        features[f"observation.images.{name}"] = {
            "topic": f"/cameras/{name}/image_raw",
            "type": "sensor_msgs/msg/Image",
            "shape": [height, width, 3],
            "dtype": "video",
            "max_age_s": 0.1,
        }
    return {"robot_type": "so101_follower", "fps": 30, "stamp": "header", "sync_tolerance_s": 0.1, "features": features}


class ProcessMeter:
    """CPU time and peak RSS of one process, from /proc."""

    def __init__(self, pid: int) -> None:
        self.pid = pid
        self.start_cpu = self.cpu_s()
        self.start = time.monotonic()
        self.peak_rss_mb = 0.0
        self.end_cpu = self.start_cpu
        self.end = self.start

    def cpu_s(self) -> float:
        try:
            fields = Path(f"/proc/{self.pid}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            return self.end_cpu if hasattr(self, "end_cpu") else 0.0
        return (int(fields[11]) + int(fields[12])) / CLOCK_TICKS

    def sample(self) -> None:
        try:
            for line in Path(f"/proc/{self.pid}/status").read_text().splitlines():
                if line.startswith("VmHWM:"):
                    self.peak_rss_mb = max(self.peak_rss_mb, int(line.split()[1]) / 1024)
        except OSError:
            return
        self.end_cpu = self.cpu_s()
        self.end = time.monotonic()

    def report(self) -> dict[str, float]:
        elapsed = max(self.end - self.start, 1e-9)
        return {
            "cpu_percent_of_one_core": round(100 * (self.end_cpu - self.start_cpu) / elapsed, 1),
            "peak_rss_mb": round(self.peak_rss_mb, 1),
        }


def watch_diagnostics(stop: threading.Event, samples: list[dict[str, str]]) -> None:
    import rclpy
    from diagnostic_msgs.msg import DiagnosticArray

    context = rclpy.Context()
    rclpy.init(context=context)
    node = rclpy.create_node("bench_watch", context=context)

    def on(msg: Any) -> None:
        for status in msg.status:
            if status.name.startswith("lerobot_recorder"):
                samples.append({kv.key: kv.value for kv in status.values} | {"t": str(time.monotonic())})

    node.create_subscription(DiagnosticArray, "/diagnostics", on, 20)
    from rclpy.executors import SingleThreadedExecutor

    executor = SingleThreadedExecutor(context=context)
    executor.add_node(node)
    while not stop.is_set():
        executor.spin_once(timeout_sec=0.2)
    node.destroy_node()
    context.shutdown()


def live_run(args: argparse.Namespace, work: Path) -> dict[str, Any]:
    from lerobot_dataset import DatasetReader
    from lerobot_ros.dds import ros_environment
    from lerobot_ros.testing import lease_domain, venv_script

    lease = lease_domain()
    os.environ.update(ros_environment())
    os.environ["ROS_DOMAIN_ID"] = str(lease.domain_id)
    os.environ["ROS_AUTOMATIC_DISCOVERY_RANGE"] = "LOCALHOST"
    env = dict(os.environ)
    contract_path = work / "contract.yaml"
    contract_path.write_text(yaml.safe_dump(contract(args.cameras, args.height, args.width), sort_keys=False))
    root = work / "dataset"
    logs = work / "logs"
    logs.mkdir()
    publisher = subprocess.Popen(
        [
            venv_script("synthetic_streams"),
            "--ros-args",
            "-p",
            f"contract:={contract_path}",
            "-p",
            "picture_style:=scene",
        ],
        env=env,
        stdout=(logs / "streams.log").open("w"),
        stderr=subprocess.STDOUT,
    )
    recorder = subprocess.Popen(
        [
            venv_script("recorder"),
            "--ros-args",
            "-p",
            f"contract:={contract_path}",
            "-p",
            f"root:={root}",
            "-p",
            "task:=bench",
            "-p",
            f"episode_time_s:={float(args.duration)}",
            "-p",
            "num_episodes:=1",
            "-p",
            f"video_codec:={args.codec}",
            "-p",
            f"latency_s:={args.latency}",
            "-p",
            "shutdown_when_done:=true",
            "-p",
            "min_free_mb:=50.0",
            "-p",
            "startup_timeout_s:=60.0",
        ],
        env=env,
        stdout=(logs / "recorder.log").open("w"),
        stderr=subprocess.STDOUT,
    )
    samples: list[dict[str, str]] = []
    stop = threading.Event()
    watcher = threading.Thread(target=watch_diagnostics, args=(stop, samples), daemon=True)
    watcher.start()
    rec_meter, pub_meter = ProcessMeter(recorder.pid), ProcessMeter(publisher.pid)
    recording_ended: float | None = None
    try:
        while recorder.poll() is None:
            time.sleep(0.5)
            rec_meter.sample()
            pub_meter.sample()
            if recording_ended is None and samples and samples[-1].get("state") == "saving":
                recording_ended = time.monotonic()
            if time.monotonic() - rec_meter.start > args.duration + 300:
                recorder.terminate()
    finally:
        stop.set()
        publisher.terminate()
        publisher.wait(10)
        lease.release()
    saved_at = time.monotonic()
    log = (logs / "recorder.log").read_text()
    recording = [s for s in samples if s.get("state") == "recording"]
    reader = DatasetReader(root) if (root / "meta" / "info.json").is_file() else None
    written = len(reader) if reader is not None else 0
    last = recording[-1] if recording else {}
    return {
        "duration_s": args.duration,
        "frames_expected": int(args.duration * 30),
        "frames_written": written,
        "dropped": int(last.get("dropped", -1)),
        "dropped_stale": int(last.get("dropped_stale", -1)),
        "dropped_sync": int(last.get("dropped_sync", -1)),
        "dropped_writer_overrun": int(last.get("dropped_overrun", -1)),
        "late_samples": int(last.get("late_samples", -1)),
        "max_queued_frames": max((int(s.get("queued_frames", 0)) for s in recording), default=None),
        "max_encoder_lag_frames": max((int(s.get("encoder_lag_frames", 0)) for s in recording), default=None),
        "mean_encoder_lag_frames": round(float(np.mean([int(s.get("encoder_lag_frames", 0)) for s in recording])), 2)
        if recording
        else None,
        "max_skew_s": {k[: -len(".skew_max_s")]: float(v) for k, v in last.items() if k.endswith(".skew_max_s")},
        "save_s": round(saved_at - recording_ended, 2) if recording_ended else None,
        "recorder": rec_meter.report(),
        "publishers": pub_meter.report(),
        "recorder_exit": recorder.returncode,
        "recorder_log_tail": log.splitlines()[-3:],
    }


def direct_writer(args: argparse.Namespace, work: Path, frames: int) -> dict[str, Any]:
    """DatasetWriter.add_frame as fast as it goes, same schema and scene-like frames."""
    from lerobot_contract import Contract
    from lerobot_dataset import DatasetWriter, feature_specs

    spec = feature_specs(Contract.from_dict(contract(args.cameras, args.height, args.width)))
    rng = np.random.default_rng(0)
    pool = []
    for i in range(30):
        rgb = np.full((args.height, args.width, 3), 8 + 4 * i, np.uint8)
        rgb[:, :, 1] = np.linspace(0, 255, args.width, dtype=np.uint8)[None, :]
        rgb[40 + 3 * i : 160 + 3 * i, 7 * i : 120 + 7 * i] = (200, 60, 40)
        pool.append(np.clip(rgb.astype(np.int16) + rng.integers(-4, 5, rgb.shape), 0, 255).astype(np.uint8))
    start = time.monotonic()
    with DatasetWriter.create(
        work / "direct", repo_id="bench/direct", fps=30, features=spec, video_codec=args.codec
    ) as writer:
        writer.start_episode("bench")
        for i in range(frames):
            frame: dict[str, Any] = {"observation.state": np.zeros(6, np.float32)}
            for key in spec:
                if key.startswith("observation.images."):
                    frame[key] = pool[i % len(pool)]
            writer.add_frame(frame)
        writer.save_episode()
    elapsed = time.monotonic() - start
    return {
        "frames": frames,
        "seconds": round(elapsed, 2),
        "frames_per_s": round(frames / elapsed, 1),
        "realtime_factor_at_30fps": round(frames / elapsed / 30, 2),
    }


def headline(args: argparse.Namespace, live: dict[str, Any], direct: dict[str, Any]) -> list[dict[str, Any]]:
    """Drops against issue #6's target (none), encoder lag, cost; the direct writer's speed for comparison.
    The bench has no baseline (LeRobot's guidance is a load level, not a measured figure)."""

    def counted(value: int | None) -> int | None:
        return None if value is None or value < 0 else value  # -1: the recorder published no diagnostics

    where = f"{args.cameras} x {args.width}x{args.height} @ 30 fps, {args.codec}, {args.duration:g} s"
    written = 100 * live["frames_written"] / live["frames_expected"] if live["frames_expected"] else None
    return [
        figure(f"frames dropped, {where}", counted(live["dropped"]), "frames", target="== 0 (issue #6: none dropped)"),
        figure(f"frames written, {where}", written, "% of duration x fps"),
        figure(f"encoder lag max, {where}", live["max_encoder_lag_frames"], "frames"),
        figure(f"recorder CPU, {where}", live["recorder"]["cpu_percent_of_one_core"], "% of one core"),
        figure(f"recorder peak RSS, {where}", live["recorder"]["peak_rss_mb"], "MB"),
        figure(f"save after the episode, {where}", live["save_s"], "s"),
        figure(f"direct DatasetWriter, same frames, {args.codec}", direct["realtime_factor_at_30fps"], "x real time"),
    ]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="a 20 s run")
    parser.add_argument("--duration", type=float, default=180.0, help="episode length (s), default 180")
    parser.add_argument("--codec", choices=("libsvtav1", "h264"), default="libsvtav1")
    parser.add_argument("--cameras", type=int, default=3, choices=(1, 2, 3, 4))
    parser.add_argument("--height", type=int, default=480)
    parser.add_argument("--width", type=int, default=640)
    parser.add_argument("--latency", type=float, default=0.15, help="the recorder's latency_s")
    parser.add_argument(
        "--busy", type=int, default=0, help="extra busy-loop processes during the live run (1 = one core busy)"
    )
    args = parser.parse_args()
    if args.quick:
        args.duration = 20.0
    work = Path(tempfile.mkdtemp(prefix="bench_recorder_"))
    try:
        with busy_loops(args.busy):
            live = live_run(args, work)
        direct = direct_writer(args, work, frames=min(int(args.duration * 30), 600))
    finally:
        shutil.rmtree(work, ignore_errors=True)
    report = {
        "headline": headline(args, live, direct),
        "load": f"{args.cameras} cameras {args.width}x{args.height} @ 30 fps + joints @ 100 Hz, codec {args.codec}",
        "latency_s": args.latency,
        "busy_processes": args.busy,
        "machine": f"{os.cpu_count()} cores, load average at the end {os.getloadavg()[0]:.1f}",
        "lerobot_reference": "LeRobot rates 2 cameras 640x480 @ 30 fps as its 'low' recording load",
        "live": live,
        "direct_writer": direct,
    }
    RESULTS.mkdir(parents=True, exist_ok=True)
    name = "quick" if args.quick else f"{args.codec}_{args.cameras}cam"
    name += f"_busy{args.busy}" if args.busy else ""
    out = RESULTS / f"recorder_{name}.json"
    out.write_text(json.dumps(report, indent=2))
    print(json.dumps(report, indent=2))
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
