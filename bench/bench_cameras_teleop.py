"""Camera and teleoperation latency on this machine, with the synthetic camera and the fake servo buses.

Writes bench/results/cameras_teleop.json with:
* per camera mode (raw `image_raw` rgb8 vs `image_raw/compressed` JPEG), one camera node process at
  640x480 @ 30 fps: capture -> subscriber latency p50/p99 (the capture time is written into the pixels by
  the synthetic source, so the subscriber reads it back from the image itself and compares with its clock
  at reception), frames delivered / frames captured in the window (from the pixel counter), the rate
  received, and the camera process's CPU (% of one core, from /proc) -- the cost of one camera;
* teleop: SO-101 leader and follower drivers (100 Hz) on fake buses + leader_teleop, all separate
  processes: leader bus read (the leader's joint_states stamp) -> follower Goal_Position write seen by the
  follower's fake bus, p50/p99, and hand move -> follower write (adds the wait for the leader's next read).

Usage: python bench/bench_cameras_teleop.py [--quick]
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import platform
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import numpy as np
from headline import figure

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "bench" / "results"
TICKS_PER_S = os.sysconf("SC_CLK_TCK")


def ms(values: list[float], q: float) -> float:
    return round(float(np.percentile(np.array(values), q)), 2) if values else float("nan")


def cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICKS_PER_S


def script(name: str) -> str:
    return str(Path(sys.executable).parent / name)


class Ros:
    """An rclpy context + node spun in a thread, in a leased domain."""

    def __init__(self, name: str) -> None:
        from lerobot_ros.dds import apply_ros_environment, ros_environment
        from lerobot_ros.testing import lease_domain

        self.lease = lease_domain()
        os.environ["ROS_DOMAIN_ID"] = str(self.lease.domain_id)
        os.environ["ROS_AUTOMATIC_DISCOVERY_RANGE"] = "LOCALHOST"
        apply_ros_environment()
        self.env = ros_environment()
        import rclpy
        from rclpy.executors import SingleThreadedExecutor

        self.context = rclpy.Context()
        rclpy.init(context=self.context, domain_id=self.lease.domain_id)
        self.node = rclpy.create_node(name, context=self.context)
        self.executor = SingleThreadedExecutor(context=self.context)
        self.executor.add_node(self.node)
        threading.Thread(target=self.executor.spin, daemon=True).start()

    def start(self, argv: list[str]) -> subprocess.Popen[bytes]:
        return subprocess.Popen(
            argv, env=self.env, stdout=subprocess.DEVNULL, stderr=subprocess.STDOUT, start_new_session=True
        )

    def close(self) -> None:
        self.executor.shutdown(timeout_sec=2)
        self.node.destroy_node()
        self.context.try_shutdown()
        self.lease.release()


def stop(proc: subprocess.Popen[bytes]) -> None:
    os.killpg(proc.pid, signal.SIGINT)
    try:
        proc.wait(10)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()


def camera_figures(compressed: bool, seconds: float) -> dict[str, Any]:
    from sensor_msgs.msg import CompressedImage, Image

    from lerobot_drivers.cameras.pattern import read_pattern
    from lerobot_ros.images import decode_compressed

    ros = Ros("bench_camera")
    # The callback only timestamps and keeps the bytes it needs; decoding happens after the window, so the
    # subscriber's own work does not add to the latency it measures.
    kept: list[tuple[int, bytes]] = []
    measuring = threading.Event()
    band_bytes = 2 * 16 * 640 * 3  # the two rows of counter/time blocks at 640x480

    def on_image(msg: Any) -> None:
        now_ms = time.time_ns() // 1_000_000
        if measuring.is_set():
            kept.append((now_ms, bytes(msg.data if compressed else msg.data[:band_bytes])))

    topic = "/cameras/front/image_raw" + ("/compressed" if compressed else "")
    ros.node.create_subscription(CompressedImage if compressed else Image, topic, on_image, 10)
    cam = ros.start(
        [script("camera"), "--ros-args", "-r", "__ns:=/cameras/front", "-p", "device:=synthetic", "-p", "width:=640",
         "-p", "height:=480", "-p", "fps:=30.0", "-p", f"publish_raw:={not compressed}",
         "-p", f"publish_compressed:={compressed}"],
    )  # fmt: skip
    time.sleep(4.0)  # start-up and discovery
    measuring.set()
    cpu0, t0 = cpu_seconds(cam.pid), time.monotonic()
    time.sleep(seconds)
    cpu1, t1 = cpu_seconds(cam.pid), time.monotonic()
    measuring.clear()
    stop(cam)
    ros.close()
    received = []  # (receive ms mod 2**32, pixel ms, counter)
    for now_ms, data in kept:
        if compressed:
            image = decode_compressed(data)
        else:
            image = np.zeros((480, 640, 3), dtype=np.uint8)
            image.reshape(-1)[:band_bytes] = np.frombuffer(data, dtype=np.uint8)
        counter, pixel_ms = read_pattern(image)
        received.append((now_ms % 2**32, pixel_ms, counter))
    latencies = [float((r - p) % 2**32) for r, p, _ in received]
    counters = [c for _, _, c in received]
    span = counters[-1] - counters[0] + 1 if counters else 0
    return {
        "capture_to_subscriber_p50_ms": {"value": ms(latencies, 50), "unit": "ms"},
        "capture_to_subscriber_p99_ms": {"value": ms(latencies, 99), "unit": "ms"},
        "frames_delivered": f"{len(received)}/{span}",
        "frames_delivered_percent": {"value": round(100 * len(received) / span, 1) if span else None, "unit": "%"},
        "out_of_order": int(sum(1 for a, b in itertools.pairwise(counters) if b <= a)),
        "rate_received_hz": {"value": round(len(received) / (t1 - t0), 2), "baseline": 30.0, "unit": "Hz"},
        "camera_process_cpu_percent": {"value": round(100 * (cpu1 - cpu0) / (t1 - t0), 1), "unit": "% of one core"},
    }


def teleop_figures(moves: int) -> dict[str, Any]:
    from sensor_msgs.msg import JointState

    from lerobot_drivers.arms import get_arm
    from lerobot_drivers.arms.arm import default_fake_calibration
    from lerobot_drivers.fake.arms import fake_arm_bus
    from lerobot_drivers.fake.bus import PtyServoBus
    from lerobot_drivers.motors.calibration import radians_to_ticks, save_calibration, ticks_to_radians

    ros = Ros("bench_teleop")
    tmp = Path(tempfile.mkdtemp())
    fakes, ptys, procs, cals = {}, [], [], {}
    write_seen: dict[int, float] = {}
    for role, robot in (("leader", "so101_leader"), ("follower", "so101_follower")):
        spec = get_arm(robot)
        cals[role] = default_fake_calibration(spec)
        fakes[role] = fake_arm_bus(spec, cals[role])
        save_calibration(tmp / f"{robot}.json", cals[role])
    pan_goal = 42  # Goal_Position address (STS3215)

    def on_write(motor_id: int, address: int, data: bytes) -> None:
        if motor_id == 1 and address == pan_goal:
            write_seen.setdefault(int.from_bytes(data, "little"), time.time())

    fakes["follower"].on_write = on_write
    leader_read: dict[int, float] = {}

    def on_leader(msg: Any) -> None:
        ticks = radians_to_ticks(msg.position[0], cals["leader"]["shoulder_pan"], 4096)
        leader_read.setdefault(ticks, msg.header.stamp.sec + msg.header.stamp.nanosec * 1e-9)

    ros.node.create_subscription(JointState, "/leader/joint_states", on_leader, 50)
    for role, robot in (("leader", "so101_leader"), ("follower", "so101_follower")):
        pty = PtyServoBus(fakes[role])
        pty.start()
        ptys.append(pty)
        procs.append(
            ros.start(
                [
                    script("arm_driver"),
                    "--ros-args",
                    "-r",
                    f"__ns:=/{role}",
                    "-p",
                    f"robot_type:={robot}",
                    "-p",
                    f"port:={pty.port}",
                    "-p",
                    f"calibration_file:={tmp / f'{robot}.json'}",
                    "-p",
                    "loop_rate:=100.0",
                ],
            )
        )
    procs.append(
        ros.start(
            [
                script("leader_teleop"),
                "--ros-args",
                "-p",
                f"leader_calibration:={tmp / 'so101_leader.json'}",
                "-p",
                f"follower_calibration:={tmp / 'so101_follower.json'}",
            ],
        )
    )
    deadline = time.monotonic() + 60
    while not leader_read and time.monotonic() < deadline:
        time.sleep(0.1)
    time.sleep(3.0)
    moved: dict[int, float] = {}
    for k in range(moves):
        rad = 0.004 * (k + 1)  # every move to a new position: each write is matched to one move
        ticks = radians_to_ticks(rad, cals["leader"]["shoulder_pan"], 4096)
        moved[ticks] = time.time()
        fakes["leader"].servo(1).move_by_hand(ticks)
        time.sleep(0.06)
    time.sleep(1.0)
    for proc in procs:
        stop(proc)
    for pty in ptys:
        pty.stop()
    ros.close()
    read_to_write, move_to_write = [], []
    for ticks, t_move in moved.items():
        rad = ticks_to_radians(ticks, cals["leader"]["shoulder_pan"], 4096)
        goal = radians_to_ticks(rad, cals["follower"]["shoulder_pan"], 4096)
        if goal in write_seen and ticks in leader_read:
            read_to_write.append(1e3 * (write_seen[goal] - leader_read[ticks]))
            move_to_write.append(1e3 * (write_seen[goal] - t_move))
    return {
        "leader_read_to_follower_write_p50_ms": {"value": ms(read_to_write, 50), "unit": "ms"},
        "leader_read_to_follower_write_p99_ms": {"value": ms(read_to_write, 99), "unit": "ms"},
        "hand_move_to_follower_write_p50_ms": {"value": ms(move_to_write, 50), "unit": "ms"},
        "hand_move_to_follower_write_p99_ms": {"value": ms(move_to_write, 99), "unit": "ms"},
        "moves_matched": f"{len(read_to_write)}/{moves}",
        "driver_rate_hz": 100.0,
    }


def headline(results: dict[str, Any]) -> list[dict[str, Any]]:
    """Per camera mode latency, delivery and camera CPU; teleop latency. The issue sets no targets, and there is
    no baseline in this bench (raw and JPEG are two modes of the same node, not a baseline and an improvement)."""
    rows = []
    for mode, label in (("raw_rgb8", "raw rgb8"), ("compressed_jpeg_q90", "JPEG q90")):
        camera = results["camera_640x480_30fps"][mode]
        for q in ("p50", "p99"):
            value = camera[f"capture_to_subscriber_{q}_ms"]["value"]
            rows.append(figure(f"capture -> subscriber {q}, {label} 640x480 @ 30 fps", value, "ms"))
        rows += [
            figure(f"frames delivered, {label}", camera["frames_delivered_percent"]["value"], "% of captured"),
            figure(f"camera process CPU, {label}", camera["camera_process_cpu_percent"]["value"], "% of one core"),
        ]
    teleop = results["teleop_so101_fake_buses"]
    for q in ("p50", "p99"):
        value = teleop[f"leader_read_to_follower_write_{q}_ms"]["value"]
        rows.append(figure(f"teleop leader read -> follower write {q}, SO-101 fake buses", value, "ms"))
    return rows


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="short windows (smoke run)")
    args = parser.parse_args()
    seconds = 5.0 if args.quick else 15.0
    results: dict[str, Any] = {
        "machine": {"cpus": os.cpu_count(), "python": platform.python_version(), "load": os.getloadavg()},
        "camera_640x480_30fps": {
            "raw_rgb8": camera_figures(False, seconds),
            "compressed_jpeg_q90": camera_figures(True, seconds),
        },
        "teleop_so101_fake_buses": teleop_figures(40 if args.quick else 150),
    }
    results["machine"]["load_after"] = os.getloadavg()
    results = {"headline": headline(results), **results}
    RESULTS.mkdir(parents=True, exist_ok=True)
    out = RESULTS / "cameras_teleop.json"
    out.write_text(json.dumps(results, indent=2) + "\n")
    print(json.dumps(results, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
