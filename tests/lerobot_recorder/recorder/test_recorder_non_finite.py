"""Issue 18: NaN/inf joint positions never reach a live recording; a root left before the first save is reused."""

from __future__ import annotations

import math
import threading
from pathlib import Path

import numpy as np
import pytest
from recorder_helpers import record_one_episode, start_recorder, start_streams

from lerobot_dataset import DatasetReader, DatasetWriter, feature_specs
from lerobot_dataset.validate import validate

pytestmark = pytest.mark.ros

JOINTS = ["shoulder_pan", "shoulder_lift", "elbow_flex", "wrist_flex", "wrist_roll", "gripper"]


def test_non_finite_joint_states_are_refused_and_never_recorded(processes, ros_node, tmp_path: Path) -> None:
    """A second publisher on the joint topic sends NaN/inf positions between the driver's valid ones."""
    from sensor_msgs.msg import JointState

    root = tmp_path / "ds"
    publisher = ros_node.create_publisher(JointState, "/follower/joint_states", 10)
    stop = threading.Event()

    def poison() -> None:
        bad = [math.nan, math.inf, -math.inf]
        i = 0
        while not stop.wait(0.01):
            msg = JointState(name=JOINTS, position=[0.1, bad[i % 3], 0.2, 0.3, 0.4, 0.5])
            msg.header.stamp = ros_node.get_clock().now().to_msg()
            publisher.publish(msg)
            i += 1

    thread = threading.Thread(target=poison, daemon=True)
    thread.start()
    try:
        start_streams(processes)
        recorder = start_recorder(processes, root, start_session=False, episode_time_s=2.0, reset_time_s=0.3)
        # Refused with its reason, counted as a bad message. The episode starts only after the recorder has seen
        # a poisoned sample: a publisher discovered after a short episode ended would test nothing.
        recorder.wait_for_output(r"non-finite value\(s\)", timeout=90)
        result, _ = record_one_episode(ros_node, "", 2.0)
        assert result.saved, result.message
    finally:
        stop.set()
        thread.join(5)
    assert validate(root) == []
    with DatasetReader(root) as reader:
        assert len(reader) > 30, recorder.output()[-3000:]  # "saved episode 0: N frames, M dropped" and why
        states = np.stack([np.asarray(reader[i]["observation.state"]) for i in range(len(reader))])
    assert np.isfinite(states).all()


def test_a_root_left_before_the_first_save_is_taken_over(processes, tmp_path: Path) -> None:
    root = tmp_path / "ds"
    from recorder_helpers import CONTRACT

    from lerobot_contract import load_contract

    contract = load_contract(CONTRACT)
    DatasetWriter.create(root, repo_id="local/killed", fps=30, features=feature_specs(contract)).close()
    assert "no committed episode" in validate(root)[0].message  # what a recorder killed before a save leaves
    start_streams(processes)
    recorder = start_recorder(processes, root, shutdown_when_done=True)
    assert recorder.wait(90) == 0, recorder.output()[-3000:]
    assert validate(root) == []
    with DatasetReader(root) as reader:
        assert reader.num_episodes == 1
