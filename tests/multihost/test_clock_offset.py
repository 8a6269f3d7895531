"""The policy node on a host whose clock is off from the robot's (one machine, the offset injected).

The robot stamps its joint_states on its own clock; the policy node reads its clock shifted by
`LEROBOT_ROS_TEST_CLOCK_OFFSET_S` (the test-only hook that plays a second host's clock). Its freshness checks
must use the offset it estimates (receive time - stamp), publish chunks stamped with the robot's own stamps,
report the offset, and refuse to run when the offset is beyond `max_clock_offset`.
"""

from __future__ import annotations

import threading
import time

import pytest
import yaml

from lerobot_contract.time import NS
from lerobot_ros.testing import venv_script

pytestmark = pytest.mark.ros

JOINTS = ["shoulder_pan", "shoulder_lift", "elbow_flex", "wrist_flex", "wrist_roll", "gripper"]
CLOCK_OFFSET_ENV = "LEROBOT_ROS_TEST_CLOCK_OFFSET_S"
MAX_AGE_NS = NS // 10


def write_contract(path) -> str:
    names = [f"{j}.pos" for j in JOINTS]
    vector = {"type": "sensor_msgs/msg/JointState", "joints": JOINTS, "names": names, "units": "rad_to_deg"}
    features = {
        "observation.state": {**vector, "topic": "/follower/joint_states", "max_age_s": 0.1},
        "action": {**vector, "topic": "/follower/joint_commands"},
    }
    path.write_text(yaml.safe_dump({"robot_type": "so101_follower", "fps": 30, "features": features}))
    return str(path)


class RobotProbe:
    """The robot side: joint_states at 50 Hz on this process's clock; keeps chunks, status and diagnostics."""

    def __init__(self, node) -> None:
        from diagnostic_msgs.msg import DiagnosticArray
        from rclpy.qos import DurabilityPolicy, QoSProfile, ReliabilityPolicy
        from sensor_msgs.msg import JointState

        from lerobot_msgs.msg import ActionChunk, PolicyStatus

        self.node = node
        self.lock = threading.Lock()
        self.chunks: list = []
        self.statuses: list = []
        self.diagnostics: list[dict[str, str]] = []
        self.stamps: set[int] = set()
        latched = QoSProfile(
            depth=1, durability=DurabilityPolicy.TRANSIENT_LOCAL, reliability=ReliabilityPolicy.RELIABLE
        )
        node.create_subscription(ActionChunk, "/policy/action_chunk", self._keep(self.chunks), 50)
        node.create_subscription(PolicyStatus, "/policy/status", self._keep(self.statuses), latched)
        node.create_subscription(DiagnosticArray, "/diagnostics", self._on_diagnostics, 50)
        self.states = node.create_publisher(JointState, "/follower/joint_states", 10)
        node.create_timer(0.02, self._publish)

    def _keep(self, into: list):
        def on_message(msg) -> None:
            with self.lock:
                into.append(msg)

        return on_message

    def _on_diagnostics(self, msg) -> None:
        with self.lock:
            for status in msg.status:
                if status.name.endswith("policy"):
                    self.diagnostics.append({kv.key: kv.value for kv in status.values})

    def _publish(self) -> None:
        from sensor_msgs.msg import JointState

        msg = JointState()
        now = self.node.get_clock().now()
        msg.header.stamp = now.to_msg()
        msg.name, msg.position = JOINTS, [0.1] * 6
        with self.lock:
            self.stamps.add(now.nanoseconds)
        self.states.publish(msg)

    def wait(self, what: str, predicate, timeout: float = 60.0):
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            with self.lock:
                for item in reversed(getattr(self, what)):
                    if predicate(item):
                        return item
            time.sleep(0.05)
        with self.lock:
            last = getattr(self, what)[-1] if getattr(self, what) else None
        raise AssertionError(f"no matching {what} within {timeout} s; last: {last}")


def start_policy(processes, ros_env, contract: str, offset_s: float, *extra: str):
    argv = [venv_script("policy_node"), "--ros-args", "-p", "checkpoint:=scripted:delay=0.02,horizon=15",
            "-p", f"contract:={contract}", *extra]  # fmt: skip
    return processes.start(argv, name="policy", env={**ros_env, CLOCK_OFFSET_ENV: str(offset_s)})


@pytest.mark.parametrize("offset_s", [0.5, pytest.param(-0.5, marks=pytest.mark.extended)])
def test_policy_host_clock_offset_is_estimated_and_chunks_carry_robot_stamps(
    tmp_path, processes, ros_env, ros_node, offset_s
):
    probe = RobotProbe(ros_node)
    # Default freshness limits: max_observation_age 0.2 s, future_tolerance 0.05 s, both smaller than the offset.
    start_policy(processes, ros_env, write_contract(tmp_path / "c.yaml"), offset_s)
    # Misapplied, the offset (0.5 s, beyond max_observation_age 0.2 s and future_tolerance 0.05 s) would make every
    # observation stale or from the future: no chunk, and no status with a fresh observation. A busy machine may still
    # delay a few inferences past 0.2 s: those are counted as stale, as they should be (10 in one run at load 18).
    probe.wait("statuses", lambda s: s.chunks_published >= 5 and 0 <= s.observation_age < 0.2)
    # The status and the chunks are different topics: under load the status saying 5 can arrive before the 5th chunk.
    probe.wait("chunks", lambda _: len(probe.chunks) >= 5)
    with probe.lock:
        chunks, stamps = list(probe.chunks), set(probe.stamps)
    # Stamped on the robot's clock: a chunk's stamp is its frame's time, which holds a robot sample stamped at
    # or before it, no older than the contract's max_age_s (0.1 s), never one shifted by the policy host's clock.
    assert len(chunks) >= 5
    for chunk in chunks:
        stamp = chunk.header.stamp.sec * NS + chunk.header.stamp.nanosec
        assert any(0 <= stamp - s <= MAX_AGE_NS for s in stamps), (stamp, max(stamps))
    # The offset (policy host - robot) is reported; the estimate includes the smallest transport delay.
    values = probe.wait("diagnostics", lambda v: v.get("clock_offset_s", "") not in ("", "unknown"))
    assert float(values["clock_offset_s"]) == pytest.approx(offset_s, abs=0.05)


def test_clock_offset_beyond_max_clock_offset_is_refused_with_a_reason(tmp_path, processes, ros_env, ros_node):
    probe = RobotProbe(ros_node)
    policy = start_policy(processes, ros_env, write_contract(tmp_path / "c.yaml"), 0.5, "-p", "max_clock_offset:=0.2")
    policy.wait_for_output("max_clock_offset")
    status = probe.wait("statuses", lambda s: "max_clock_offset" in s.message)
    assert status.chunks_published == 0
    assert "behind" in status.message or "ahead" in status.message
    time.sleep(1.0)
    assert not probe.chunks
