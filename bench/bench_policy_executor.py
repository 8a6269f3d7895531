"""Policy node + action executor against the synchronous baseline, with the same scripted policy (one run).

For each control rate (30, 100 Hz) and each inference delay (0.2, 0.8, 1.5 x the chunk duration of 1 s) two
systems drive a robot stand-in (this process: it publishes `joint_states` at 100 Hz and records every
command it receives):

* **ours**: `policy_node` (scripted policy, threshold adapted to the measured inference time, overlapping
  inferences as `inference_workers` allows) + `action_executor` (per-tick `joint_commands`, cross-fade);
* **baseline**: what most peers do (LeRobot's synchronous loop, as a ROS node): a timer at the control rate
  pops one action per tick from a queue and, when the queue is empty, runs inference inside the timer.

Measured on the received command stream, the same way for both:
observation -> first command latency excluding inference (first command after a chunk is available, minus the
observation stamp and the inference time), command jitter (|interval - period|, p50/p99), starvation (stream
gaps longer than 1.5 periods, plus the executor's own hold time), and the largest command step at chunk
boundaries vs inside chunks. Ratios are baseline / ours. Writes bench/results/policy_executor.json.

`--takeover` measures instead how long taking a chunk over delays the executor's 100 Hz tick: the same
`action_executor` process is sent 10-step and 100,000-step chunks (every 0.5 s), and the delay of each tick is
the interval between consecutive command stamps minus the period (max and p99), for this tree's executor
("after": the chunk thread takes chunks over; also with `realtime`, the tick thread SCHED_FIFO) and for the
executor of `--before` ("before": the tick thread took them over itself, lock held), all in the same run, in
`--rounds` rounds (every other one in reverse order; the headline takes each figure's worst round).
Writes bench/results/policy_executor_takeover.json.

    .venv/bin/python bench/bench_policy_executor.py [--seconds 8] [--quick]
    .venv/bin/python bench/bench_policy_executor.py --takeover [--before 6243485] [--rounds 2]
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import platform
import subprocess
import sys
import threading
import time
from collections import deque
from pathlib import Path
from typing import Any

import numpy as np
from headline import figure

JOINTS = ["shoulder_pan", "shoulder_lift", "elbow_flex", "wrist_flex", "wrist_roll", "gripper"]
CHUNK_S = 1.0
DELAYS = (0.2, 0.8, 1.5)
RATES = (30.0, 100.0)
AMPLITUDE_DEG = 10.0
FREQUENCY = 0.5
# SCHED_FIFO priority of the command loops (ours: the executor's tick thread; baseline: its only thread), so
# that both compete equally against the rest of the machine; 0 = normal scheduling.
PRIORITY = 50
RESULTS = Path(__file__).resolve().parent / "results" / "policy_executor.json"
TAKEOVER_RESULTS = RESULTS.with_name("policy_executor_takeover.json")
# The last commit whose executor took chunks over in its tick thread (the "before" of --takeover).
TAKEOVER_BEFORE = "6243485"
TAKEOVER_SIZES = (10, 100_000)
TAKEOVER_CHUNKS = 8
TAKEOVER_RATE = 100.0


def write_contract(path: Path, fps: int) -> Path:
    import yaml

    names = [f"{j}.pos" for j in JOINTS]
    feature = {"type": "sensor_msgs/msg/JointState", "joints": JOINTS, "names": names, "units": "rad_to_deg"}
    data = {
        "robot_type": "so101_follower",
        "fps": fps,
        "features": {
            "observation.state": {**feature, "topic": "/follower/joint_states", "max_age_s": 0.5},
            "action": {**feature, "topic": "/follower/joint_commands"},
        },
    }
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return path


def scripted_spec(delay_s: float, rate: float) -> str:
    horizon = round(CHUNK_S * rate)
    return f"scripted:delay={delay_s},horizon={horizon},fps={rate},amplitude={AMPLITUDE_DEG},frequency={FREQUENCY}"


def run_baseline(args: argparse.Namespace) -> None:
    """Child process: LeRobot's synchronous loop as a ROS node (inference inside the control timer)."""
    import rclpy
    from builtin_interfaces.msg import Duration
    from rclpy.qos import QoSProfile, ReliabilityPolicy
    from rclpy.time import Time
    from sensor_msgs.msg import JointState

    from lerobot_msgs.msg import ActionChunk
    from lerobot_policy_node.core.policies import parse_scripted
    from lerobot_ros.dds import apply_ros_environment

    apply_ros_environment()
    rclpy.init()
    node = rclpy.create_node("sync_baseline")
    policy = parse_scripted(scripted_spec(args.delay, args.rate), len(JOINTS))
    qos = QoSProfile(depth=10, reliability=ReliabilityPolicy.RELIABLE)
    commands = node.create_publisher(JointState, "/follower/joint_commands", qos)
    chunks = node.create_publisher(ActionChunk, "/baseline/action_chunk", qos)
    latest: list[Any] = []
    queue: deque[np.ndarray] = deque()

    def on_state(msg: Any) -> None:
        latest[:] = [msg]

    node.create_subscription(JointState, "/follower/joint_states", on_state, 10)

    def tick() -> None:
        if not latest:
            return
        if not queue:
            state = latest[-1]
            stamp = Time.from_msg(state.header.stamp).nanoseconds
            start = time.perf_counter()
            chunk = policy.predict_chunk(
                {"observation.state": np.degrees(np.asarray(state.position)), "timestamp": stamp / 1e9}
            )
            info = ActionChunk(names=JOINTS, horizon=len(chunk), period=Duration(nanosec=int(1e9 / args.rate)))
            info.header.stamp = state.header.stamp
            info.inference_time = time.perf_counter() - start
            chunks.publish(info)
            queue.extend(np.radians(chunk))
        msg = JointState()
        msg.header.stamp = node.get_clock().now().to_msg()
        msg.name = JOINTS
        msg.position = [float(v) for v in queue.popleft()]
        commands.publish(msg)

    node.create_timer(1.0 / args.rate, tick)
    if PRIORITY > 0:
        try:
            os.sched_setscheduler(0, os.SCHED_FIFO, os.sched_param(PRIORITY))
        except OSError as err:
            node.get_logger().warning(f"baseline keeps normal priority: {err}")
    with contextlib.suppress(KeyboardInterrupt):  # the bench stops it with SIGTERM/SIGINT
        rclpy.spin(node)


