"""Hostile ActionChunks into the action executor, as a process in its own ROS domain (issue 18, items 2 and 6).

Every malformed chunk is refused with a counted reason on /diagnostics, the tick loop survives it and the next
valid chunk is executed; a chunk of 1e6 is clipped to the robot's limits and rate limited, never a jump.
"""

from __future__ import annotations

import itertools
import threading
import time

import numpy as np
import pytest
import yaml

from lerobot_contract.time import NS
from lerobot_ros.testing import venv_script

pytestmark = pytest.mark.ros

JOINTS = ["shoulder_pan", "shoulder_lift", "elbow_flex", "wrist_flex", "wrist_roll", "gripper"]
LOWER = [-1.9, -1.7, -1.6, -1.6, -2.7, -0.17]
UPPER = [1.9, 1.7, 1.6, 1.6, 2.8, 1.7]
MAX_VELOCITY = 2.0
RATE = 50.0
HORIZON = 30
PERIOD_NS = NS // 30


def write_robot_config(path) -> str:
    path.write_text(
        yaml.safe_dump(
            {
                "/follower/action_executor": {
                    "ros__parameters": {
                        "joint_names": JOINTS,
                        "joint_limits_lower": LOWER,
                        "joint_limits_upper": UPPER,
                        "max_velocity": MAX_VELOCITY,
                    }
                }
            }
        )
    )
    return str(path)


