"""Absurd stamps into the live recorder (issue 18.1): refused and counted, never a hang or a cut episode.

One JointState and one Image stamped `sec = 2147483647` used to drag the recorder's clock 68 years ahead: the
tick walked every 1/30 s slot up to it holding the node's lock, so no status, no stop service, no SIGINT, and
the open episode was lost. A stamp of 0 or a negative one ended the episode as a "clock reset".
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest
from recorder_helpers import Diagnostics, start_recorder, start_streams, status_watcher

from lerobot_dataset import DatasetReader
from lerobot_dataset.validate import validate
from lerobot_ros.testing import call_service

pytestmark = pytest.mark.ros

JOINTS = ["shoulder_pan", "shoulder_lift", "elbow_flex", "wrist_flex", "wrist_roll", "gripper"]
FPS = 30


def _bad_messages() -> list[tuple[str, str, Any]]:
    """(topic, reason, message): a far-future JointState and Image, a JointState stamped 0, one stamped < 0."""
    from sensor_msgs.msg import Image, JointState

    def joint_state(sec: int) -> JointState:
        msg = JointState(name=JOINTS, position=[0.0] * 6, velocity=[0.0] * 6, effort=[0.0] * 6)
        msg.header.stamp.sec = sec
        return msg

    image = Image(height=240, width=320, encoding="rgb8", step=960, data=bytes(240 * 960))
    image.header.stamp.sec = 2_147_483_647
    return [
        ("/follower/joint_states", "future", joint_state(2_147_483_647)),
        ("/cameras/front/image_raw", "future", image),
        ("/follower/joint_states", "zero", joint_state(0)),
        ("/follower/joint_states", "negative", joint_state(-5)),
    ]


def test_absurd_stamps_mid_episode_are_refused_and_the_episode_is_saved_whole(
    processes, ros_node, tmp_path: Path
) -> None:
    from std_srvs.srv import Trigger

    root = tmp_path / "ds"
    watcher = status_watcher(ros_node)
    diagnostics = Diagnostics(ros_node)
    start_streams(processes)
    recorder = start_recorder(
        processes, root, episode_time_s=600.0, num_episodes=1, shutdown_when_done=True, diagnostics_period=0.2
    )
    before = watcher.wait_for(lambda m: m.state_name == "recording" and m.frames >= 30, 60, "30 recorded frames")

    messages = _bad_messages()
    publishers = {topic: ros_node.create_publisher(type(msg), topic, 10) for topic, _, msg in messages}
    for topic, publisher in publishers.items():
        deadline = time.monotonic() + 20
        while publisher.get_subscription_count() < 1:
            assert time.monotonic() < deadline, f"the recorder never subscribed to {topic} from the test node"
            time.sleep(0.05)
    expected: dict[str, int] = {}
    for topic, reason, msg in messages:
        # Best-effort subscription: publish again until the recorder has counted this one.
        expected[reason] = diagnostics.count(reason) + 1
        deadline = time.monotonic() + 30
        while diagnostics.count(reason) < expected[reason]:
            assert time.monotonic() < deadline, f"the {reason} stamp on {topic} was never counted: {diagnostics.values}"
            publishers[topic].publish(msg)
            time.sleep(0.5)
        expected[reason] = diagnostics.count(reason)
    injected = watcher.messages[-1]
    assert injected.state_name == "recording" and injected.episode_index == before.episode_index
    assert "sample ignored" in injected.message or watcher.wait_for(lambda m: "sample ignored" in m.message, 10)

    # The episode goes on after the bad stamps: frames keep coming in the same episode.
    watcher.mark()
    going = watcher.wait_for(
        lambda m: m.state_name == "recording" and m.frames >= injected.frames + 30, 60, "30 more frames"
    )
    assert going.episode_index == before.episode_index

    reply = call_service(ros_node, Trigger, "/recorder/stop_recording", Trigger.Request(), timeout=30)
    assert reply.success, reply.message
    assert recorder.wait(60) == 0
    assert validate(root) == []
    reader = DatasetReader(root)
    assert reader.num_episodes == 1
    first, last = reader.episode_range(0)
    frames = last - first
    # Nothing was cut at the bad stamps: the saved episode holds every frame recorded before and after them,
    # and about as many frames as the episode lasted (a clock reset used to save ~21 of ~89).
    assert frames >= going.frames
    assert frames + going.dropped >= 0.8 * going.elapsed_s * FPS
    assert [int(reader[i]["frame_index"]) for i in range(first, last)] == list(range(frames))