class Robot:
    """This process's stand-in for the robot: publishes joint_states, records commands, chunks and diagnostics."""

    def __init__(self, domain_id: int) -> None:
        import rclpy
        from diagnostic_msgs.msg import DiagnosticArray
        from rclpy.executors import SingleThreadedExecutor
        from rclpy.qos import QoSProfile, ReliabilityPolicy
        from sensor_msgs.msg import JointState

        from lerobot_msgs.msg import ActionChunk

        self.context = rclpy.Context()
        rclpy.init(context=self.context, domain_id=domain_id)
        self.node = rclpy.create_node("bench_robot", context=self.context)
        self.lock = threading.Lock()
        self.commands: list[tuple[float, float, np.ndarray]] = []  # receive (monotonic), stamp (s), positions
        self.chunks: list[tuple[float, float, float]] = []  # receive (monotonic), observation stamp (s), inference
        self.diagnostics: dict[str, str] = {}
        self.recording = False
        qos = QoSProfile(depth=100, reliability=ReliabilityPolicy.RELIABLE)
        self._states = self.node.create_publisher(JointState, "/follower/joint_states", 10)
        self.node.create_subscription(JointState, "/follower/joint_commands", self._on_command, qos)
        for topic in ("/policy/action_chunk", "/baseline/action_chunk"):
            self.node.create_subscription(ActionChunk, topic, self._on_chunk, qos)
        self.node.create_subscription(DiagnosticArray, "/diagnostics", self._on_diagnostics, 10)
        self.node.create_timer(0.01, self._publish_state)
        self.executor = SingleThreadedExecutor(context=self.context)
        self.executor.add_node(self.node)
        self.thread = threading.Thread(target=self.executor.spin, daemon=True)
        self.thread.start()

    def _publish_state(self) -> None:
        from sensor_msgs.msg import JointState

        msg = JointState()
        msg.header.stamp = self.node.get_clock().now().to_msg()
        msg.name = JOINTS
        msg.position = [0.0] * len(JOINTS)
        self._states.publish(msg)

    def _on_command(self, msg: Any) -> None:
        now = time.monotonic()
        with self.lock:
            if self.recording:
                stamp = msg.header.stamp.sec + msg.header.stamp.nanosec * 1e-9
                self.commands.append((now, stamp, np.asarray(msg.position, dtype=np.float64)))

    def _on_chunk(self, msg: Any) -> None:
        now = time.monotonic()
        wall_minus_mono = time.time() - now
        stamp = msg.header.stamp.sec + msg.header.stamp.nanosec * 1e-9 - wall_minus_mono  # on the monotonic clock
        with self.lock:
            if self.recording:
                self.chunks.append((now, stamp, float(msg.inference_time)))

    def _on_diagnostics(self, msg: Any) -> None:
        for status in msg.status:
            if "action executor" in status.name:
                with self.lock:
                    self.diagnostics = {kv.key: kv.value for kv in status.values}

    def record(self, seconds: float) -> tuple[list[tuple[float, float, np.ndarray]], list[tuple[float, float, float]]]:
        with self.lock:
            self.commands, self.chunks, self.recording = [], [], True
        time.sleep(seconds)
        with self.lock:
            self.recording = False
            return list(self.commands), list(self.chunks)

    def wait_commands(self, timeout: float) -> bool:
        with self.lock:
            self.commands, self.recording = [], True
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            with self.lock:
                if len(self.commands) > 10:
                    self.recording = False
                    return True
            time.sleep(0.1)
        return False

    def close(self) -> None:
        self.executor.shutdown()
        self.node.destroy_node()
        self.context.try_shutdown()


