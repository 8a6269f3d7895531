"""The policy node's `remote` backend (checkpoint:=grpc://HOST:PORT) and its task text, as processes.

A numpy-only policy server (tests/policy_server/fake_policy_server.py) drives the fake-hardware arm through
the node and the executor; it is killed mid-run (status + /diagnostics say so, the executor holds, the arm
stays where it is) and started again (the node reconnects). An unreachable server fails configure with one
line naming the server route; a server answering the wrong action dimension is reported and never published.
The task reaches the server with every observation and each chunk says which task it was computed for.
"""

from __future__ import annotations

import math
import sys
import time
from pathlib import Path

import numpy as np
import pytest
from policy_outputs import PolicyOutputProbe
from test_policy_on_fake_arm import Probe, start_fake_arm, write_contract

from lerobot_ros.testing import venv_script

pytestmark = pytest.mark.ros

REPO = Path(__file__).resolve().parents[3]
FAKE_SERVER = REPO / "tests" / "policy_server" / "fake_policy_server.py"
sys.path.insert(0, str(REPO / "tests" / "policy_server"))
from reference import free_port  # noqa: E402

JOINTS = ["shoulder_pan", "shoulder_lift", "elbow_flex", "wrist_flex", "wrist_roll", "gripper"]


class ChunkProbe(PolicyOutputProbe):
    """Keeps ActionChunks, the policy node's latched status and its /diagnostics entries; publishes the task."""

    def __init__(self, node) -> None:
        from diagnostic_msgs.msg import DiagnosticArray
        from std_msgs.msg import String

        super().__init__(node)
        self.diagnostics: list = []  # the policy node's /diagnostics entries
        node.create_subscription(DiagnosticArray, "/diagnostics", self._on_diagnostics, 50)
        self.task = node.create_publisher(String, "/policy/task", 10)

    def _on_diagnostics(self, msg) -> None:
        with self.lock:
            self.diagnostics.extend(s for s in msg.status if s.name.endswith(": policy"))

    def diagnostic(self, predicate, timeout: float = 30.0):
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            with self.lock:
                for status in reversed(self.diagnostics):
                    if predicate(status):
                        return status
            time.sleep(0.05)
        raise AssertionError(f"no matching policy diagnostics within {timeout} s")

    def publish_task(self, text: str, timeout: float = 30.0) -> None:
        """Publish on /policy/task once the policy node's subscription is matched (else the message is lost)."""
        from std_msgs.msg import String

        deadline = time.monotonic() + timeout
        while self.task.get_subscription_count() < 1:
            assert time.monotonic() < deadline, "the policy node never subscribed to /policy/task"
            time.sleep(0.05)
        self.task.publish(String(data=text))

    def chunk(self, predicate, timeout: float = 60.0):
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            with self.lock:
                for chunk in reversed(self.chunks):
                    if predicate(chunk):
                        return chunk
            time.sleep(0.05)
        raise AssertionError(f"no matching ActionChunk within {timeout} s ({len(self.chunks)} chunks)")


def publish_joint_states(node) -> None:
    """joint_states of a still arm at 50 Hz (no arm needed)."""
    from sensor_msgs.msg import JointState

    publisher = node.create_publisher(JointState, "/follower/joint_states", 10)

    def publish() -> None:
        msg = JointState()
        msg.header.stamp = node.get_clock().now().to_msg()
        msg.name, msg.position = JOINTS, [0.1] * 6
        publisher.publish(msg)

    node.create_timer(0.02, publish)


def start_fake_server(processes, port: int, *extra: str):
    server = processes.start([sys.executable, str(FAKE_SERVER), "--port", str(port), *extra], name=f"server-{port}")
    server.wait_for_output(f"serving on {port}", timeout=60)
    return server


def start_policy(processes, contract: str, port: int, *extra: str):
    argv = [venv_script("policy_node"), "--ros-args", "-p", f"checkpoint:=grpc://127.0.0.1:{port}",
            "-p", f"contract:={contract}", "-p", "max_observation_age:=1.0", "-p", "remote_timeout:=2.0",
            "-p", "threshold:=0.0", "-p", "margin:=0.1", *extra]  # fmt: skip
    return processes.start(argv, name="policy")


@pytest.fixture
def fake_arm(tmp_path, processes):
    """Fake SO-101 servos on a pty + arm driver + action executor (joint_commands), in /follower."""
    ptys: list = []
    driver, executor = start_fake_arm(processes, tmp_path, ptys)
    for process in (driver, executor):
        process.wait_for_output("active", timeout=60)
    yield
    processes.stop_all()
    for pty in ptys:
        pty.stop()


