"""lerobot_msgs types cross a real DDS graph between two processes unchanged."""

from __future__ import annotations

import sys
import threading
from pathlib import Path

import pytest

from lerobot_msgs.action import RecordEpisode
from lerobot_msgs.msg import ActionChunk, PolicyStatus, RecorderStatus
from lerobot_ros.executors import ActionClient
from lerobot_ros.testing import wait_for_messages

PEER = str(Path(__file__).with_name("msg_peer.py"))

pytestmark = pytest.mark.ros


def fields(msg: object) -> dict[str, object]:
    return {name: getattr(msg, name) for name in msg.get_fields_and_field_types()}  # type: ignore[attr-defined]


@pytest.mark.parametrize("msg_type", [ActionChunk, RecorderStatus, PolicyStatus])
def test_message_crosses_processes(msg_type, processes, ros_node):
    sys.path.insert(0, str(Path(PEER).parent))
    try:
        from msg_peer import samples
    finally:
        sys.path.pop(0)
    processes.start([sys.executable, PEER, "publish"], name="msg_peer")
    (received,) = wait_for_messages(ros_node, msg_type, f"/roundtrip/{msg_type.__name__}")
    expected = samples()[msg_type.__name__]
    assert received == expected, f"{fields(received)} != {fields(expected)}"


def test_action_chunk_layout_is_row_major():
    chunk = ActionChunk(names=["a", "b"], horizon=3, data=[float(i) for i in range(6)])
    rows = [list(chunk.data[k * len(chunk.names) : (k + 1) * len(chunk.names)]) for k in range(chunk.horizon)]
    assert rows == [[0.0, 1.0], [2.0, 3.0], [4.0, 5.0]]


def test_record_episode_action_round_trip(processes, ros_node):
    processes.start([sys.executable, PEER, "action_server"], name="action_peer")
    client = ActionClient(ros_node, RecordEpisode, "/record_episode")
    assert client.wait_for_server(timeout_sec=20), "RecordEpisode server not found"
    feedback: list[RecordEpisode.Feedback] = []
    accepted = threading.Event()
    finished = threading.Event()
    outcome: dict[str, object] = {}

    def on_goal(future):  # type: ignore[no-untyped-def]
        handle = future.result()
        outcome["accepted"] = handle.accepted
        accepted.set()
        handle.get_result_async().add_done_callback(lambda f: (outcome.update(result=f.result()), finished.set()))

    goal = RecordEpisode.Goal(task="stack", duration_s=2.0)
    client.send_goal_async(goal, feedback_callback=lambda m: feedback.append(m.feedback)).add_done_callback(on_goal)
    assert accepted.wait(20) and outcome["accepted"]
    assert finished.wait(20), "no result"
    result = outcome["result"].result  # type: ignore[attr-defined]
    assert (result.saved, result.episode_index, result.path, result.frames) == (True, 7, "/datasets/stack", 60)
    assert [f.frames for f in feedback] == [0, 10, 20]
    client.destroy()