def analyse(
    commands: list[tuple[float, float, np.ndarray]], chunks: list[tuple[float, float, float]], rate: float
) -> dict[str, Any]:
    """The metrics of the module docstring, from one recorded command stream."""
    if len(commands) < 3:
        return {"error": f"only {len(commands)} commands received"}
    times = np.array([t for t, _, _ in commands])
    stamps = np.array([s for _, s, _ in commands])
    positions = np.stack([p for _, _, p in commands])
    period = 1.0 / rate
    intervals = np.diff(times)
    jitter = np.abs(intervals - period)  # as received: the loop, DDS and the receiver's scheduling
    stamp_jitter = np.abs(np.diff(stamps) - period)  # the sending loop's own timing
    gaps = intervals[intervals > 1.5 * period]
    steps = np.max(np.abs(np.diff(positions, axis=0)), axis=1)
    # By the commands' own stamps: a late tick makes a longer step, not a faster one, and transport bunching
    # of two messages does not turn a step into a speed.
    speeds = steps / np.maximum(np.diff(stamps), 1e-4)
    boundary = np.zeros(len(steps), dtype=bool)
    latencies = []
    for received, stamp, inference in chunks:
        after = np.searchsorted(times, received)
        if after < len(times):
            latencies.append(times[after] - stamp - inference)
            # From two commands before the chunk is seen (its command and its chunk travel on different topics)
            # to 0.1 s after it (the cross-fade).
            boundary[max(after - 2, 0) : min(after + round(rate * 0.1), len(steps))] = True
    return {
        "commands": len(commands),
        "chunks": len(chunks),
        "latency_ms": {
            "p50": float(np.percentile(latencies, 50) * 1e3) if latencies else None,
            "p99": float(np.percentile(latencies, 99) * 1e3) if latencies else None,
        },
        "jitter_ms": {"p50": float(np.percentile(jitter, 50) * 1e3), "p99": float(np.percentile(jitter, 99) * 1e3)},
        "stamp_jitter_ms": {
            "p50": float(np.percentile(stamp_jitter, 50) * 1e3),
            "p99": float(np.percentile(stamp_jitter, 99) * 1e3),
        },
        "stream_gaps": {"count": len(gaps), "time_s": float(np.sum(gaps - period))},
        "max_boundary_step_rad": float(steps[boundary].max()) if boundary.any() else 0.0,
        "max_inner_step_rad": float(steps[~boundary].max()) if (~boundary).any() else 0.0,
        "max_boundary_speed_rad_s": float(speeds[boundary].max()) if boundary.any() else 0.0,
        "max_inner_speed_rad_s": float(speeds[~boundary].max()) if (~boundary).any() else 0.0,
    }


