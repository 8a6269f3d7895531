"""Sim bridge speed and scripted-expert success, written to bench/results/sim.json.

Real-time factor (simulated seconds per wall second) of the SO-101 simulation at 30 fps for: no camera,
1x320x240, 1x640x480, 2x320x240 (front + wrist), measured two ways in the same run:
* core: the adapter alone in this process (physics step + render of every camera), no ROS;
* bridge: the `sim_bridge` node in `fast` mode as its own process, with this process subscribed to
  joint_states and every image topic (as a recorder would be); its real-time factor is read from its
  /diagnostics, delivered frames are counted here.
Publish overhead per frame = bridge step time - core step time (ms), and each configuration's cost is also
given against the no-camera baseline of the same run.

Success rates: the SO-101 pick-and-place expert (30 Hz, targets held 3 ticks) over seeds 0..N-1, and the
PushT heuristic expert (10 Hz, 300 steps) over seeds 0..M-1, both in-process (same cores as the node).

Usage: python bench/bench_sim.py [--quick]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

os.environ.setdefault("MUJOCO_GL", "egl")

import numpy as np
from headline import figure

from lerobot_sim_bridge.adapters import CameraConfig, SimConfig, make_adapter
from lerobot_sim_bridge.experts.base import run_expert_episodes

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "bench" / "results"
FPS = 30.0
CONFIGS: dict[str, tuple[CameraConfig, ...]] = {
    "no_camera": (),
    "1x320x240": (CameraConfig("front", 320, 240),),
    "1x640x480": (CameraConfig("front", 640, 480),),
    "2x320x240": (CameraConfig("front", 320, 240), CameraConfig("wrist", 320, 240)),
}


def joint_targets(step: int) -> np.ndarray:
    """A slow sweep through the workspace, so the rendered arm moves."""
    phase = step / FPS
    return np.array([0.6 * np.sin(0.5 * phase), -0.3 + 0.3 * np.sin(0.7 * phase), 0.5, 0.4, 0.0, 0.8])


def core_rtf(cameras: tuple[CameraConfig, ...], steps: int) -> dict[str, float]:
    adapter = make_adapter("so101_pick_place", SimConfig(fps=FPS, cameras=cameras))
    try:
        adapter.reset(0)
        for step in range(10):  # warm-up: GL context, first uploads
            adapter.step(joint_targets(step))
            for camera in cameras:
                adapter.render(camera.name)
        render_s = 0.0
        start, cpu_start = time.perf_counter(), time.process_time()
        for step in range(steps):
            adapter.step(joint_targets(step))
            t0 = time.perf_counter()
            for camera in cameras:
                adapter.render(camera.name).copy()
            render_s += time.perf_counter() - t0
        wall = time.perf_counter() - start
        cpu = time.process_time() - cpu_start
    finally:
        adapter.close()
    return {
        "real_time_factor": steps / FPS / wall,
        "step_ms": 1e3 * wall / steps,
        "render_ms_per_step": 1e3 * render_s / steps,
        "cpu_ms_per_step": 1e3 * cpu / steps,
    }


def bridge_rtf(cameras: tuple[CameraConfig, ...], seconds: float) -> dict[str, Any]:
    import rclpy
    from diagnostic_msgs.msg import DiagnosticArray
    from rclpy.executors import SingleThreadedExecutor
    from rclpy.qos import QoSProfile, ReliabilityPolicy
    from sensor_msgs.msg import Image, JointState

    from lerobot_ros.dds import clean_stale_shm, ros_environment
    from lerobot_ros.testing import lease_domain

    lease = lease_domain()
    env = ros_environment()
    env.update(ROS_DOMAIN_ID=str(lease.domain_id), ROS_AUTOMATIC_DISCOVERY_RANGE="LOCALHOST", MUJOCO_GL="egl")
    camera_arg = ",".join(f"{c.name}:{c.width}x{c.height}" for c in cameras) or "''"
    argv = [
        str(Path(sys.executable).parent / "sim_bridge"),
        "--ros-args",
        "-r",
        "__ns:=/follower",
        "-p",
        "mode:=fast",
        "-p",
        f"cameras:={camera_arg}",
        "-p",
        "max_episode_steps:=0",
        "-p",
        "diagnostics_period:=1.0",
    ]
    process = subprocess.Popen(argv, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    context = rclpy.Context()
    rclpy.init(context=context, domain_id=lease.domain_id)
    node = rclpy.create_node("bench_sim", context=context)
    executor = SingleThreadedExecutor(context=context)
    executor.add_node(node)
    counts = {"joint_states": 0, **{c.name: 0 for c in cameras}}
    rtfs: list[float] = []
    steps_seen: list[int] = []
    lock = threading.Lock()
    qos = QoSProfile(depth=10, reliability=ReliabilityPolicy.RELIABLE)

    def counter(key: str) -> Any:
        def on_message(_msg: Any) -> None:
            with lock:
                counts[key] += 1

        return on_message

    def on_diagnostics(msg: DiagnosticArray) -> None:
        for status in msg.status:
            values = {kv.key: kv.value for kv in status.values}
            if "real_time_factor" in values:
                rtfs.append(float(values["real_time_factor"]))
                steps_seen.append(int(values["steps"]))

    node.create_subscription(JointState, "/follower/joint_states", counter("joint_states"), qos)
    for camera in cameras:
        node.create_subscription(Image, f"/cameras/{camera.name}/image_raw", counter(camera.name), qos)
    node.create_subscription(DiagnosticArray, "/diagnostics", on_diagnostics, 10)
    try:
        deadline = time.monotonic() + 60.0
        while not rtfs and time.monotonic() < deadline:  # started and publishing
            executor.spin_once(timeout_sec=0.1)
        with lock:
            for key in counts:
                counts[key] = 0
        rtfs.clear()
        steps_seen.clear()
        cpu_start = process_cpu_seconds(process.pid)
        start = time.monotonic()
        while time.monotonic() - start < seconds:
            executor.spin_once(timeout_sec=0.05)
        elapsed = time.monotonic() - start
        cpu = process_cpu_seconds(process.pid) - cpu_start
    finally:
        # Keep reading while the bridge stops, so that its reliable publishers never wait on this subscriber.
        process.terminate()
        deadline = time.monotonic() + 20.0
        while process.poll() is None and time.monotonic() < deadline:
            executor.spin_once(timeout_sec=0.05)
        stopped_by = "SIGTERM" if process.poll() is not None else "SIGKILL (no exit 20 s after SIGTERM)"
        if process.poll() is None:
            process.kill()
            process.wait()
        executor.shutdown(timeout_sec=2.0)
        node.destroy_node()
        context.try_shutdown()
        lease.release()
        clean_stale_shm()
    rtf = float(np.median(rtfs)) if rtfs else 0.0
    states = counts["joint_states"]
    # Steps per wall second from the bridge's own counter (reported once a second) over the window.
    steps_per_s = (steps_seen[-1] - steps_seen[0]) / (len(steps_seen) - 1) if len(steps_seen) > 1 else 0.0
    return {
        "real_time_factor": rtf,
        "step_ms": 1e3 / (FPS * rtf) if rtf else None,
        "cpu_ms_per_step": 1e3 * cpu / (steps_per_s * elapsed) if steps_per_s else None,
        "joint_states_per_s_received": states / elapsed,
        "bridge_stopped_by": stopped_by,
        "frames_received_per_camera_per_joint_state": {
            c.name: (counts[c.name] / states if states else 0.0) for c in cameras
        },
    }


def process_cpu_seconds(pid: int) -> float:
    """User + system CPU seconds of a process (all its threads) from /proc."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def expert_success(env_id: str, seeds: int, fps: float, max_steps: int) -> dict[str, Any]:
    start = time.perf_counter()
    result = run_expert_episodes(env_id, list(range(seeds)), fps, max_steps)
    return {**result, "wall_s": time.perf_counter() - start}