def test_remote_policy_drives_the_fake_arm_and_survives_a_server_crash(tmp_path, processes, ros_node, fake_arm):
    probe = Probe(ros_node)
    chunks = ChunkProbe(ros_node)
    port = free_port()
    server = start_fake_server(processes, port)
    start_policy(processes, write_contract(tmp_path / "contract.yaml"), port, "-p", "task:=wave")
    first = chunks.chunk(lambda c: True)
    assert first.policy == f"grpc://127.0.0.1:{port}" and first.task == "wave"
    assert list(first.names) == JOINTS and first.horizon == 15
    probe.diagnostic(lambda v: int(v["chunks_accepted"]) >= 3)
    # /diagnostics carries the link's figures and what limits the node.
    link = chunks.diagnostic(lambda d: any(kv.key == "link_request_bytes" for kv in d.values))
    values = {kv.key: kv.value for kv in link.values}
    assert values["image_encoding"] == "raw" and int(values["link_request_bytes"]) > 0
    assert values["bottleneck"] in ("none", "link", "inference") and float(values["link_transfer_s"]) > 0
    # The task changes at run time through ~/task: the next chunks say they were computed for it.
    chunks.publish_task("wave twice")
    chunks.chunk(lambda c: c.task == "wave twice")
    status = chunks.status(lambda s: s.task == "wave twice" and s.last_chunk_task == "wave twice")
    assert status.state == "active"

    server.popen.kill()  # crash: no goodbye
    server.wait(10)
    status = chunks.status(lambda s: "unreachable" in s.message, timeout=30)
    assert f"grpc://127.0.0.1:{port}" in status.message and status.state == "active"
    from diagnostic_msgs.msg import DiagnosticStatus

    entry = chunks.diagnostic(lambda d: "unreachable" in d.message)
    assert entry.level == DiagnosticStatus.WARN
    assert {kv.key: kv.value for kv in entry.values}["last_chunk_task"] == "wave twice"
    crashed = time.monotonic()
    published = status.chunks_published
    values = probe.diagnostic(lambda v: v["starved"] == "true" or int(v["starvation_events"]) >= 1, timeout=30)
    assert int(values["starvation_events"]) >= 1 or values["starved"] == "true"
    time.sleep(1.5)
    held = probe.positions(since=time.monotonic() - 1.0)
    assert len(held) > 5
    assert np.ptp(held, axis=0).max() < math.radians(1.0), "the arm moved while the policy server was down"
    with chunks.lock:
        assert not [c for c in chunks.chunks if c.chunk_id > published]

    start_fake_server(processes, port)  # back on the same address: the node reconnects by itself
    status = chunks.status(lambda s: s.chunks_published > published + 2, timeout=60)
    assert "unreachable" not in status.message
    print(f"chunks resumed {time.monotonic() - crashed:.1f} s after the crash")


def test_an_unreachable_server_fails_configure_naming_the_server_route(tmp_path, processes, ros_node):
    chunks = ChunkProbe(ros_node)
    port = free_port()
    policy = start_policy(processes, write_contract(tmp_path / "contract.yaml"), port)
    line = policy.wait_for_output(f"policy server grpc://127.0.0.1:{port} unreachable", timeout=60).string
    assert "lerobot-ros policy-server CHECKPOINT --port PORT" in line
    status = chunks.status(lambda s: s.state == "error")
    assert "unreachable" in status.message
    time.sleep(0.5)
    assert not chunks.chunks


def test_wrong_action_dimension_from_the_server_is_reported_never_published(tmp_path, processes, ros_node):
    chunks = ChunkProbe(ros_node)
    publish_joint_states(ros_node)
    port = free_port()
    start_fake_server(processes, port, "--fault", "dim")
    policy = start_policy(processes, write_contract(tmp_path / "contract.yaml"), port)
    policy.wait_for_output(r"the policy returned actions of shape \(15, 7\), not \(horizon, 6\)", timeout=60)
    status = chunks.status(lambda s: "not published" in s.message)
    assert status.chunks_published == 0 and not chunks.chunks


def test_a_task_with_control_characters_is_refused(tmp_path, processes, ros_node):
    chunks = ChunkProbe(ros_node)
    port = free_port()
    start_fake_server(processes, port)
    policy = start_policy(processes, write_contract(tmp_path / "contract.yaml"), port, "-p", "task:=stack")
    policy.wait_for_output("active", timeout=60)
    chunks.publish_task("stack\nthen wave")
    policy.wait_for_output(r"task on ~/task refused: task contains control characters \(U\+000A\)", timeout=30)
    chunks.publish_task("stack, then wave")
    chunks.status(lambda s: s.task == "stack, then wave")


def test_the_node_presents_the_token_a_server_asks_for(tmp_path, processes, ros_node):
    chunks = ChunkProbe(ros_node)
    publish_joint_states(ros_node)
    (tmp_path / "token").write_text("5ecret-token-0123456789\n")
    port = free_port()
    start_fake_server(processes, port, "--token-file", str(tmp_path / "token"))
    contract = write_contract(tmp_path / "contract.yaml")
    policy = start_policy(processes, contract, port)  # no token
    policy.wait_for_output(r"refused Info: the call carries no token.*set remote_token_file", timeout=60)
    assert chunks.status(lambda s: s.state == "error").message
    policy.stop()
    start_policy(processes, contract, port, "-p", f"remote_token_file:={tmp_path / 'token'}")
    assert chunks.chunk(lambda c: True).horizon == 15