def run_system(system: str, delay_factor: float, rate: float, seconds: float, workdir: Path) -> dict[str, Any]:
    from lerobot_ros.dds import clean_stale_shm, ros_environment
    from lerobot_ros.testing import lease_domain

    lease = lease_domain()
    env = ros_environment()
    env.update(ROS_DOMAIN_ID=str(lease.domain_id), ROS_AUTOMATIC_DISCOVERY_RANGE="LOCALHOST")
    os.environ.update(env)
    bin_dir = Path(sys.executable).parent
    delay = delay_factor * CHUNK_S
    contract = write_contract(workdir / f"contract_{int(rate)}.yaml", int(rate))
    if system == "ours":
        workers = max(1, int(np.ceil(delay / max(CHUNK_S - delay - 0.15, 0.05))) + 1) if delay < CHUNK_S else 2
        argvs = [
            [str(bin_dir / "policy_node"), "--ros-args", "-p", f"checkpoint:={scripted_spec(delay, rate)}",
             "-p", f"contract:={contract}", "-p", f"inference_workers:={min(workers, 16)}", "-p", "margin:=0.1",
             "-p", "threshold:=0.0", "-p", "max_observation_age:=0.5"],
            [str(bin_dir / "action_executor"), "--ros-args", "-r", "__ns:=/follower", "-p", "output:=joint_commands",
             "-p", f"rate:={rate}", "-p", "diagnostics_period:=0.5", "-p", "realtime:=true",
             "-p", f"realtime_priority:={PRIORITY}", "-p", "realtime_lock_memory:=false",
             "-p", f"joint_names:=[{','.join(JOINTS)}]", "-p", f"joint_limits_lower:=[{','.join(['-3.2'] * 6)}]",
             "-p", f"joint_limits_upper:=[{','.join(['3.2'] * 6)}]", "-p", "max_velocity:=100.0"],
        ]  # fmt: skip
    else:
        argvs = [[sys.executable, __file__, "--baseline", "--delay", str(delay), "--rate", str(rate)]]
    robot = Robot(lease.domain_id)
    procs = [subprocess.Popen(a, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL) for a in argvs]
    try:
        if not robot.wait_commands(60.0):
            return {"error": "no commands within 60 s"}
        time.sleep(2.0 + delay)  # past the first chunks
        commands, chunks = robot.record(seconds)
        time.sleep(0.6)
        result = analyse(commands, chunks, rate)
        if system == "ours":
            with robot.lock:
                diag = dict(robot.diagnostics)
            keys = ("starvation_events", "starvation_s", "chunks_accepted", "chunks_rejected", "tick_jitter_p99_ms")
            result["executor"] = {k: diag.get(k) for k in keys}
            result["inference_workers"] = min(workers, 16)
        return result
    finally:
        for proc in procs:
            proc.terminate()
        for proc in procs:
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                proc.kill()
        robot.close()
        lease.release()
        clean_stale_shm()


def ratio(base: float | None, ours: float | None) -> float | None:
    if base is None or ours is None:
        return None
    return round(base / ours, 3) if ours > 0 else None


def pick(result: dict[str, Any], *keys: str) -> Any:
    """result[k1][k2]..., or None where the run failed or the figure is missing."""
    value: Any = result
    for key in keys:
        if not isinstance(value, dict) or value.get(key) is None:
            return None
        value = value[key]
    return float(value)


def mrad(rad: float | None) -> float | None:
    return None if rad is None else round(rad * 1e3, 3)


