"""Records, on the robot host, what the two-host stack does: chunks, joint states, executor and policy diagnostics.

Started before the policy: prints "pose seen" with the first joint state it receives (the arm's pose before any
chunk: the harness starts the policy only after that line), waits for the first ActionChunk, records for
`--duration` s, writes JSON to `--out` and exits 0 (1: no chunk within `--timeout` s; whatever was seen is still
written). With `--wire-stats`, the wire's counters at the start and end of the window are included. Receive
times are this host's (the robot's) clock, the clock the chunks are stamped on, so receive - stamp is the
observation -> chunk latency at the robot.
"""

from __future__ import annotations

import argparse
import json
import threading
import time
from pathlib import Path
from typing import Any

import rclpy
from diagnostic_msgs.msg import DiagnosticArray
from rclpy.executors import SingleThreadedExecutor
from rclpy.node import Node
from rclpy.qos import QoSProfile, ReliabilityPolicy
from sensor_msgs.msg import JointState

from lerobot_contract.time import NS
from lerobot_msgs.msg import ActionChunk


def _number(text: str) -> Any:
    try:
        return float(text)
    except ValueError:
        return text


class Recorder:
    def __init__(self, node: Node) -> None:
        self.node = node
        self.lock = threading.Lock()
        self.start_ns: int | None = None
        self.chunks: list[dict[str, Any]] = []
        self.states: list[tuple[int, list[float]]] = []
        self.state_before: list[float] | None = None
        self.executor: list[dict[str, Any]] = []
        self.executor_before: dict[str, Any] = {}
        self.policy: dict[str, Any] = {}
        reliable = QoSProfile(depth=50, reliability=ReliabilityPolicy.RELIABLE)
        best_effort = QoSProfile(depth=50, reliability=ReliabilityPolicy.BEST_EFFORT)
        node.create_subscription(ActionChunk, "/policy/action_chunk", self._on_chunk, reliable)
        node.create_subscription(JointState, "/follower/joint_states", self._on_state, best_effort)
        node.create_subscription(DiagnosticArray, "/diagnostics", self._on_diagnostics, 50)

    def _now(self) -> int:
        return int(self.node.get_clock().now().nanoseconds)

    def _on_chunk(self, msg: ActionChunk) -> None:
        now = self._now()
        with self.lock:
            if self.start_ns is None:
                self.start_ns = now
            width = len(msg.names)
            self.chunks.append({
                "receive_ns": now,
                "stamp_ns": msg.header.stamp.sec * NS + msg.header.stamp.nanosec,
                "chunk_id": int(msg.chunk_id),
                "inference_time": float(msg.inference_time),
                "policy": msg.policy,
                "last_step": [float(v) for v in msg.data[-width:]],
            })  # fmt: skip

    def _on_state(self, msg: JointState) -> None:
        with self.lock:
            if self.state_before is None:
                # The first pose this probe sees; the policy is started after it, so no chunk moved the arm yet.
                # (The last pose before this probe's first chunk is no such pose: its chunk subscription can be
                # matched after the executor's, which then already drove the arm.)
                self.state_before = [float(p) for p in msg.position]
                print("pose seen", flush=True)
            if self.start_ns is not None:
                self.states.append((self._now(), [float(p) for p in msg.position]))

    def _on_diagnostics(self, msg: DiagnosticArray) -> None:
        with self.lock:
            for status in msg.status:
                values = {kv.key: _number(kv.value) for kv in status.values}
                if "action executor" in status.name:
                    if self.start_ns is None:
                        self.executor_before = values
                    else:
                        self.executor.append(values)
                elif status.name.endswith(": policy"):
                    self.policy = {**values, "message": status.message}

    def result(self, window_s: float) -> dict[str, Any]:
        with self.lock:
            return {
                "window_s": window_s,
                "chunks": list(self.chunks),
                "state_before": self.state_before,
                "state_first": self.states[0][1] if self.states else None,
                "state_last": self.states[-1][1] if self.states else None,
                "states": len(self.states),
                "executor": {
                    "first": self.executor_before or (self.executor[0] if self.executor else {}),
                    "last": self.executor[-1] if self.executor else {},
                    "reports": len(self.executor),
                },
                "policy": dict(self.policy),
            }


def read_stats(path: Path | None) -> dict[str, Any]:
    if path is None or not path.exists():
        return {}
    stats: dict[str, Any] = json.loads(path.read_text())
    return stats


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--duration", type=float, default=10.0)
    parser.add_argument("--timeout", type=float, default=120.0)
    parser.add_argument("--wire-stats", type=Path, default=None, help="the wire's counters file")
    args = parser.parse_args()
    rclpy.init()
    node = rclpy.create_node("multihost_probe")
    recorder = Recorder(node)
    executor = SingleThreadedExecutor()
    executor.add_node(node)
    deadline = time.monotonic() + args.timeout
    started_at: float | None = None
    wire: dict[str, Any] = {}
    code = 0
    try:
        while True:
            executor.spin_once(timeout_sec=0.05)
            with recorder.lock:
                first = recorder.start_ns is not None
            if first and started_at is None:
                started_at = time.monotonic()
                wire["before"] = read_stats(args.wire_stats)
            if started_at is not None and time.monotonic() - started_at >= args.duration:
                wire["after"] = read_stats(args.wire_stats)
                break
            if started_at is None and time.monotonic() > deadline:
                code = 1
                break
    finally:
        window = time.monotonic() - started_at if started_at is not None else 0.0
        args.out.write_text(json.dumps({**recorder.result(window), "wire": wire}))
        node.destroy_node()
        rclpy.try_shutdown()
    return code


if __name__ == "__main__":
    raise SystemExit(main())
