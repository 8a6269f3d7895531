"""`lerobot-ros view CONTRACT --save FILE.rrd` on a real DDS graph (own ROS_DOMAIN_ID): synthetic joints and two
cameras, a policy's ActionChunks, recorder status and /diagnostics from fake publishers, and a contract camera
that never publishes. The .rrd the view wrote is read back with Rerun's own reader and checked entity by entity
(see rrd_contents.py for why the .rrd and not a screenshot of the viewer)."""

from __future__ import annotations

import json
import math
import sys
import time
from pathlib import Path

import pytest
import yaml
from rrd_contents import read_rrd

from lerobot_ros.testing import venv_script, wait_for_messages

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "recorder"))

from recorder_helpers import CONTRACT, ros_args  # noqa: E402

pytestmark = pytest.mark.ros

JOINTS = ["shoulder_pan", "shoulder_lift", "elbow_flex", "wrist_flex", "wrist_roll", "gripper"]


def contracts(tmp_path: Path) -> tuple[Path, Path]:
    """(what the synthetic publishers publish: joints, commands, front and wrist cameras; what the view reads:
    the same plus a `top` camera nobody publishes)."""
    data = yaml.safe_load(CONTRACT.read_text())
    action = dict(data["features"]["observation.state"], topic="/follower/joint_commands")
    data["features"]["action"] = action
    published = tmp_path / "published.yaml"
    published.write_text(yaml.safe_dump(data))
    data["features"]["observation.images.top"] = dict(
        data["features"]["observation.images.front"], topic="/cameras/top/image_raw"
    )
    viewed = tmp_path / "viewed.yaml"
    viewed.write_text(yaml.safe_dump(data))
    return published, viewed