def headline(results: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Per configuration: the issue's targets (loop jitter, chunk boundary step, starvation) and command gaps,
    ours against the synchronous baseline of the same run."""
    sync = "synchronous loop (inference inside the control timer), same policy, same run"
    rows = []
    for entry in results:
        ours, base = entry["ours"], entry["baseline"]
        rate, factor = entry["rate_hz"], entry["inference_delay_x_chunk"]
        where = f"{rate:g} Hz, inference {factor:g}x chunk"
        inner = mrad(pick(ours, "max_inner_step_rad"))
        rows += [
            figure(
                f"command loop jitter p99 (sending stamps), {where}",
                pick(ours, "stamp_jitter_ms", "p99"),
                "ms",
                baseline=pick(base, "stamp_jitter_ms", "p99"),
                baseline_what=sync,
                target="<= 2 ms (issue #9, at 100 Hz)" if rate == 100 else None,
            ),
            figure(
                f"largest command step at chunk boundaries, {where}",
                mrad(pick(ours, "max_boundary_step_rad")),
                "mrad",
                baseline=mrad(pick(base, "max_boundary_step_rad")),
                baseline_what=sync,
                target=None if inner is None else f"<= {inner:g} mrad (largest step inside a chunk; issue #9)",
            ),
            figure(
                f"executor starvation (holding without a plan), {where}",
                pick(ours, "executor", "starvation_s"),
                "s",
                target="== 0 s (issue #9: whenever inference <= 0.8x chunk)" if factor <= 0.8 else None,
            ),
            figure(
                f"time without commands (gaps > 1.5 periods), {where}",
                pick(ours, "stream_gaps", "time_s"),
                f"s in {entry['recorded_s']:g} s",
                baseline=pick(base, "stream_gaps", "time_s"),
                baseline_what=sync,
            ),
        ]
    return rows


def takeover_chunk(horizon: int, value: float, stamp: Any, chunk_id: int) -> Any:
    """An ActionChunk of `horizon` 10 ms steps holding `value`, built without a per-step Python loop."""
    import array

    from lerobot_msgs.msg import ActionChunk

    msg = ActionChunk(names=JOINTS, horizon=horizon, chunk_id=chunk_id)
    msg.period.nanosec = int(1e9 / TAKEOVER_RATE)
    msg.header.stamp = stamp
    msg.data = array.array("f", np.full(horizon * len(JOINTS), value, dtype=np.float32).tobytes())
    return msg


def tick_delays(commands: list[tuple[float, float, np.ndarray]]) -> dict[str, Any]:
    """Delay of each tick: the interval between consecutive command stamps (the tick's clock) minus the period."""
    stamps = np.array([s for _, s, _ in commands])
    if len(stamps) < 3:
        return {"error": f"only {len(stamps)} commands received"}
    delays = np.maximum(np.diff(stamps) - 1.0 / TAKEOVER_RATE, 0.0) * 1e3
    return {
        "ticks": len(stamps),
        "max_ms": round(float(delays.max()), 3),
        "p99_ms": round(float(np.percentile(delays, 99)), 3),
        "p50_ms": round(float(np.percentile(delays, 50)), 3),
    }


def run_takeover_version(version: str, pythonpath: str | None, extra: tuple[str, ...] = ()) -> dict[str, Any]:
    """One executor (this tree's or --before's): tick delays while 10-step, then 100,000-step chunks arrive."""
    from rclpy.qos import QoSProfile, ReliabilityPolicy

    from lerobot_msgs.msg import ActionChunk
    from lerobot_ros.dds import clean_stale_shm, ros_environment
    from lerobot_ros.testing import lease_domain

    lease = lease_domain()
    env = ros_environment()
    env.update(ROS_DOMAIN_ID=str(lease.domain_id), ROS_AUTOMATIC_DISCOVERY_RANGE="LOCALHOST")
    if pythonpath:
        env["PYTHONPATH"] = pythonpath + os.pathsep + env.get("PYTHONPATH", "")
    os.environ.update({k: v for k, v in env.items() if k != "PYTHONPATH"})
    argv = [str(Path(sys.executable).parent / "action_executor"), "--ros-args", "-r", "__ns:=/follower",
            "-p", "output:=joint_commands", "-p", f"rate:={TAKEOVER_RATE}", "-p", "diagnostics_period:=0.5",
            "-p", "max_chunk_steps:=200000", "-p", f"joint_names:=[{','.join(JOINTS)}]",
            "-p", f"joint_limits_lower:=[{','.join(['-3.2'] * 6)}]",
            "-p", f"joint_limits_upper:=[{','.join(['3.2'] * 6)}]", "-p", "max_velocity:=100.0", *extra]  # fmt: skip
    robot = Robot(lease.domain_id)
    qos = QoSProfile(depth=5, reliability=ReliabilityPolicy.RELIABLE)
    chunks = robot.node.create_publisher(ActionChunk, "/policy/action_chunk", qos)
    proc = subprocess.Popen(argv, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    result: dict[str, Any] = {"version": version}
    try:
        deadline = time.monotonic() + 60.0
        with robot.lock:
            robot.commands, robot.recording = [], True
        while time.monotonic() < deadline:  # the first chunk starts the command stream
            chunks.publish(takeover_chunk(10, 0.0, robot.node.get_clock().now().to_msg(), 0))
            time.sleep(0.2)
            with robot.lock:
                if len(robot.commands) > 10:
                    break
        else:
            return {"version": version, "error": "no commands within 60 s"}
        for horizon in TAKEOVER_SIZES:
            with robot.lock:
                accepted_before = int(robot.diagnostics.get("chunks_accepted", "0"))
                robot.commands, robot.recording = [], True
            for i in range(TAKEOVER_CHUNKS):
                stamp = robot.node.get_clock().now().to_msg()
                chunks.publish(takeover_chunk(horizon, 0.1 * (i % 2), stamp, i + 1))
                time.sleep(0.5)
            time.sleep(1.0)  # the last diagnostics
            with robot.lock:
                robot.recording = False
                commands = list(robot.commands)
                diagnostics = dict(robot.diagnostics)
            entry = tick_delays(commands)
            entry["chunks_sent"] = TAKEOVER_CHUNKS
            entry["chunks_accepted"] = int(diagnostics.get("chunks_accepted", "0")) - accepted_before
            entry["tick_overruns"] = diagnostics.get("tick_overruns")
            result[f"{horizon}_steps"] = entry
            print(json.dumps({"takeover": version, "horizon": horizon, **entry}), flush=True)
        return result
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
        robot.close()
        lease.release()
        clean_stale_shm()


def worst(entries: list[dict[str, Any]], *keys: str) -> float | None:
    """The largest figure over the rounds of one version (None where no round measured it)."""
    values = [v for v in (pick(e, *keys) for e in entries) if v is not None]
    return max(values) if values else None


def run_takeover(before: str, output: Path, rounds: int) -> None:
    """--takeover: tick delays of this tree's executor and of `before`'s, same run (see the module docstring).

    Each round runs the three executors, every other round in reverse order (the machine's load drifts)."""
    import tempfile

    repo = Path(__file__).resolve().parents[1]
    package = "ros_ws/src/lerobot_policy_node"
    realtime = ("-p", "realtime:=true", "-p", f"realtime_priority:={PRIORITY}", "-p", "realtime_lock_memory:=false")
    names = ("after", f"before ({before})", f"after, realtime (SCHED_FIFO {PRIORITY})")
    results: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory() as tmp:
        sources = f"{package}/lerobot_policy_node"
        archive = subprocess.run(["git", "-C", str(repo), "archive", before, sources], check=True, capture_output=True)
        subprocess.run(["tar", "-x", "-C", tmp], input=archive.stdout, check=True)
        runs = {names[0]: (None, ()), names[1]: (f"{tmp}/{package}", ()), names[2]: (None, realtime)}
        for round_index in range(rounds):
            for name in names if round_index % 2 == 0 else reversed(names):
                pythonpath, extra = runs[name]
                results.append({"round": round_index, **run_takeover_version(name, pythonpath, extra)})
    by_name = {name: [r for r in results if r["version"] == name] for name in names}
    rows = []
    for name in (names[0], names[2]):
        for horizon in TAKEOVER_SIZES:
            for stat in ("max", "p99"):
                rows.append(
                    figure(
                        f"tick delay while {horizon}-step chunks are taken over, {stat}, worst of {rounds} "
                        f"round(s), 100 Hz executor: {name}",
                        worst(by_name[name], f"{horizon}_steps", f"{stat}_ms"),
                        "ms",
                        baseline=worst(by_name[names[1]], f"{horizon}_steps", f"{stat}_ms"),
                        baseline_what=f"the executor of {before} (chunks taken over in its tick thread), same run",
                        target="<= 2 ms (issue #29)" if horizon == 100_000 and stat == "max" else None,
                    )
                )
    with open("/proc/loadavg") as handle:
        load = handle.read().split()[:3]
    report = {
        "bench": "policy_executor_takeover",
        "headline": rows,
        "rate_hz": TAKEOVER_RATE,
        "chunks_per_size": TAKEOVER_CHUNKS,
        "before": before,
        "machine": {"cpus": os.cpu_count(), "python": platform.python_version(), "loadavg_at_end": load},
        "rounds": rounds,
        "results": results,
    }
    output.parent.mkdir(parents=True, exist_ok=True)
    output.write_text(json.dumps(report, indent=2) + "\n")
    print(f"wrote {output}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--seconds", type=float, default=8.0, help="recorded seconds per configuration")
    parser.add_argument("--quick", action="store_true", help="100 Hz and 0.2x only")
    parser.add_argument("--rates", type=float, nargs="+", default=list(RATES), help="control rates (Hz)")
    parser.add_argument("--delays", type=float, nargs="+", default=list(DELAYS), help="inference x chunk duration")
    parser.add_argument("--output", type=Path, default=None, help="result JSON")
    parser.add_argument("--takeover", action="store_true", help="tick delay while long chunks are taken over")
    parser.add_argument("--before", default=TAKEOVER_BEFORE, help="--takeover: the commit of the 'before' executor")
    parser.add_argument("--rounds", type=int, default=2, help="--takeover: rounds of the three executors")
    parser.add_argument("--baseline", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--delay", type=float, default=0.2, help=argparse.SUPPRESS)
    parser.add_argument("--rate", type=float, default=100.0, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.baseline:
        run_baseline(args)
        return
    if args.takeover:
        run_takeover(args.before, args.output or TAKEOVER_RESULTS, args.rounds)
        return
    args.output = args.output or RESULTS
    import tempfile

    results: list[dict[str, Any]] = []
    rates = (100.0,) if args.quick else tuple(args.rates)
    delays = (0.2,) if args.quick else tuple(args.delays)
    with tempfile.TemporaryDirectory() as tmp:
        for rate in rates:
            for factor in delays:
                entry: dict[str, Any] = {"rate_hz": rate, "inference_delay_x_chunk": factor, "recorded_s": args.seconds}
                for system in ("ours", "baseline"):
                    entry[system] = run_system(system, factor, rate, args.seconds, Path(tmp))
                    print(json.dumps({"rate": rate, "delay": factor, system: entry[system]}), flush=True)
                ours, base = entry["ours"], entry["baseline"]
                if "error" not in ours and "error" not in base:
                    entry["ratios_baseline_over_ours"] = {
                        "latency_p50": ratio(base["latency_ms"]["p50"], ours["latency_ms"]["p50"]),
                        "latency_p99": ratio(base["latency_ms"]["p99"], ours["latency_ms"]["p99"]),
                        "jitter_p99": ratio(base["jitter_ms"]["p99"], ours["jitter_ms"]["p99"]),
                        "stamp_jitter_p99": ratio(base["stamp_jitter_ms"]["p99"], ours["stamp_jitter_ms"]["p99"]),
                        "stream_gap_time": ratio(base["stream_gaps"]["time_s"], ours["stream_gaps"]["time_s"]),
                        "max_boundary_step": ratio(base["max_boundary_step_rad"], ours["max_boundary_step_rad"]),
                        "max_boundary_speed": ratio(base["max_boundary_speed_rad_s"], ours["max_boundary_speed_rad_s"]),
                    }
                results.append(entry)
    with open("/proc/loadavg") as handle:
        load = handle.read().split()[:3]
    report = {
        "bench": "policy_executor",
        "headline": headline(results),
        "chunk_duration_s": CHUNK_S,
        "recorded_s_per_config": args.seconds,
        "machine": {"cpus": os.cpu_count(), "python": platform.python_version(), "loadavg_at_end": load},
        "results": results,
    }
    args.output.parent.mkdir(parents=True, exist_ok=True)
    args.output.write_text(json.dumps(report, indent=2) + "\n")
    print(f"wrote {args.output}")


if __name__ == "__main__":
    main()
