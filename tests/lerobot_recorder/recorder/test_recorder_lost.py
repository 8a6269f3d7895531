"""Messages lost before the recorder took them are counted and named, not silently missing (issue 18)."""

from __future__ import annotations

import signal
import time
from pathlib import Path

import pytest
from recorder_helpers import Diagnostics, record_one_episode, start_recorder, start_streams, status_watcher

pytestmark = pytest.mark.ros


def test_a_burst_that_overflows_the_subscription_queue_is_counted_as_lost(processes, ros_node, tmp_path: Path) -> None:
    """A burst of 300 images on one camera topic into a queue 1 deep while the recorder is stopped (SIGSTOP: a stall,
    deterministic; a burst alone was taken whole once when load slowed the publisher as much): delivered when it
    resumes, the queue keeps the newest, and the gaps in the burst publisher's sequence numbers are counted on
    /diagnostics, per topic."""
    from rclpy.qos import QoSProfile, ReliabilityPolicy
    from sensor_msgs.msg import Image

    diagnostics = Diagnostics(ros_node)
    watcher = status_watcher(ros_node)
    start_streams(processes)
    recorder = start_recorder(processes, tmp_path / "ds", start_session=False, queue_depth=1)
    watcher.wait_state("idle", timeout=40)
    before = diagnostics.wait_for(lambda v: "lost_messages" in v)
    topic = "/cameras/front/image_raw"
    publisher = ros_node.create_publisher(Image, topic, QoSProfile(depth=500, reliability=ReliabilityPolicy.RELIABLE))
    for _ in range(200):  # the recorder's subscription matched (messages before that reach nobody)
        if publisher.get_subscription_count() > 0:
            break
        time.sleep(0.05)
    assert publisher.get_subscription_count() > 0, "the recorder never subscribed to the burst's topic"

    def publish() -> None:
        msg = Image(height=1, width=1, encoding="rgb8", step=3, data=bytes(3))
        msg.header.stamp = ros_node.get_clock().now().to_msg()
        publisher.publish(msg)

    # Gaps are counted from the first message of a publisher the recorder takes: one that took none of this
    # publisher before the stall and then only the burst's newest (all 300 delivered before its executor ran)
    # saw no gap (a clean-clone run failed so). So it takes messages at 30 Hz for a second first.
    primers = 30
    for _ in range(primers):
        publish()
        time.sleep(1 / 30)
    count = 300
    recorder.send_signal(signal.SIGSTOP)
    try:
        for _ in range(count):
            publish()
    finally:
        recorder.send_signal(signal.SIGCONT)
    key = f"lost_messages.{topic}"
    published = primers + count

    def gap_counted(values: dict[str, str]) -> bool:
        # A gap shows when a message after it is taken. The stopped process's transport may have dropped the whole
        # burst (nothing of it is delivered on SIGCONT), so messages go on after it until one is taken.
        nonlocal published
        if int(values.get(key, "0")) > int(before.get(key, "0")):
            return True
        publish()
        published += 1
        return False

    values = diagnostics.wait_for(gap_counted)
    lost = int(values[key])
    assert 0 < lost < published, values  # lost: at most what was published but the one taken
    assert int(values["lost_messages"]) >= lost


def test_a_publisher_paused_at_the_episode_start_is_named_in_the_status(processes, ros_node, tmp_path: Path) -> None:
    """The joint states (published here, the cameras by the streams) pause from before the episode start to 0.5 s
    after it: frame 0 is where every topic has data (the rule shared with bag2dataset), so the episode is shorter
    -- which used to be silent (15 frames of a 1 s episode, 0 dropped, nothing said). The status and the log name
    the topic now. (Stopping the streams' process with SIGSTOP instead also delayed the recorder's goal response
    by more than 10 s once: a stopped DDS participant slows the others.)"""
    import threading

    from sensor_msgs.msg import JointState

    from lerobot_msgs.msg import RecorderStatus

    joints = ["shoulder_pan", "shoulder_lift", "elbow_flex", "wrist_flex", "wrist_roll", "gripper"]
    publisher = ros_node.create_publisher(JointState, "/follower/joint_states", 10)
    publishing, done = threading.Event(), threading.Event()
    publishing.set()

    def publish_joints() -> None:
        while not done.wait(0.01):
            if publishing.is_set():
                msg = JointState(name=joints, position=[0.1, 0.2, 0.3, 0.4, 0.5, 0.6])
                msg.header.stamp = ros_node.get_clock().now().to_msg()
                publisher.publish(msg)

    started = threading.Event()

    def on_start(_msg: RecorderStatus) -> None:
        started.set()
        threading.Timer(0.5, publishing.set).start()

    ros_node.create_subscription(RecorderStatus, "/recorder/episode_start", on_start, 10)
    diagnostics = Diagnostics(ros_node)
    watcher = status_watcher(ros_node)
    thread = threading.Thread(target=publish_joints, daemon=True)
    thread.start()
    try:
        # The streams' own joint states stay silent (a pause longer than the test).
        start_streams(processes, pause_topics=["/follower/joint_states"], pause_after_s=0.0, pause_for_s=3600.0)
        recorder = start_recorder(processes, tmp_path / "ds", start_session=False, episode_time_s=30.0)
        watcher.wait_state("idle", timeout=40)
        publishing.clear()
        result, _ = record_one_episode(ros_node, "pick the cube", 1.0)
    finally:
        done.set()
        thread.join(5)
    assert started.is_set()
    assert result.saved and result.frames <= 17, (result.frames, result.dropped)
    said = watcher.wait_for(lambda msg: "frame 0 is" in msg.message, what="the frame 0 message").message
    assert said.endswith("after the episode start: no sample of observation.state until then"), said
    values = diagnostics.wait_for(lambda v: "frame0_delay_s" in v)
    assert float(values["frame0_delay_s"]) >= 0.5 and values["lost_messages"] == "0", values
    assert "frame 0 is" in recorder.output()