def headline(per_config: dict[str, Any], experts: dict[str, Any]) -> list[dict[str, Any]]:
    """Per camera configuration the bridge against the adapter alone (same run); the experts' success rates."""
    core_what = "the adapter alone in this process (step + render, no ROS), same cameras, same run"
    targets = {"1x320x240": ">= 2 (DESIGN.md: one 320x240 camera runs about 2x real time on 2 cores)"}
    rows = []
    for name, config in per_config.items():
        core, bridge = config["core"], config["bridge"]
        rows += [
            figure(
                f"sim_bridge real-time factor, {name}",
                bridge["real_time_factor"],
                "x real time",
                baseline=core["real_time_factor"],
                baseline_what=core_what,
                target=targets.get(name),
            ),
            figure(
                f"sim_bridge CPU per step, {name}",
                bridge["cpu_ms_per_step"],
                "CPU ms",
                baseline=core["cpu_ms_per_step"],
                baseline_what=core_what,
            ),
        ]
    floors = {"so101_pick_place": ">= 80 % (issue #5 floor, sim_bridge README: 4 of seeds 0..4)"}
    for env_id, result in experts.items():
        rate = 100 * result["success_rate"]
        rows.append(
            figure(
                f"scripted expert success, {env_id}",
                rate,
                f"% of {result['episodes']} seeds",
                target=floors.get(env_id),
            )
        )
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="shorter runs (a smoke test of the bench)")
    args = parser.parse_args()
    core_steps = 90 if args.quick else 450
    bridge_seconds = 4.0 if args.quick else 12.0

    core = {}
    bridge = {}
    for name, cameras in CONFIGS.items():
        core[name] = core_rtf(cameras, core_steps)
        print(f"core   {name:10s} real-time factor {core[name]['real_time_factor']:6.2f}", flush=True)
        bridge[name] = bridge_rtf(cameras, bridge_seconds)
        print(f"bridge {name:10s} real-time factor {bridge[name]['real_time_factor']:6.2f}", flush=True)
    base_core, base_bridge = core["no_camera"]["step_ms"], bridge["no_camera"]["step_ms"]
    per_config = {}
    for name in CONFIGS:
        c, b = core[name], bridge[name]
        per_config[name] = {
            "core": c,
            "bridge": b,
            "publish_overhead_ms_per_frame": (b["step_ms"] - c["step_ms"]) if b["step_ms"] else None,
            "publish_overhead_cpu_ms_per_frame": (b["cpu_ms_per_step"] - c["cpu_ms_per_step"])
            if b["cpu_ms_per_step"]
            else None,
            "core_cost_over_no_camera_ms": c["step_ms"] - base_core,
            "bridge_cost_over_no_camera_ms": (b["step_ms"] - base_bridge) if b["step_ms"] and base_bridge else None,
            "keeps_up_with_real_time": bool(b["real_time_factor"] >= 1.0),
        }

    experts = {
        "so101_pick_place": expert_success("so101_pick_place", 10 if args.quick else 50, FPS, 900),
        "pusht": expert_success("pusht", 3 if args.quick else 10, 10.0, 300),
    }
    for env_id, result in experts.items():
        print(
            f"expert {env_id}: {result['successes']}/{result['episodes']} successful, "
            f"mean max reward {result['mean_max_reward']:.3f}",
            flush=True,
        )

    RESULTS.mkdir(parents=True, exist_ok=True)
    out = {
        "benchmark": "sim_bridge",
        "headline": headline(per_config, experts),
        "quick": args.quick,
        "machine": {
            "cpus": os.cpu_count(),
            "python": platform.python_version(),
            "mujoco_gl": os.environ["MUJOCO_GL"],
            "load_average_at_end": os.getloadavg(),
        },
        "fps": FPS,
        "substeps": 16,
        "camera_configs": per_config,
        "experts": experts,
    }
    path = RESULTS / "sim.json"
    path.write_text(json.dumps(out, indent=2) + "\n")
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