def test_live_view_logs_the_robot_the_policy_the_recorder_and_diagnostics(tmp_path, processes, ros_node):
    from builtin_interfaces.msg import Duration
    from diagnostic_msgs.msg import DiagnosticArray, DiagnosticStatus, KeyValue
    from rclpy.qos import DurabilityPolicy, QoSProfile, ReliabilityPolicy
    from sensor_msgs.msg import JointState

    from lerobot_msgs.msg import ActionChunk, RecorderStatus

    published, viewed = contracts(tmp_path)
    processes.start(
        [venv_script("synthetic_streams"), *ros_args({"contract": str(published), "duration_s": 60.0})], name="streams"
    )
    wait_for_messages(ros_node, JointState, "/follower/joint_states", count=1, timeout=30)  # the robot is up
    rrd = tmp_path / "live.rrd"
    view = processes.start(
        [venv_script("lerobot-ros"), "view", str(viewed), "--save", str(rrd), "--image-rate", "5"],
        name="view",
    )
    latched = QoSProfile(depth=1, reliability=ReliabilityPolicy.RELIABLE, durability=DurabilityPolicy.TRANSIENT_LOCAL)
    status_pub = ros_node.create_publisher(RecorderStatus, "/recorder/status", latched)
    chunk_pub = ros_node.create_publisher(ActionChunk, "/policy/action_chunk", 5)
    diag_pub = ros_node.create_publisher(DiagnosticArray, "/diagnostics", 10)
    view.wait_for_output(r"watching 5 contract topics", timeout=30)
    deadline = time.monotonic() + 20
    graph = (
        "/follower/joint_states",
        "/follower/joint_commands",
        "/cameras/front/image_raw",
        "/cameras/wrist/image_raw",
    )
    while (
        chunk_pub.get_subscription_count() < 1
        or diag_pub.get_subscription_count() < 1
        or min(ros_node.count_subscribers(topic) for topic in graph) < 1
    ):
        assert time.monotonic() < deadline, "the view never subscribed to the robot's, chunk and diagnostics topics"
        time.sleep(0.05)

    def status(state: str, frames: int) -> RecorderStatus:
        msg = RecorderStatus(state_name=state, episode_index=0, frames=frames, task="pick the cube")
        msg.header.stamp = ros_node.get_clock().now().to_msg()
        return msg

    status_pub.publish(status("idle", 0))
    sent_ids = []
    for k in range(1, 13):  # ~2.4 s of chunks at 5 Hz; every value of chunk k is 0.1 k rad
        if k == 3:
            status_pub.publish(status("recording", 10))
        if k == 10:
            status_pub.publish(status("saving", 60))
        chunk = ActionChunk(names=JOINTS, horizon=30, chunk_id=k, period=Duration(sec=0, nanosec=33_333_333))
        chunk.header.stamp = ros_node.get_clock().now().to_msg()
        chunk.data = [0.1 * k] * (30 * len(JOINTS))
        chunk_pub.publish(chunk)
        sent_ids.append(k)
        diag = DiagnosticArray(
            status=[
                DiagnosticStatus(
                    level=DiagnosticStatus.WARN,
                    name="/executor: action executor",
                    message="starved: holding",
                    values=[KeyValue(key="starvation_s", value=f"{0.5 * k:.3f}"), KeyValue(key="output", value="x")],
                )
            ]
        )
        diag.header.stamp = ros_node.get_clock().now().to_msg()
        diag_pub.publish(diag)
        time.sleep(0.2)
    time.sleep(1.0)  # the last chunks and images reach the view
    assert view.stop() == 0, view.output()  # SIGINT: the view flushes its buffers and closes the file
    summary = json.loads(view.output().split("view summary: ", 1)[1].splitlines()[0])
    assert summary["missing"] == ["/cameras/top/image_raw"], summary
    assert "missing: no message on /cameras/top/image_raw while viewing" in view.output()

    entities = read_rrd(rrd)
    # Cameras: the two that publish, decimated to ~5 per second; the silent one is no entity, but listed.
    for camera in ("front", "wrist"):
        assert entities[f"/cameras/{camera}"].rows >= 5, camera
    assert "/cameras/top" not in entities
    table = entities["/view/topics"].texts()[-1]
    assert "| `/cameras/top/image_raw` | observation.images.top | 0 | 0.0 | MISSING (no message yet) |" in table
    assert any("no message on /cameras/top/image_raw" in t for t in entities["/view/problems"].texts())
    # Joint plots: state (100 Hz) and commanded action, in the contract's units (degrees).
    for joint in JOINTS:
        assert len(entities[f"/joints/{joint}.pos/state"].scalars()) > 100
        assert len(entities[f"/joints/{joint}.pos/action"].scalars()) > 100
    # The policy's chunks on the joint plots, converted to degrees: chunk k's steps are 0.1 k rad.
    expected = {round(math.degrees(0.1 * k), 3) for k in sent_ids}  # float32 on the wire: 3 decimals
    current = entities["/joints/gripper.pos/chunk/current"].scalars("ros_time")
    previous = entities["/joints/gripper.pos/chunk/previous"].scalars("ros_time")
    assert current.size > 30 and previous.size > 0
    assert {round(float(v), 3) for v in current} <= expected
    assert {round(float(v), 3) for v in previous} <= expected
    times = entities["/joints/gripper.pos/chunk/current"].times["ros_time"]
    assert times == sorted(times)  # one line forward in time, no zig-zag
    received = entities["/policy/chunk_id"].scalars("ros_time")
    assert len(received) >= 8 and set(received) <= set(sent_ids) and list(received) == sorted(received)
    # Recorder: the `recording` plot steps up and down at the episode's boundaries; events name the states.
    recording = entities["/recorder/recording"].scalars("ros_time")
    assert list(recording) == [0.0, 1.0, 0.0]
    assert entities["/recorder/events"].texts() == [
        "episode 0: idle (pick the cube)",
        "episode 0: recording (pick the cube)",
        "episode 0: saving (pick the cube)",
    ]
    # Executor diagnostics: numeric values as plots, the message once.
    base = "/diagnostics/executor_action_executor"
    starvation = entities[f"{base}/starvation_s"].scalars("ros_time")
    assert set(starvation) <= {0.5 * k for k in sent_ids} and len(starvation) >= 8
    assert entities[f"{base}/status"].texts() == ["/executor: action executor: starved: holding"]
