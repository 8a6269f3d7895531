"""Motor bus performance on the fake servo bus at 1 Mbps (6 motors, as on SO-101 and Koch arms).

Writes bench/results/motor_bus.json with, per family (Feetech STS3215, Dynamixel XL330/XL430):
* round trip of one READ (Present_Position) and its theoretical wire time;
* one control cycle = SYNC READ of the state block (position, velocity, load/current, voltage,
  temperature) + SYNC WRITE of Goal_Position: achievable cycles/s back to back, cycle time p50/p99,
  and the wire-time limit of the same packets (10 bits per byte at the baud rate, Return_Delay_Time 0);
* the same with the fake delaying replies by their wire time (`--emulate-wire-time`), closer to a real bus;
* the arm_driver node (separate process, 100 Hz and 200 Hz): loop period p50/p99 and jitter
  (|period - 1/rate|) p50/p99 from its /diagnostics, and joint_commands -> Goal_Position write latency
  (publish in this process, write seen by the fake bus in this process) p50/p99.

The fake answers from Python on the same 2-core machine, so a real USB adapter adds its own latency
(typically 1 ms per transfer with the FTDI/CH340 default latency timer) that is not modelled here.

Usage: python bench/bench_motor_bus.py [--quick]
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

from lerobot_drivers.arms import get_arm
from lerobot_drivers.arms.arm import Arm, default_fake_calibration, make_bus
from lerobot_drivers.fake.arms import fake_arm_bus
from lerobot_drivers.fake.bus import PtyServoBus
from lerobot_drivers.motors.calibration import radians_to_ticks, save_calibration
from lerobot_drivers.motors.dynamixel import protocol as dxl_protocol
from lerobot_drivers.motors.errors import BusCommunicationError
from lerobot_drivers.motors.feetech import protocol as ft_protocol

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "bench" / "results"
BAUD = 1_000_000
ARMS = {"feetech": "so101_follower", "dynamixel": "koch_follower"}
STATE_BLOCK = {
    "feetech": ("Present_Position", "Present_Temperature"),
    "dynamixel": ("Present_PWM", "Present_Temperature"),
}


def ms(values: list[float], q: float) -> float:
    return round(float(np.percentile(np.array(values), q)) * 1e3, 4)


def wire_ms(n_bytes: int) -> float:
    return round(n_bytes * 10 / BAUD * 1e3, 4)


def packet_bytes(family: str, arm: Arm) -> dict[str, int]:
    """Bytes on the wire for one READ round trip and one control cycle of this arm."""
    ids = [j.motor_id for j in arm.spec.joints]
    first, last = STATE_BLOCK[family]
    model = arm.spec.model(arm.names[0])
    start = model.register(first).address
    end = model.register(last)
    length = end.address + end.size - start
    goal = model.register("Goal_Position")
    goals = {i: bytes(goal.size) for i in ids}
    if family == "feetech":
        read = len(ft_protocol.read(1, 56, 2)) + len(ft_protocol.encode(1, 0, bytes(2)))
        sync_read = len(ft_protocol.sync_read(ids, start, length)) + len(ids) * len(
            ft_protocol.encode(1, 0, bytes(length))
        )
        sync_write = len(ft_protocol.sync_write(goal.address, goal.size, goals))
    else:
        read = len(dxl_protocol.read(1, 132, 4)) + len(dxl_protocol.encode_status(1, 0, bytes(4)))
        sync_read = len(dxl_protocol.sync_read(ids, start, length)) + len(ids) * len(
            dxl_protocol.encode_status(1, 0, bytes(length))
        )
        sync_write = len(dxl_protocol.sync_write(goal.address, goal.size, goals))
    return {"read": read, "cycle": sync_read + sync_write, "sync_read": sync_read, "sync_write": sync_write}


def bus_figures(family: str, seconds: float, emulate_wire_time: bool) -> dict[str, object]:
    spec = get_arm(ARMS[family])
    calibration = default_fake_calibration(spec)
    fake = fake_arm_bus(spec, calibration)
    with PtyServoBus(fake, emulate_wire_time=emulate_wire_time) as pty:
        arm = Arm(spec, make_bus(spec, pty.port), calibration)
        arm.connect()
        sizes = packet_bytes(family, arm)
        round_trips = []
        end = time.perf_counter() + seconds / 2
        while time.perf_counter() < end:
            t0 = time.perf_counter()
            try:
                arm.bus.read("Present_Position", arm.names[0])
            except BusCommunicationError:
                continue  # counted in bus_failures
            round_trips.append(time.perf_counter() - t0)
        cycles = []
        target = np.zeros(len(arm.names))
        end = time.perf_counter() + seconds / 2
        while time.perf_counter() < end:
            t0 = time.perf_counter()
            try:
                arm.read_state()
                arm.write_goal(target)
            except BusCommunicationError:
                continue
            cycles.append(time.perf_counter() - t0)
        arm.close()
    return {
        "read_round_trip_p50_ms": {
            "value": ms(round_trips, 50),
            "baseline": wire_ms(sizes["read"]),
            "unit": "ms",
        },
        "read_round_trip_p99_ms": {"value": ms(round_trips, 99), "unit": "ms"},
        "cycle_p50_ms": {
            "value": ms(cycles, 50),
            "baseline": wire_ms(sizes["cycle"]),
            "unit": "ms",
        },
        "cycle_p99_ms": {"value": ms(cycles, 99), "unit": "ms"},
        "loop_rate_hz": {
            "value": round(len(cycles) / sum(cycles), 1),
            "baseline": round(1e3 / wire_ms(sizes["cycle"]), 1),
            "unit": "Hz",
        },
        "bus_retries": arm.bus.stats.retries,
        "bus_failures": arm.bus.stats.failures,
        "bytes_per_cycle": sizes["cycle"],
        "bytes_per_read": sizes["read"],
    }


def node_figures(rate: float, seconds: float) -> dict[str, object]:
    """Run arm_driver on a fake SO-101 and measure its loop and the command -> write latency."""
    from lerobot_ros.dds import apply_ros_environment, ros_environment
    from lerobot_ros.testing import lease_domain

    lease = lease_domain()
    os.environ["ROS_DOMAIN_ID"] = str(lease.domain_id)
    os.environ["ROS_AUTOMATIC_DISCOVERY_RANGE"] = "LOCALHOST"
    apply_ros_environment()
    import rclpy
    from diagnostic_msgs.msg import DiagnosticArray
    from sensor_msgs.msg import JointState

    spec = get_arm("so101_follower")
    calibration = default_fake_calibration(spec)
    fake = fake_arm_bus(spec, calibration)
    goal_seen: dict[int, float] = {}

    def on_write(motor_id: int, address: int, data: bytes) -> None:
        if motor_id == 1 and address == 42:
            ticks = int.from_bytes(data, "little")
            goal_seen.setdefault(ticks, time.perf_counter())

    fake.on_write = on_write
    tmp = Path(tempfile.mkdtemp())
    cal_file = tmp / "cal.json"
    save_calibration(cal_file, calibration)
    diag: list[dict[str, str]] = []
    with PtyServoBus(fake) as pty:
        driver = subprocess.Popen(
            [str(Path(sys.executable).parent / "arm_driver"), "--ros-args", "-p", f"port:={pty.port}",
             "-p", f"calibration_file:={cal_file}", "-p", f"loop_rate:={rate}", "-p", "diagnostics_period:=0.5"],
            env=ros_environment(), stdout=subprocess.DEVNULL, stderr=subprocess.STDOUT, start_new_session=True,
        )  # fmt: skip
        context = rclpy.Context()
        rclpy.init(context=context, domain_id=lease.domain_id)
        node = rclpy.create_node("bench_motor_bus", context=context)
        from rclpy.executors import SingleThreadedExecutor

        executor = SingleThreadedExecutor(context=context)
        executor.add_node(node)
        threading.Thread(target=executor.spin, daemon=True).start()
        node.create_subscription(
            DiagnosticArray,
            "/diagnostics",
            lambda m: diag.extend({kv.key: kv.value for kv in s.values} for s in m.status),
            10,
        )
        publisher = node.create_publisher(JointState, "joint_commands", 10)
        states: list[float] = []
        node.create_subscription(JointState, "joint_states", lambda m: states.append(time.perf_counter()), 50)
        deadline = time.monotonic() + 30
        while len(states) < 20 and time.monotonic() < deadline:
            time.sleep(0.05)
        while publisher.get_subscription_count() < 1 and time.monotonic() < deadline:
            time.sleep(0.05)
        sent: dict[int, float] = {}
        n_commands = min(int(seconds * 20), 200)  # 200 distinct goals, 50 ms apart
        for k in range(n_commands):
            rad = 0.01 * ((k % 100) + 1) * (1 if k < 100 else -1)
            ticks = radians_to_ticks(rad, calibration["shoulder_pan"], 4096)
            msg = JointState(name=["shoulder_pan"], position=[rad])
            sent[ticks] = time.perf_counter()
            publisher.publish(msg)
            time.sleep(0.05)
        time.sleep(1.0)
        latencies = [goal_seen[t] - t0 for t, t0 in sent.items() if t in goal_seen and goal_seen[t] >= t0]
        driver.send_signal(2)
        driver.wait(10)
        executor.shutdown(timeout_sec=2)
        node.destroy_node()
        context.try_shutdown()
    lease.release()
    last = diag[-1] if diag else {}
    period_ms = 1e3 / rate
    p50, p99 = float(last.get("loop_period_p50_ms", "nan")), float(last.get("loop_period_p99_ms", "nan"))
    return {
        "loop_period_p50_ms": {"value": p50, "baseline": round(period_ms, 3), "unit": "ms"},
        "loop_period_p99_ms": {"value": p99, "baseline": round(period_ms, 3), "unit": "ms"},
        "jitter_p50_ms": {
            "value": float(last.get("loop_jitter_p50_ms", "nan")),
            "unit": "ms",
        },
        "jitter_p99_ms": {"value": float(last.get("loop_jitter_p99_ms", "nan")), "unit": "ms"},
        "cycle_time_p50_ms": {"value": float(last.get("cycle_time_p50_ms", "nan")), "unit": "ms"},
        "overruns": int(last.get("overruns", "0")),
        "command_to_write_latency_p50_ms": {
            "value": ms(latencies, 50) if latencies else float("nan"),
            "unit": "ms",
        },
        "command_to_write_latency_p99_ms": {"value": ms(latencies, 99) if latencies else float("nan"), "unit": "ms"},
        "commands_matched": f"{len(latencies)}/{n_commands}",
    }


def headline(results: dict[str, Any]) -> list[dict[str, Any]]:
    """Loop rate against the wire-time limit per family (replies delayed by their wire time, as on a real bus),
    and the driver node's jitter and command -> write latency. The issue sets no numeric targets."""
    rows = []
    for family in ARMS:
        rate = results[f"{family}_wire_time_emulated"]["loop_rate_hz"]
        rows.append(
            figure(
                f"control cycles/s (sync read + sync write), {family}, fake delaying replies by wire time",
                rate["value"],
                "Hz",
                baseline=rate["baseline"],
                baseline_what=f"wire-time limit of the same packets (10 bits per byte at {BAUD} baud), computed here",
            )
        )
    for key, node in results.items():
        if key.startswith("arm_driver_"):
            where = f"arm_driver at {key.removeprefix('arm_driver_').removesuffix('hz')} Hz"
            rows += [
                figure(f"loop jitter p99, {where}", node["jitter_p99_ms"]["value"], "ms"),
                figure(
                    f"joint_commands -> Goal_Position write p50, {where}",
                    node["command_to_write_latency_p50_ms"]["value"],
                    "ms",
                ),
            ]
    return rows


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--quick", action="store_true", help="shorter runs")
    args = parser.parse_args()
    seconds = 2.0 if args.quick else 6.0
    results: dict[str, Any] = {
        "machine": {
            "cpus": os.cpu_count(),
            "load_average_1min_at_start": os.getloadavg()[0],
            "python": platform.python_version(),
            "baud": BAUD,
            "motors": 6,
        },
    }
    for family in ("feetech", "dynamixel"):
        results[family] = bus_figures(family, seconds, emulate_wire_time=False)
        results[f"{family}_wire_time_emulated"] = bus_figures(family, seconds, emulate_wire_time=True)
        print(f"{family}: {json.dumps(results[family])}")
    for rate in (100.0, 200.0):
        results[f"arm_driver_{int(rate)}hz"] = node_figures(rate, seconds)
        print(f"arm_driver {rate} Hz: {json.dumps(results[f'arm_driver_{int(rate)}hz'])}")
    results = {"headline": headline(results), **results}
    RESULTS.mkdir(parents=True, exist_ok=True)
    out = RESULTS / "motor_bus.json"
    out.write_text(json.dumps(results, indent=2))
    print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
