"""The recorder's task from a topic (`~/task`, std_msgs/String): the next episodes are stored with it, a task with
control characters is refused with the reason in the log, and the episode keeps the one it started with."""

from __future__ import annotations

import time

import pytest
from recorder_helpers import record_one_episode, start_recorder, start_streams, status_watcher

from lerobot_dataset import DatasetReader

pytestmark = pytest.mark.ros


def test_task_from_the_topic_is_stored_per_episode(tmp_path, processes, ros_node):
    from std_msgs.msg import String

    root = tmp_path / "ds"
    watcher = status_watcher(ros_node)
    start_streams(processes)
    recorder = start_recorder(processes, root, start_session=False, episode_time_s=30.0, reset_time_s=0.3)
    watcher.wait_state("idle", timeout=40)
    publisher = ros_node.create_publisher(String, "/recorder/task", 10)
    deadline = time.monotonic() + 30
    while publisher.get_subscription_count() < 1:  # a message published before discovery is lost
        assert time.monotonic() < deadline, "the recorder never subscribed to /recorder/task"
        time.sleep(0.05)

    result, _ = record_one_episode(ros_node, "", 0.5)  # empty goal task: the recorder's task parameter
    assert result.saved, result.message
    publisher.publish(String(data="wave at the camera"))
    watcher.wait_for(lambda msg: msg.task == "wave at the camera", what="task from ~/task")
    result, _ = record_one_episode(ros_node, "", 0.5)
    assert result.saved, result.message
    publisher.publish(String(data="two\nlines"))
    recorder.wait_for_output(r"task on ~/task refused: .*control characters", timeout=30)
    time.sleep(0.2)
    result, _ = record_one_episode(ros_node, "", 0.5)
    assert result.saved, result.message

    reader = DatasetReader(root)
    tasks = [reader[reader.episode_range(e)[0]]["task"] for e in range(reader.num_episodes)]
    assert tasks == ["pick the cube", "wave at the camera", "wave at the camera"]