class ExecutorProbe:
    """Publishes chunks (and optionally joint_states), keeps the executor's commands and diagnostics."""

    def __init__(self, node) -> None:
        from diagnostic_msgs.msg import DiagnosticArray
        from rclpy.qos import QoSProfile, ReliabilityPolicy
        from sensor_msgs.msg import JointState

        from lerobot_msgs.msg import ActionChunk

        self.node = node
        self.lock = threading.Lock()
        self.commands: list = []
        self.diagnostics: list = []
        self.chunks = node.create_publisher(
            ActionChunk, "/policy/action_chunk", QoSProfile(depth=5, reliability=ReliabilityPolicy.RELIABLE)
        )
        self.states = node.create_publisher(JointState, "/follower/joint_states", 10)
        node.create_subscription(JointState, "/follower/joint_commands", self._keep(self.commands), 200)
        node.create_subscription(DiagnosticArray, "/diagnostics", self._keep(self.diagnostics), 50)

    def _keep(self, into: list):
        def on_message(msg) -> None:
            with self.lock:
                into.append(msg)

        return on_message

    def now_ns(self) -> int:
        return int(self.node.get_clock().now().nanoseconds)

    def chunk(self, value: float = 0.3, **fields):
        from builtin_interfaces.msg import Duration

        from lerobot_msgs.msg import ActionChunk

        names = fields.pop("names", JOINTS)
        horizon = fields.pop("horizon", HORIZON)
        data = fields.pop("data", [value] * (horizon * len(names)))
        stamp_ns = fields.pop("stamp_ns", self.now_ns() - fields.pop("age_ns", 0))
        msg = ActionChunk(names=names, horizon=horizon, period=fields.pop("period", Duration(nanosec=PERIOD_NS)))
        msg.header.stamp.sec = fields.pop("sec", stamp_ns // NS)
        msg.header.stamp.nanosec = stamp_ns % NS
        msg.data = [float(v) for v in data]
        msg.chunk_id = fields.pop("chunk_id", 1)
        assert not fields, fields
        return msg

    def executor_values(self) -> dict[str, str] | None:
        with self.lock:
            for array in reversed(self.diagnostics):
                for status in array.status:
                    if status.name.endswith("action executor"):
                        return {"level": str(ord(status.level)), "message": status.message} | {
                            kv.key: kv.value for kv in status.values
                        }
        return None

    def wait_values(self, condition, timeout: float = 30.0) -> dict[str, str]:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            values = self.executor_values()
            if values is not None and condition(values):
                return values
            time.sleep(0.05)
        raise AssertionError(f"executor diagnostics never matched within {timeout} s; last: {self.executor_values()}")

    def wait_executing(self, condition, timeout: float = 30.0) -> dict[str, str]:
        """Keep sending valid chunks until the executor reports OK (executing) and `condition` holds."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            self.chunks.publish(self.chunk(0.3))
            values = self.executor_values()
            if values is not None and values["level"] == "0" and condition(values):
                return values
            time.sleep(0.2)
        raise AssertionError(f"the executor never reported executing in {timeout} s; last: {self.executor_values()}")

    def wait_commanded(self, value: float, timeout: float = 30.0) -> None:
        """Send valid chunks (value) until the executor commands exactly it."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            self.chunks.publish(self.chunk(value, chunk_id=7))
            time.sleep(0.2)
            with self.lock:
                last = [list(m.position) for m in self.commands[-3:]]
            if last and all(p == pytest.approx([value] * 6, abs=1e-6) for p in last):
                return
        raise AssertionError(f"the executor never commanded {value}; last commands: {last}")


def start_executor(processes, tmp_path):
    argv = [venv_script("action_executor"), "--ros-args", "-r", "__ns:=/follower",
            "-p", f"robot_config:={write_robot_config(tmp_path / 'robot.yaml')}", "-p", "output:=joint_commands",
            "-p", f"rate:={RATE}", "-p", "diagnostics_period:=0.2"]  # fmt: skip
    executor = processes.start(argv, name="executor")
    executor.wait_for_output("active", timeout=60)
    return executor


def test_a_negative_stamp_is_refused_and_the_next_chunk_is_executed(tmp_path, processes, ros_node):
    """Issue 18 item 2: a negative stamp killed the tick thread (Time.from_msg raised); every later chunk was lost."""
    probe = ExecutorProbe(ros_node)
    start_executor(processes, tmp_path)
    probe.wait_values(lambda v: True)
    probe.chunks.publish(probe.chunk(0.5, sec=-5))
    values = probe.wait_values(lambda v: int(v.get("rejected_stamp", "0")) >= 1)
    assert values["chunks_accepted"] == "0"
    ticks = int(values["ticks"])
    probe.wait_commanded(0.3)
    # the tick loop lives on: fed valid chunks it reports OK "executing" (starved, WARN, only when they stop)
    probe.wait_executing(lambda v: int(v["ticks"]) > ticks and int(v["chunks_accepted"]) >= 1)


@pytest.mark.parametrize(
    ("reason", "fields"),
    [
        ("stamp", {"stamp_ns": 0}),
        ("future", {"sec": 2147483647}),
        ("stale", {"sec": 1}),
        ("non_finite", {"data": [float("nan")] * (HORIZON * 6)}),
        ("names", {"names": [f"{j}_typo" for j in JOINTS]}),
        ("shape", {"horizon": HORIZON + 1, "data": [0.1] * (HORIZON * 6)}),
        ("shape", {"data": [0.1] * (HORIZON * 6 - 1)}),
        ("period", {"period": {"sec": -1}}),
        ("period", {"period": {"sec": 2_000_000_000}}),
        # An hour-old observation whose 400 x 10 s horizon still reaches the present (issue 29).
        ("too_old", {"age_ns": 3600 * NS, "horizon": 400, "period": {"sec": 10}}),
        ("too_long", {"horizon": 1001}),
    ],
)
def test_every_malformed_chunk_is_refused_with_a_counted_reason(tmp_path, processes, ros_node, reason, fields):
    """A chunk with wrong names first (the old default locked onto them), then a valid one: it is executed."""
    from builtin_interfaces.msg import Duration

    if "period" in fields:
        fields = dict(fields, period=Duration(**fields["period"]))
    probe = ExecutorProbe(ros_node)
    executor = start_executor(processes, tmp_path)
    probe.wait_values(lambda v: True)
    probe.chunks.publish(probe.chunk(0.5, **fields))
    values = probe.wait_values(lambda v: int(v.get(f"rejected_{reason}", "0")) >= 1)
    assert values["chunks_accepted"] == "0" and values["chunks_rejected"] == "1", values
    limits = {
        "too_old": r"3600\.\d+ s old, older than max_chunk_age = 2 s",
        "too_long": "more than max_chunk_steps = 1000",
    }
    if reason in limits:  # the log line names the value and the parameter to raise
        executor.wait_for_output(rf"chunk rejected \({reason}\): .*{limits[reason]}; raise max_chunk_")
    probe.wait_commanded(0.3)
    probe.wait_executing(lambda v: int(v["chunks_accepted"]) >= 1)


def test_a_chunk_computed_while_stopped_is_taken_on_enable(tmp_path, processes, ros_node):
    """The evaluation through ROS stops an executor, resets the sim, waits for the policy's first chunk of the new
    episode and enables the executor: that chunk had come while stopped and was refused, so the episode waited for
    the next inference (with 4 busy loops, all of a 1 s episode: no chunk accepted at all). The newest chunk
    computed after the stop is taken on enable; one computed before the stop is not."""
    from std_srvs.srv import SetBool

    from lerobot_ros.testing import call_service

    def enable(on: bool) -> None:
        reply = call_service(ros_node, SetBool, "/follower/action_executor/enable", SetBool.Request(data=on))
        assert reply.success, reply.message

    probe = ExecutorProbe(ros_node)
    start_executor(processes, tmp_path)
    probe.wait_values(lambda v: True)
    before = probe.chunk(0.2, chunk_id=1)  # computed before the stop
    enable(False)
    probe.chunks.publish(before)
    probe.wait_values(lambda v: v.get("rejected_disabled") == "1")
    enable(True)
    probe.chunks.publish(probe.chunk(0.3, sec=-5, chunk_id=2))  # a marker: refused, counted after the enable
    values = probe.wait_values(lambda v: v.get("rejected_stamp") == "1")
    assert values["chunks_accepted"] == "0", values  # the chunk from before the stop was not taken
    enable(False)
    probe.chunks.publish(probe.chunk(0.4, chunk_id=3))  # computed while stopped
    probe.wait_values(lambda v: v.get("rejected_disabled") == "2")
    enable(True)
    probe.wait_values(lambda v: v["chunks_accepted"] == "1")  # no other chunk was sent
    deadline = time.monotonic() + 30.0
    while time.monotonic() < deadline:  # it runs: the velocity limit ramps to 0.4 within 0.2 s of its 1 s
        with probe.lock:
            if probe.commands and list(probe.commands[-1].position) == pytest.approx([0.4] * 6, abs=1e-6):
                return
        time.sleep(0.05)
    raise AssertionError(f"the chunk taken on enable never commanded 0.4: {probe.commands[-1:]}")


def test_a_chunk_of_a_million_is_clipped_and_rate_limited(tmp_path, processes, ros_node):
    """Issue 18 item 6: limits and a velocity limit are on by default: 1e6 rad becomes a bounded ramp."""
    from sensor_msgs.msg import JointState

    probe = ExecutorProbe(ros_node)

    def publish_state() -> None:
        probe.states.publish(JointState(name=JOINTS, position=[0.0] * 6))

    ros_node.create_timer(0.02, publish_state)
    start_executor(processes, tmp_path)
    probe.wait_values(lambda v: True)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        probe.chunks.publish(probe.chunk(1e6, chunk_id=9))
        with probe.lock:
            reached = any(max(m.position) >= max(UPPER) - 1e-9 for m in probe.commands)
        if reached:
            break
        time.sleep(0.2)
    with probe.lock:
        commands = [(m.header.stamp.sec * NS + m.header.stamp.nanosec, np.array(m.position)) for m in probe.commands]
    assert commands, "the executor never commanded"
    positions = np.array([p for _, p in commands])
    assert np.all(positions <= np.array(UPPER) + 1e-9) and np.all(positions >= np.array(LOWER) - 1e-9)
    assert positions[-1] == pytest.approx(UPPER, abs=1e-6), "the 1e6 chunk ends clipped at the upper limits"
    # From the measured pose (0) up, each command moves at most max_velocity x the time since the previous one.
    assert np.all(np.abs(positions[0]) <= MAX_VELOCITY / RATE * 2 + 1e-9), positions[0]
    for (t0, p0), (t1, p1) in itertools.pairwise(commands):
        assert np.max(np.abs(p1 - p0)) <= MAX_VELOCITY * (t1 - t0) / NS + 1e-6
    values = probe.wait_values(lambda v: int(v["rate_limited_ticks"]) > 0 and int(v["clipped_values"]) > 0)
    assert values["level"] == "0"
