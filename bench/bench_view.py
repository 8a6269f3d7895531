"""`lerobot-ros view` under load: 3 cameras 640x480 @ 30 fps + joints and commands @ 100 Hz (synthetic streams).

Does the view keep up, and does it take anything away from the robot's own subscribers? Each configuration runs
the synthetic publishers, a probe subscriber standing in for the robot's consumers (RELIABLE, depth 10, raw, as
the recorder subscribes) and, except in the baseline, `lerobot-ros view --save` in its own ROS domain. Over a
measurement window after start-up it reports:

* probe: messages received per second per topic, with and without the view;
* view: joint samples it logged (read back from its .rrd by header stamp inside the window) and the fraction of
  the probe's samples (by stamp) it also has, pictures logged per camera and second (asked: --image-rate, at most
  what the publisher delivers), and its CPU (% of one core) and peak RSS.

Rates are measured, not assumed: on a loaded 2-core machine the synthetic publisher itself falls short of
30/100 Hz, so compare the probe with and without the view, and the view with the probe in the same run.

Writes bench/results/view.json. Usage: python bench/bench_view.py [--window S] [--quick]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import struct
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import yaml
from bench_recorder import ProcessMeter, contract
from headline import figure

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "bench" / "results"
sys.path.insert(0, str(ROOT / "tests" / "lerobot_recorder" / "view"))

WARMUP_S = 6.0
CAMERAS = ("front", "wrist", "top")
STAMP = struct.Struct("<iI")  # std_msgs/Header.stamp right after the 4-byte CDR encapsulation header


def bench_contract() -> dict[str, Any]:
    data = contract(3, 480, 640)
    data["features"]["action"] = dict(data["features"]["observation.state"], topic="/follower/joint_commands")
    return data


def probe_main(topics: dict[str, str], warmup_s: float, window_s: float, out: Path) -> None:
    """The probe process: raw RELIABLE depth-10 subscriptions; counts messages during the window, writes JSON."""
    import rclpy
    from rclpy.executors import SingleThreadedExecutor
    from rclpy.qos import QoSProfile, ReliabilityPolicy

    from lerobot_ros.message_conversion import import_message_type

    rclpy.init()
    node = rclpy.create_node("bench_view_probe")
    counts = dict.fromkeys(topics, 0)
    stamps: dict[str, list[int]] = {t: [] for t in topics}
    counting = [False]

    def counter(topic: str) -> Any:
        def on(data: bytes) -> None:
            if counting[0]:
                counts[topic] += 1
                if "image" not in topic:
                    sec, nanosec = STAMP.unpack_from(data, 4)
                    stamps[topic].append(sec * 1_000_000_000 + nanosec)

        return on

    qos = QoSProfile(depth=10, reliability=ReliabilityPolicy.RELIABLE)
    for topic, msgtype in topics.items():
        node.create_subscription(import_message_type(msgtype), topic, counter(topic), qos, raw=True)
    executor = SingleThreadedExecutor()
    executor.add_node(node)
    window: list[float] = []

    def begin() -> None:
        counting[0] = True
        window.append(time.time())
        start_timer.cancel()

    start_timer = node.create_timer(warmup_s, begin)
    deadline = time.monotonic() + warmup_s + window_s
    while time.monotonic() < deadline:
        executor.spin_once(timeout_sec=0.1)
    counting[0] = False
    window.append(time.time())
    out.write_text(json.dumps({"counts": counts, "stamps": stamps, "t0": window[0], "t1": window[-1]}))
    node.destroy_node()
    rclpy.shutdown()


def run_config(
    name: str, view_args: list[str] | None, window_s: float, work: Path, env: dict[str, str]
) -> dict[str, Any]:
    from lerobot_ros.testing import venv_script

    spec = bench_contract()
    contract_path = work / "contract.yaml"
    contract_path.write_text(yaml.safe_dump(spec, sort_keys=False))
    topics = {f["topic"]: f["type"] for f in spec["features"].values()}
    logs = work / "logs"
    logs.mkdir(exist_ok=True)
    streams = subprocess.Popen(
        [
            venv_script("synthetic_streams"),
            "--ros-args",
            "-p",
            f"contract:={contract_path}",
            "-p",
            "picture_style:=scene",
        ],
        env=env,
        stdout=(logs / f"{name}-streams.log").open("w"),
        stderr=subprocess.STDOUT,
    )
    view = None
    rrd = work / f"{name}.rrd"
    if view_args is not None:
        view = subprocess.Popen(
            [venv_script("lerobot-ros"), "view", str(contract_path), "--save", str(rrd), *view_args],
            env=env,
            stdout=(logs / f"{name}-view.log").open("w"),
            stderr=subprocess.STDOUT,
        )
    probe_out = work / f"{name}-probe.json"
    probe = subprocess.Popen(
        [sys.executable, __file__, "--probe", json.dumps(topics), "--window", str(window_s), "--out", str(probe_out)],
        env=env,
        stdout=(logs / f"{name}-probe.log").open("w"),
        stderr=subprocess.STDOUT,
    )
    meter = None
    try:
        time.sleep(WARMUP_S)
        if view is not None:
            meter = ProcessMeter(view.pid)
        while probe.poll() is None:
            time.sleep(0.5)
            if meter is not None:
                meter.sample()
    finally:
        if view is not None:
            view.send_signal(signal.SIGINT)
            view.wait(timeout=60)
        streams.terminate()
        streams.wait(timeout=30)
        if probe.poll() is None:
            probe.kill()
    measured = json.loads(probe_out.read_text())
    t0, t1 = float(measured["t0"]), float(measured["t1"])
    window_s = t1 - t0
    result: dict[str, Any] = {
        "load_average_1min_after": round(os.getloadavg()[0], 2),
        "window_s": round(window_s, 2),
        "probe_hz": {t: round(measured["counts"][t] / window_s, 1) for t in topics},
    }
    if view is not None and meter is not None and view_args is not None:
        from rrd_contents import read_rrd

        entities = read_rrd(rrd)
        image_rate = float(view_args[view_args.index("--image-rate") + 1])

        def stamps(path: str) -> set[int]:
            times = entities[path].times["ros_time"] if path in entities else []
            return {round(t * 1e5) for t in times if t0 <= t < t1}  # 10 us bins (float seconds in the .rrd)

        joints = {}
        for topic, path in (
            ("/follower/joint_states", "/joints/shoulder_pan.pos/state"),
            ("/follower/joint_commands", "/joints/shoulder_pan.pos/action"),
        ):
            probe_stamps = {round(ns / 1e4) for ns in measured["stamps"][topic]}
            seen = stamps(path)
            joints[topic] = {
                "view_hz": round(len(seen) / window_s, 1),
                "fraction_of_probe_samples_in_view": round(len(seen & probe_stamps) / max(len(probe_stamps), 1), 3),
            }
        result["view_joints"] = joints
        result["view_pictures_hz"] = {cam: round(len(stamps(f"/cameras/{cam}")) / window_s, 1) for cam in CAMERAS}
        result["view_image_rate_hz"] = image_rate
        result["view_process"] = meter.report()
        result["rrd_mb"] = round(rrd.stat().st_size / 1e6, 1)
        rrd.unlink()
    return result


def headline(configs: dict[str, Any]) -> list[dict[str, Any]]:
    """The view's share of the robot's joint samples, its picture rate and CPU at 10 Hz pictures, and the
    robot-side probe's joint rate with the view against the same probe without it (same run)."""
    base = configs.get("baseline_no_view", {}).get("probe_hz", {}).get("/follower/joint_states")
    run = configs.get("view_10hz_raw", {})
    joints = run.get("view_joints", {}).get("/follower/joint_states", {})
    pictures = run.get("view_pictures_hz", {})
    return [
        figure(
            "view: share of the probe's joint_states samples, 10 Hz pictures",
            100 * joints["fraction_of_probe_samples_in_view"] if joints else None,
            "%",
            target=">= 95 (issue #21: keeps up)",
        ),
        figure(
            "view: pictures per camera and second, --image-rate 10, 3 x 640x480",
            min(pictures.values()) if pictures else None,
            "pictures/s",
            target=">= 9 (90 % of the asked rate)",
        ),
        figure(
            "probe joint_states rate with the view",
            run.get("probe_hz", {}).get("/follower/joint_states"),
            "Hz",
            baseline=base,
            baseline_what="the same probe without the view, same run (the publisher's rate varies with load)",
            target=">= 0.9x baseline (the view takes nothing from the robot's subscribers)",
        ),
        figure("view CPU, 10 Hz pictures", run.get("view_process", {}).get("cpu_percent_of_one_core"), "% of one core"),
    ]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--window", type=float, default=15.0, help="measurement window per configuration (s)")
    parser.add_argument("--quick", action="store_true", help="a 5 s window")
    parser.add_argument("--keep", action="store_true", help="keep the work folder (logs) and print its path")
    parser.add_argument("--probe", help=argparse.SUPPRESS)  # internal: run as the probe process (topics JSON)
    parser.add_argument("--out", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.probe:
        probe_main(json.loads(args.probe), WARMUP_S, args.window, args.out)
        return
    window = 5.0 if args.quick else args.window

    from lerobot_ros.dds import ros_environment
    from lerobot_ros.testing import lease_domain

    lease = lease_domain()
    os.environ.update(ros_environment())
    os.environ["ROS_DOMAIN_ID"] = str(lease.domain_id)
    os.environ["ROS_AUTOMATIC_DISCOVERY_RANGE"] = "LOCALHOST"
    env = dict(os.environ)
    configs: list[tuple[str, list[str] | None]] = [
        ("baseline_no_view", None),
        ("view_10hz_raw", ["--image-rate", "10"]),
        ("view_30hz_jpeg75", ["--image-rate", "30", "--jpeg-quality", "75"]),
    ]
    work = Path(tempfile.mkdtemp(prefix="bench_view_"))
    print(f"work folder {work}", flush=True)
    results: dict[str, Any] = {
        "load": "3 cameras 640x480 rgb8 @ 30 Hz + joint_states and joint_commands @ 100 Hz (synthetic_streams)",
        "window_s": window,
        "machine": {"cpus": os.cpu_count(), "load_average_at_start": os.getloadavg()},
        "configs": {},
    }
    try:
        for name, view_args in configs:
            print(f"{name} ...", flush=True)
            results["configs"][name] = run_config(name, view_args, window, work, env)
            print(json.dumps(results["configs"][name]), flush=True)
    finally:
        if not args.keep:
            shutil.rmtree(work, ignore_errors=True)
        lease.release()
    RESULTS.mkdir(parents=True, exist_ok=True)
    out = RESULTS / ("view_quick.json" if args.quick else "view.json")
    results["headline"] = headline(results["configs"])
    out.write_text(json.dumps(results, indent=2))
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
